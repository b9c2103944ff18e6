"""The measurements, one function per part of the report. Each returns a JSON-able dict and
says what it is doing on stderr."""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import agents
from .agents import NotifyListener, RoundError, Started, read_cpu, read_status_kib, run_round
from .figures import Summary, alternate, ratio, summarize_rounds, summarize_trainer
from .install import Programs
from .places import netns_unavailable, place

#: Failure figures: 3 nodes in network namespaces, the daemon's default liveness timeout.
FAILURE_NODES = 3
FAILURE_LIVENESS = 5.0

DEFAULT_TRAINER_ARGS = ("--epochs", "1", "--threads", "1")


@dataclass(frozen=True)
class Options:
    parts: Sequence[str]
    wheres: Sequence[str]
    modes: Sequence[str]
    sizes: Sequence[int]
    runs: int
    cost_sizes: Sequence[int]
    cost_runs: int
    idle_seconds: float
    trainer_runs: int
    trainer_args: Sequence[str]
    settle: float
    timeout: float


def say(message: str) -> None:
    print(f"[compare {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- 1. rendezvous vs torchrun ---------------------------------------------------------------


def startup(opts: Options, workdir: Path, programs: Programs) -> dict:
    skipped = []
    why = programs.torchrun_missing
    tools = ["rendezvous", "torchrun"]
    if programs.torchrun is None:
        skipped.append({"what": "torchrun", "reason": why})
        say(f"skipping torchrun: {why}")
        tools = ["rendezvous"]
    wheres = list(opts.wheres)
    if "netns" in wheres and (reason := netns_unavailable()):
        skipped.append({"what": "netns", "reason": reason})
        say(f"skipping network namespaces: {reason}")
        wheres.remove("netns")
    rows = []
    for where in wheres:
        for n in opts.sizes:
            with place(where, n) as hosts:
                for mode in opts.modes:
                    rounds: dict[str, list] = {t: [] for t in tools}
                    for run, tool in alternate(tools, opts.runs):
                        r = run_round(tool, hosts, n, mode == "warm", workdir, programs,
                                      settle=opts.settle, timeout=opts.timeout)
                        rounds[tool].append(r)
                        say(f"{where} N={n} {mode} run {run + 1}/{opts.runs} {tool}: "
                            f"{r.latency:.3f} s, skew {r.skew * 1000:.1f} ms")
                        time.sleep(0.3)
                    row = {"where": where, "mode": mode, "n": n,
                           "tools": {t: summarize_rounds(rs) for t, rs in rounds.items()}}
                    if "torchrun" in rounds:
                        row["ratio"] = ratio(row["tools"]["torchrun"]["latency"]["median"],
                                             row["tools"]["rendezvous"]["latency"]["median"])
                        # run i of one tool against run i of the other: how much the ratio moves
                        row["ratio_runs"] = Summary.of(
                            t.latency / r.latency for t, r in zip(rounds["torchrun"], rounds["rendezvous"])
                        ).to_json()
                    rows.append(row)
    return {"tools": tools, "runs": opts.runs, "settle": opts.settle, "skipped": skipped, "rows": rows}


# -- 2. hand-written TF_CONFIG vs rendezvous join --------------------------------------------


def trainer(opts: Options, workdir: Path, programs: Programs) -> dict:
    if importlib.util.find_spec("tensorflow") is None:
        reason = "tensorflow is not installed (pip install -e '.[trainer]')"
        say(f"skipping the trainer: {reason}")
        return {"skipped": reason}
    tools = ["tf_config", "rendezvous"]
    # The first TensorFlow start of the part reads its libraries from disk (2-3 s slower in the
    # full runs of 13:46 and 14:35): an unmeasured round each way takes that out of the figures.
    warm_up = 1 if opts.trainer_runs > 1 else 0  # --quick: one run, no warm-up

    def once(tool: str) -> dict:
        return agents.trainer_round(tool, workdir, programs, opts.trainer_args, timeout=max(opts.timeout, 600))

    for tool in tools * warm_up:
        say(f"trainer warm-up {tool}: first step {once(tool)['first_step']:.2f} s (not counted)")
    runs: dict[str, list[dict]] = {t: [] for t in tools}
    for run, tool in alternate(tools, opts.trainer_runs):
        r = once(tool)
        runs[tool].append(r)
        say(f"trainer run {run + 1}/{opts.trainer_runs} {tool}: trainer started {r['started']:.2f} s, "
            f"first step {r['first_step']:.2f} s, total {r['total']:.2f} s")
    return {"args": ["python", "-m", "trainer", *opts.trainer_args], "runs": opts.trainer_runs,
            "warm_up": warm_up, **summarize_trainer(runs)}


# -- 3. what the daemon costs ----------------------------------------------------------------

IDLE_SETTLE = 3.0  # seconds after READY before idle CPU is counted: zeroconf's first announcements


def daemon(opts: Options, workdir: Path, programs: Programs) -> dict:
    where = "netns" if "netns" in opts.wheres and not netns_unavailable() else "loopback"
    out: dict = {"where": where}
    with NotifyListener(workdir / "notify.sock") as notify:
        with place(where, 2) as hosts:
            out.update(_ready_idle_job(opts, workdir, programs, hosts, notify))
        if where == "netns":
            out["release"] = _release_cpu(opts, workdir, programs, notify)
        else:
            out["release_skipped"] = f"needs network namespaces: {netns_unavailable()}"
            say(f"skipping CPU at release for N={','.join(map(str, opts.cost_sizes))}: "
                f"{out['release_skipped']}")
    return out


def _start_daemon(programs: Programs, hosts, i: int, job: str, command: Sequence[str],
                  notify: NotifyListener, started: Started, workdir: Path, timeout: float) -> tuple[int, float]:
    argv = agents.rendezvous_argv(programs.rendezvous, 2, job, hosts.address(i) if hosts.name == "loopback" else None,
                                  command, timeout)
    env = agents.clean_env(NOTIFY_SOCKET=notify.path, RENDEZVOUS_RUNTIME_DIR=str(workdir / "run"))
    launched = time.time()
    proc = started.start(hosts.wrap(i, argv), workdir / f"{job}-{i}.log", env)
    ready = notify.wait_ready(proc.pid, time.monotonic() + 60)
    return proc.pid, ready - launched


def _ready_idle_job(opts: Options, workdir: Path, programs: Programs, hosts, notify: NotifyListener) -> dict:
    timeout = opts.idle_seconds + IDLE_SETTLE + opts.timeout
    ready_times = []
    for run in range(opts.cost_runs):
        with Started() as started:
            pid, seconds = _start_daemon(programs, hosts, 0, f"cmp-{secrets.token_hex(4)}", ["true"], notify,
                                         started, workdir, timeout)
            ready_times.append(seconds)
            os.kill(pid, signal.SIGTERM)
            started.procs[0].wait(10)
            notify.take([pid])
        say(f"daemon start -> ready run {run + 1}/{opts.cost_runs}: {seconds:.3f} s")

    job = f"cmp-{secrets.token_hex(4)}"
    hold = 3.0
    with Started() as started:
        a, _ = _start_daemon(programs, hosts, 0, job, agents.record_command(workdir / f"{job}-a0", hold), notify,
                             started, workdir, timeout)
        say(f"daemon idle for {IDLE_SETTLE:g} + {opts.idle_seconds:g} s")
        time.sleep(IDLE_SETTLE)
        cpu0 = read_cpu(a)
        time.sleep(opts.idle_seconds)
        cpu1 = read_cpu(a)
        idle_rss = read_status_kib(a, "VmRSS")
        if cpu0 is None or cpu1 is None or idle_rss is None:
            raise RoundError("the idle daemon exited early:\n" + agents.tail(started.logs[0]))
        b, _ = _start_daemon(programs, hosts, 1, job, agents.record_command(workdir / f"{job}-a1", hold), notify,
                             started, workdir, timeout)
        deadline = time.monotonic() + 60
        while not all((workdir / f"{job}-a{i}.start").exists() for i in range(2)):
            if time.monotonic() > deadline:
                raise RoundError("the job's commands never started")
            time.sleep(0.02)
        time.sleep(hold / 2)
        job_rss = [read_status_kib(p, "VmRSS") for p in (a, b)]
        job_hwm = [read_status_kib(p, "VmHWM") for p in (a, b)]
        started.wait(time.monotonic() + 60)
        notify.take([a, b])
    cpu = cpu1 - cpu0
    return {
        "start_to_ready": Summary.of(ready_times).to_json(),
        "start_to_ready_runs": ready_times,
        "idle": {"seconds": opts.idle_seconds, "after_ready": IDLE_SETTLE, "cpu_seconds": cpu,
                 "cpu_percent": 100 * cpu / opts.idle_seconds, "rss_kib": idle_rss},
        "job": {"rss_kib": job_rss, "hwm_kib": job_hwm, "read_after": hold / 2},
    }


def _release_cpu(opts: Options, workdir: Path, programs: Programs, notify: NotifyListener) -> list[dict]:
    rows = []
    for n in opts.cost_sizes:
        with place("netns", n) as hosts:
            rounds = []
            for run in range(opts.cost_runs):
                r = run_round("rendezvous", hosts, n, False, workdir, programs, settle=opts.settle,
                              timeout=max(opts.timeout, 60 + 2 * n), notify=notify)
                rounds.append(r)
                say(f"daemon CPU N={n} run {run + 1}/{opts.cost_runs}: median "
                    f"{Summary.of(r.agent_cpu).median:.2f} s, max {max(r.agent_cpu):.2f} s; "
                    f"all started {r.latency:.2f} s after the last launch")
                time.sleep(0.3)
        rows.append({"n": n, **summarize_rounds(rounds)})
    return rows


# -- 4. failures -----------------------------------------------------------------------------


def failures(opts: Options, workdir: Path, programs: Programs) -> dict:
    """Fault -> every other command stopped, and -> every command running again, per fault
    kind, as bench/restart_bench.py measures them (its docstring says how)."""
    unavailable = netns_unavailable()
    if unavailable:
        return {"available": False, "reason": f"needs network namespaces: {unavailable}"}
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import restart_bench
    from netns import Network

    rows = []
    with Network(FAILURE_NODES) as net:
        for fault in restart_bench.FAULTS:
            say(f"failures: {fault} x {opts.runs}")
            try:
                runs = [restart_bench.one_run(fault, net.hosts, FAILURE_LIVENESS, opts.settle, programs.python)
                        for _ in range(opts.runs)]
            except TimeoutError as e:
                raise RoundError(f"fault {fault}: {e}") from None
            running = [r[1] for r in runs if r[1] is not None]
            rows.append({
                "fault": fault,
                "stopped": Summary.of(r[0] for r in runs).to_json(),
                "running": Summary.of(running).to_json() if running else None,
            })
    return {"available": True, "nodes": FAILURE_NODES, "liveness_timeout": FAILURE_LIVENESS,
            "settle": opts.settle, "rows": rows}
