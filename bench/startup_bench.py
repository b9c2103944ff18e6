"""What each start-up measure of the `rendezvous` command (rendezvous.cli.startup) saves:
the command run as a one-node job (`join --expect 1 -- true`: start, the round, the command,
the end), once with every measure and once without each in turn, the variants interleaved
run by run so that a machine loaded by others weighs on all alike. Per variant: the median
(and range) of the process's CPU seconds (user + system, its gate and command included) and
its peak RSS, and the difference to every measure on.

    all      every measure
    -ssl     ssl imported as usual (asyncio imports it, and it loads OpenSSL)
    -gc      the cyclic collector on while importing, nothing frozen
    -defer   protobuf's pure-Python message layer and ifaddr imported when imported
    -sha2    the frozen list's digest through hashlib (OpenSSL) rather than CPython's own
    -record  rendezvous.core.record as frozen dataclasses
    main     the command as installed (rendezvous.__main__), for a tree given with --root
             beside this one (--only main, then --root OTHER --only main)

    python bench/startup_bench.py [--runs 9] [--only all,-ssl]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

VARIANTS = ("all", "-ssl", "-gc", "-defer", "-sha2", "-record")

# rendezvous.core.record, written with dataclasses: what the record classes replaced.
RECORD_AS_DATACLASSES = '''
import dataclasses, sys, types
shim = types.ModuleType("rendezvous.core.record")
shim.FrozenError = dataclasses.FrozenInstanceError
shim.field = dataclasses.field
shim.replace = dataclasses.replace
shim.asdict = dataclasses.asdict
shim.fields = lambda value: tuple(f.name for f in dataclasses.fields(value))
def record(cls=None, *, repr=True, order=False):
    make = dataclasses.dataclass(frozen=True, repr=repr, order=order)
    return make if cls is None else make(cls)
shim.record = record
sys.modules["rendezvous.core.record"] = shim
'''

PROBE = '''
import sys
variant = sys.argv[1]
sys.argv = ["rendezvous", *sys.argv[2:]]
if variant == "-sha2":
    sys.modules["_sha2"] = sys.modules["_sha256"] = None
if variant == "-record":
    exec(RECORD)
if variant == "main":
    from rendezvous.__main__ import main
    sys.exit(main())
from rendezvous.cli import startup
spare = startup.prepare(sys.argv[1:], leave_out={"-ssl": {"ssl"}, "-gc": {"gc"}, "-defer": {"defer"}}.get(variant, ()))
from rendezvous.cli import main as cli
sys.exit(cli.main(spare=spare))
'''


def one_run(variant: str, run: int, root: Path = ROOT) -> tuple[float, int]:
    argv = ["join", "--expect", "1", "--address", "127.0.0.1", "--job", f"startup-{os.getpid()}-{run}-{variant}",
            "--", "true"]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-c", PROBE.replace("exec(RECORD)", f"exec({RECORD_AS_DATACLASSES!r})"),
                             variant, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{variant}: exit status {proc.returncode}\n{proc.stderr.read().decode()}")  # type: ignore[union-attr]
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--only", default=",".join(VARIANTS))
    parser.add_argument("--json", metavar="FILE", help="also write every run's figures here")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to run (default this one)")
    args = parser.parse_args()
    variants = args.only.split(",")
    figures: dict[str, list[tuple[float, int]]] = {v: [] for v in variants}
    for run in range(args.runs):
        for variant in variants[run % len(variants):] + variants[:run % len(variants)]:
            figures[variant].append(one_run(variant, run, args.root))
        print(f"run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)
        time.sleep(0.2)
    base = figures.get("all")
    print(f"{'variant':8} {'CPU ms':>8} {'range':>13} {'peak RSS MiB':>13} {'range':>13} {'saves CPU':>10} {'saves RSS':>10}")
    for variant, runs in figures.items():
        cpu = [c * 1e3 for c, _ in runs]
        rss = [r / 1024 for _, r in runs]
        line = (f"{variant:8} {statistics.median(cpu):8.0f} {min(cpu):6.0f}-{max(cpu):<6.0f} "
                f"{statistics.median(rss):13.1f} {min(rss):6.1f}-{max(rss):<6.1f}")
        if base and variant != "all":
            line += (f" {statistics.median(cpu) - statistics.median(c * 1e3 for c, _ in base):8.0f} ms"
                     f" {statistics.median(rss) - statistics.median(r / 1024 for _, r in base):7.1f} MiB")
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
