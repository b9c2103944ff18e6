"""rendezvous side by side with what users would pick instead, in one run on one machine.

1. startup   rendezvous join vs torchrun c10d (the `bench` extra), loopback and network
             namespaces, N agents each starting a fork of `date`: last launch -> every command
             started, start skew, agent CPU and RSS; cold (all at once) and warm (N-1 waiting).
2. trainer   the bundled trainer on 2 workers with a hand-written TF_CONFIG vs through
             `rendezvous join`: start -> trainer started (what rendezvous adds), -> first
             training step, and total time; after one run each way not counted.
3. daemon    launch -> ready, CPU and RSS while idle, RSS during a job, and each daemon's CPU
             seconds from start to release for N = 2..64 daemons in namespaces.
4. failures  fault -> every command stopped / running again, per fault kind, 3 nodes in
             namespaces (bench/restart_bench.py).

The agents run from a venv that this command makes, holding a wheel of this checkout (built
offline) and torchrun's console script, both started the way users start them
(comparison/install.py): an editable checkout would add an import hook to every start.

Writes PREFIX.md (the report) and PREFIX.json (every run's figures), and prints the report.
`--baseline OLD.json` adds the change of every ratio (torchrun/rendezvous,
rendezvous/TF_CONFIG) and exits 1 if one got worse by more than --tolerance (20%).
Network namespaces need root; without root, or without torch, those parts are skipped and
the report says why.

    sudo .venv/bin/python bench/compare.py                 # everything, about 20 minutes
    sudo .venv/bin/python bench/compare.py --quick         # a smoke run, about 2 minutes
    .venv/bin/python bench/compare.py --parts trainer --trainer-runs 3
    .venv/bin/python bench/compare.py --render OLD.json --baseline OLDER.json

Exit status: 0 done; 1 a ratio got worse than the baseline allows; 2 bad options or files;
3 a measurement failed (an agent exited non-zero or timed out; the other parts are measured
all the same, and the report shows the failed one with the logs that say why), or this
checkout could not be installed into the venv the agents run from (pip's output is shown),
or the report could not be written (it is printed, and the figures with it); 130 stopped
by Ctrl-C, SIGTERM or SIGHUP (namespaces and agents are removed first).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Optional, Sequence

from comparison import markdown, measure
from comparison.agents import RoundError
from comparison.figures import DEFAULT_TOLERANCE, compare_with_baseline, parse_choices, parse_sizes
from comparison.install import INSTALLED_AS, InstallError, Programs, install
from comparison.machine import describe_machine, versions
from comparison.places import stop_on_sigterm

BENCH = Path(__file__).resolve().parent
#: The parts in the order they are measured, each by the function of its name in comparison.measure.
PARTS = ("startup", "trainer", "daemon", "failures")
HOSTS = ("loopback", "netns")
MODES = ("cold", "warm")
EXIT_WORSE, EXIT_FAILED = 1, 3  # 2: bad options, from argparse
SCHEMA = 1

#: (full run, --quick); an option given on the command line wins over both.
DEFAULTS = {
    "sizes": ("2,4,8", "2"),
    "runs": (5, 2),
    "cost_sizes": ("2,4,8,16,32,64", "2,4"),
    "cost_runs": (3, 1),
    "idle_seconds": (60.0, 5.0),
    "trainer_runs": (5, 1),
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="bench/compare.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default=",".join(PARTS), help=f"which parts, of {','.join(PARTS)} (default all)")
    p.add_argument("--hosts", default=",".join(HOSTS), help="loopback, netns or both (default both)")
    p.add_argument("--modes", default=",".join(MODES), help="cold, warm or both (default both)")
    p.add_argument("--sizes", help="agent counts for the startup part (default 2,4,8; --quick 2)")
    p.add_argument("--runs", type=int, help="runs per tool and size (default 5; --quick 2)")
    p.add_argument("--cost-sizes", help="daemon counts for CPU at release (default 2,4,8,16,32,64; --quick 2,4)")
    p.add_argument("--cost-runs", type=int, help="runs for start -> ready and each cost size (default 3; --quick 1)")
    p.add_argument("--idle-seconds", type=float, help="idle CPU measured over this long (default 60; --quick 5)")
    p.add_argument("--trainer-runs", type=int,
                   help="runs per way of starting the trainer (default 5; --quick 1); with more "
                        "than 1, one more run each way comes first and is not counted")
    p.add_argument("--trainer-args", default=" ".join(measure.DEFAULT_TRAINER_ARGS),
                   help="options of `python -m trainer` (default %(default)r)")
    p.add_argument("--settle", type=float, default=1.0,
                   help="warm mode: seconds between the N-1 waiting and the last launch (default 1)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one round may take (default 120)")
    p.add_argument("--quick", action="store_true", help="a short smoke run (smaller defaults above)")
    p.add_argument("--output", metavar="PREFIX",
                   help="write PREFIX.json and PREFIX.md (default bench/results/compare-<date>)")
    p.add_argument("--baseline", metavar="FILE", help="a previous JSON result to compare the ratios with")
    p.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE,
                   help="flag a ratio worse than the baseline by more than this (default 0.2 = 20%%)")
    p.add_argument("--render", metavar="FILE", help="measure nothing: print the report of a JSON result")
    p.add_argument("--keep", action="store_true", help="keep the agents' logs and records (path printed)")
    return p


def resolve(args: argparse.Namespace) -> measure.Options:
    """The options with --quick and the defaults filled in; ValueError names a bad one."""
    pick = {k: (getattr(args, k) if getattr(args, k) is not None else v[1 if args.quick else 0])
            for k, v in DEFAULTS.items()}
    for name in ("runs", "cost_runs", "trainer_runs"):
        if pick[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {pick[name]}")
    if not pick["idle_seconds"] > 0:
        raise ValueError(f"--idle-seconds must be positive, got {pick['idle_seconds']}")
    if not args.settle >= 0 or not args.timeout > 0:
        raise ValueError("--settle must be >= 0 and --timeout > 0")
    if not 0 < args.tolerance < 10:
        raise ValueError(f"--tolerance must be between 0 and 10, got {args.tolerance}")
    return measure.Options(
        parts=parse_choices(args.parts, "--parts", PARTS),
        wheres=parse_choices(args.hosts, "--hosts", HOSTS),
        modes=parse_choices(args.modes, "--modes", MODES),
        sizes=parse_sizes(pick["sizes"], "--sizes", 2, 64),
        runs=pick["runs"],
        cost_sizes=parse_sizes(pick["cost_sizes"], "--cost-sizes", 2, 200),
        cost_runs=pick["cost_runs"],
        idle_seconds=pick["idle_seconds"],
        trainer_runs=pick["trainer_runs"],
        trainer_args=shlex.split(args.trainer_args),
        settle=args.settle,
        timeout=args.timeout,
    )


def shown_command(argv: Sequence[str]) -> str:
    """How this run was started, with paths under the current directory made relative."""
    def rel(path: str) -> str:
        try:
            return os.path.relpath(path) if Path(path).absolute().is_relative_to(Path.cwd()) else path
        except ValueError:
            return path
    return shlex.join([rel(sys.executable), rel(argv[0]), *argv[1:]])


def load_result(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the result {path}: {e}") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a result of bench/compare.py (schema {SCHEMA})")
    try:  # a truncated or hand-edited file fails here, not halfway through a report
        markdown.render(data)
        compare_with_baseline(data, data, DEFAULT_TOLERANCE)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"{path} is not a complete result of bench/compare.py: {type(e).__name__}: {e}") from None
    return data


def add_baseline(result: dict, path: str, tolerance: float) -> bool:
    """Put the comparison into `result`; True when a ratio is flagged."""
    base = load_result(path)
    changes = compare_with_baseline(result, base, tolerance)
    result["baseline"] = {"file": path, "date": base.get("date"), "tolerance": tolerance,
                          "changes": [asdict(c) for c in changes]}
    return any(c.flagged for c in changes)


def measure_all(opts: measure.Options, workdir: Path, programs: Programs, result: dict) -> list[str]:
    """Measure each chosen part into `result`, noting the load average before each; a part
    whose measurement fails is noted as failed, and the others go on. The failed parts."""
    failed = []
    for name in opts.parts:
        if name != "failures":
            result["load_average"]["before_part"][name] = list(os.getloadavg())
        try:
            result[name] = getattr(measure, name)(opts, workdir, programs)
        except RoundError as e:
            print(f"compare: a measurement of the {name} part failed: {e}", file=sys.stderr)
            result[name] = {"failed": str(e)}
            failed.append(name)
    return failed


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv[1:])
    try:
        opts = resolve(args)
        if args.render:
            result = load_result(args.render)
            worse = add_baseline(result, args.baseline, args.tolerance) if args.baseline else False
            print(markdown.render(result), end="")
            return EXIT_WORSE if worse else 0
        if args.baseline:
            load_result(args.baseline)  # a bad file fails now, not after half an hour
    except ValueError as e:
        parser.error(str(e))

    if min(opts.runs, opts.trainer_runs) < 5 and not args.quick:
        measure.say("fewer than 5 runs: medians of so few runs are not figures to quote")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    prefix = Path(args.output) if args.output else BENCH / "results" / f"compare-{stamp}"
    try:  # fail now, not after the measurements
        prefix.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        parser.error(f"cannot write the report to {prefix.parent}: {e.strerror or e}")
    workdir = Path(tempfile.mkdtemp(prefix="rendezvous-compare-"))
    # Every torchrun agent leaves a torchelastic_* directory in its temporary directory:
    # the agents' temporary directory is removed with the rest.
    (workdir / "tmp").mkdir()
    os.environ["TMPDIR"] = str(workdir / "tmp")
    result: dict = {
        "schema": SCHEMA,
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "command": shown_command(argv),
        "quick": args.quick,
        "machine": describe_machine(),
        "versions": versions(),
        "options": {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in asdict(opts).items()},
        "load_average": {"before": list(os.getloadavg()), "before_part": {}},
    }
    code, failed = 0, []
    try:
        measure.say("installing this checkout into a venv of its own, as users install it")
        programs = install(workdir)
        result["programs"] = INSTALLED_AS
        failed = measure_all(opts, workdir, programs, result)
    except InstallError as e:
        print(f"compare: cannot install this checkout: {e}", file=sys.stderr)
        code = EXIT_FAILED
    except KeyboardInterrupt:
        print("compare: interrupted", file=sys.stderr)
        code = 130
    finally:
        if args.keep:
            measure.say(f"kept the agents' logs and records in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    if code:
        return code
    result["load_average"]["after"] = list(os.getloadavg())
    worse = add_baseline(result, args.baseline, args.tolerance) if args.baseline else False
    report = markdown.render(result)
    print(report, end="")
    try:
        Path(f"{prefix}.json").write_text(json.dumps(result, indent=1) + "\n")
        Path(f"{prefix}.md").write_text(report)
    except OSError as e:  # the report is printed above; the figures go to stdout instead
        print(f"compare: cannot write {prefix}.md and .json ({e.strerror or e}); the figures:", file=sys.stderr)
        print(json.dumps(result, indent=1))
        return EXIT_FAILED
    measure.say(f"wrote {prefix}.md and {prefix}.json")
    if failed:
        measure.say(f"the measurement of {', '.join(failed)} failed (the report says why)")
        return EXIT_FAILED
    if worse:
        measure.say(f"a ratio got worse than the baseline by more than {args.tolerance:.0%}")
        return EXIT_WORSE
    return 0


if __name__ == "__main__":
    stop_on_sigterm()  # a stopped run removes its namespaces, as after Ctrl-C
    sys.exit(main())
