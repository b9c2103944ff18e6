"""--prewarm: how soon the bundled trainer trains again, warm vs `--prewarm none`, side by side in
one run: `rendezvous join` x 2, one per network namespace (needs root), digits trainer with
--threads 1 and one shared --backup-dir.

    restart   kill -9 of one worker's trainer in epoch 2 -> the first training step of the
              next round (the latest of the two workers' first steps; each worker's result
              file says when its last process took its first step)
    at        the same, with the kill --fault-after seconds (default 10) after the round's
              start (its freeze), whether the spare is ready or not; the row
              also says when the spare had imported, counted from the round's start
              (spare_ready_s; None: not by the kill)
    cold      the last daemon launched -> the first training step of round 1, against the
              same trainer started by hand in both namespaces with a hand-written TF_CONFIG
    admission a third node joins a job of two running with --expect 2:3: its launch -> the
              first training step of the round of three (--kinds admission)
    spare     the resident memory of the warm spare (the next round's interpreter, TensorFlow
              imported) on the killed worker's node, read while round 1 runs

Each measurement is appended to --results as one JSON line as soon as it is made, and a run
given the same file goes on where the last one stopped (pairs already measured are kept):

    python bench/prewarm_bench.py --pairs 10 --results prewarm-results.jsonl

A lab runs the same on its GPU machines, where the import is what it is there, without
namespaces: `bench/prewarm_bench.py --print` summarizes a results file; the measured command
lines are in `join_argv` and `by_hand` below (one host per node, `--peer` if multicast does
not pass).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))  # netns, imported by main() (bench/prewarm_lab.py needs not)

EPOCHS = 8
TRAINER = ["--threads", "1", "--epochs", str(EPOCHS), "--steps-per-epoch", "100"]
DAEMON = ["--liveness-timeout", "3", "--timings", "keepalive=1.5,suspect-after=1,end-grace=0.5",
          "--stop-grace", "3", "--abort-grace", "1", "--timeout", "300", "--log-format", "plain"]


def join_argv(job: str, prewarm: str, work: Path, name: str, expect: str = "2", options=()) -> list[str]:
    return [sys.executable, "-m", "rendezvous", "join", "--expect", expect, "--job", job, "--prewarm", prewarm,
            *DAEMON, *options, "--", sys.executable, "-m", "trainer", *TRAINER, "--backup-dir", str(work / "backup"),
            "--result-file", str(work / f"{name}.json")]


def by_hand(work: Path, name: str) -> list[str]:
    return [sys.executable, "-m", "trainer", *TRAINER[:2], "--epochs", "1", "--steps-per-epoch", "5",
            "--result-file", str(work / f"{name}.json")]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def started(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rpartition(b")")[2].split()[19])


def trainers(daemon: int) -> tuple[list[int], list[int]]:
    """(the running trainer, the waiting warm spares) below a daemon's gates: the oldest gate
    runs the round, a younger one waits for the next. (/proc/PID/environ cannot tell them
    apart: it shows a warm interpreter's environment from its start, not the round's.)"""
    try:
        gates = sorted(children(daemon), key=started)
    except OSError:
        return [], []
    below = [children(g) for g in gates]
    return (below[0] if below else []), [p for b in below[1:] for p in b]


def settled(daemon: int):
    """The spares' resident memory once it stopped growing for a second (their imports done)."""
    spares = trainers(daemon)[1]
    if not spares:
        return None
    before = sum(rss_mib(p) for p in spares)
    time.sleep(1.0)
    after = sum(rss_mib(p) for p in trainers(daemon)[1])
    return after if after == before and after > 100 else None


def ready(pid: int) -> bool:
    """Whether a warm interpreter waits for its release: blocked reading a pipe (its imports
    done), as /proc/PID/syscall shows (read is 0 on x86_64, 63 on aarch64; root reads it)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            fields = f.read().split()
        return fields[0] in ("0", "63") and os.readlink(f"/proc/{pid}/fd/{int(fields[1], 16)}").startswith("pipe:")
    except (OSError, IndexError, ValueError):
        return False


def wait(predicate, what: str, timeout: float = 600.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {timeout:.0f}s: {what}")
        time.sleep(0.05)


def start_job(net, prewarm: str, prefix: str, job_prefix: str):
    """A job of one daemon per host in a new work folder: (the folder, the daemons, worker 1's log)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    job = f"{job_prefix}-{secrets.token_hex(3)}"
    logs = [open(work / f"{h.name}.log", "w") for h in net.hosts]
    daemons = [h.popen(join_argv(job, prewarm, work, h.name), stdout=log, stderr=subprocess.STDOUT)
               for h, log in zip(net.hosts, logs)]
    return work, daemons, work / f"{net.hosts[1].name}.log"


def kill_and_time(net, work: Path, daemons, trainer: int) -> float:
    """kill -9 of `trainer`, the job run to its end: how long until the latest worker's first
    training step of the next round."""
    killed = time.time()
    os.kill(trainer, signal.SIGKILL)
    codes = [d.wait(timeout=600) for d in daemons]
    if codes != [0, 0]:
        raise SystemExit(f"the job failed ({codes}): see {work}")
    firsts = [json.loads((work / f"{h.name}.json").read_text())["timing"]["first_step_unix"] for h in net.hosts]
    return max(firsts) - killed


def restart_run(net, prewarm: str) -> dict:
    work, daemons, victim_log = start_job(net, prewarm, "prewarm-", "w")
    wait(lambda: re.search(rf"epoch 1/{EPOCHS}\b", victim_log.read_text()), f"epoch 1 in {victim_log}")
    # killed in epoch 2 or later (an epoch takes about a second here)
    running, spares = wait(lambda: (t := trainers(daemons[1].pid))[0] and t, "the trainer")
    spare_rss = None
    if prewarm != "none":  # a failure after a while of training: the spare has warmed
        spare_rss = wait(lambda: settled(daemons[1].pid), "the warm spare's import")
    seconds = kill_and_time(net, work, daemons, running[0])
    return {"kind": "restart", "prewarm": prewarm, "seconds": seconds, "spare_rss_mib": spare_rss}


def at_run(net, prewarm: str, fault_after: float) -> dict:
    """kill -9 of worker 1's trainer `fault_after` seconds after its round started (its freeze)
    -> the first training step of the next round; and when the next round's spare had
    imported, from the round's start."""
    work, daemons, victim_log = start_job(net, prewarm, "prewarm-at-", "t")
    # the round's start: its freeze, a few milliseconds before its release (the start line
    # comes later when the command waits for a warm interpreter still importing)
    wait(lambda: re.search(r"round 1 frozen", victim_log.read_text()), f"round 1's freeze in {victim_log}")
    began = time.time()
    running = wait(lambda: trainers(daemons[1].pid)[0], "the trainer")
    spare_ready = None
    while time.time() < began + fault_after:
        spares = trainers(daemons[1].pid)[1]
        if spare_ready is None and spares and all(ready(p) for p in spares):
            spare_ready = time.time() - began
        time.sleep(0.05)
    seconds = kill_and_time(net, work, daemons, running[0])
    return {"kind": "at", "prewarm": prewarm, "fault_after": fault_after, "seconds": seconds,
            "spare_ready_s": spare_ready}


def admission_run(net, prewarm: str) -> dict:
    """A third node joins an elastic job (--expect 2:3) of two that trains: its launch -> the
    first training step of the round of three."""
    work = Path(tempfile.mkdtemp(prefix="prewarm-admit-"))
    job = f"a-{secrets.token_hex(3)}"
    logs = [open(work / f"{h.name}.log", "w") for h in net.hosts]
    argvs = [join_argv(job, prewarm, work, h.name, expect="2:3", options=["--settle", "1"]) for h in net.hosts]
    daemons = [h.popen(argv, stdout=log, stderr=subprocess.STDOUT)
               for h, argv, log in list(zip(net.hosts, argvs, logs))[:2]]
    first_log = work / f"{net.hosts[1].name}.log"
    wait(lambda: re.search(rf"epoch 1/{EPOCHS}\b", first_log.read_text()), f"epoch 1 in {first_log}")
    if prewarm != "none":
        wait(lambda: settled(daemons[1].pid), "the warm spare's import")
    launched = time.time()
    daemons.append(net.hosts[2].popen(argvs[2], stdout=logs[2], stderr=subprocess.STDOUT))
    codes = [d.wait(timeout=900) for d in daemons]
    if codes != [0, 0, 0]:
        raise SystemExit(f"the elastic job failed ({codes}): see {work}")
    firsts = [json.loads((work / f"{h.name}.json").read_text())["timing"]["first_step_unix"] for h in net.hosts]
    return {"kind": "admission", "prewarm": prewarm, "seconds": max(firsts) - launched}


def cold_run(net, how: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="prewarm-cold-"))
    if how == "by-hand":
        ports = [23456 + i for i in range(2)]
        cluster = {"worker": [f"{h.address}:{p}" for h, p in zip(net.hosts, ports)]}
        procs = []
        for i, h in enumerate(net.hosts):
            env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
            launched = time.time()
            procs.append(h.popen(by_hand(work, h.name), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    else:
        job = f"c-{secrets.token_hex(3)}"
        procs = []
        for h in net.hosts:
            argv = join_argv(job, how, work, h.name)
            argv = argv[:argv.index("--") + 1] + by_hand(work, h.name)
            launched = time.time()
            procs.append(h.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if [p.wait(timeout=600) for p in procs] != [0, 0]:
        raise SystemExit(f"the cold start {how} failed: see {work}")
    firsts = [json.loads((work / f"{h.name}.json").read_text())["timing"]["first_step_unix"] for h in net.hosts]
    return {"kind": "cold", "prewarm": how, "seconds": max(firsts) - launched}


def measured(rows: list[dict], kind: str, modes, pair: int) -> bool:
    """Whether the results hold pair number `pair` (from 0) of `kind` already: as many
    measurements of every mode."""
    done = [r for r in rows if r["kind"] == kind]
    return min(sum(r["prewarm"] == m for r in done) for m in modes) > pair


def summary(rows: list[dict]) -> str:
    out = []
    for kind, modes in (("restart", ("auto", "none")), ("at", ("auto", "none")),
                        ("cold", ("auto", "none", "by-hand")), ("admission", ("auto", "none"))):
        for mode in modes:
            xs = [r["seconds"] for r in rows if r["kind"] == kind and r["prewarm"] == mode]
            if xs:
                out.append(f"{kind:8} {mode:8} n={len(xs):2} median {statistics.median(xs):6.2f} s "
                           f"min {min(xs):6.2f} max {max(xs):6.2f}")
    warm = [r for r in rows if r["kind"] == "at" and r["prewarm"] == "auto"]
    if warm:
        ready = sorted(r["spare_ready_s"] for r in warm if r["spare_ready_s"] is not None)
        out.append(f"spare ready after the round's start: {len(ready)} of {len(warm)} by the kill"
                   + (f", median {statistics.median(ready):.1f} s (max {ready[-1]:.1f})" if ready else ""))
    rss = [r["spare_rss_mib"] for r in rows if r.get("spare_rss_mib")]
    if rss:
        out.append(f"warm spare RSS: median {statistics.median(rss):.0f} MiB (n={len(rss)})")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--results", type=Path, default=Path("prewarm-results.jsonl"))
    parser.add_argument("--kinds", default="restart,cold", help="restart, at, cold, admission (3 hosts)")
    parser.add_argument("--fault-after", type=float, default=10.0,
                        help="at: seconds from the round's start to the kill (default 10)")
    parser.add_argument("--epochs", type=int, default=EPOCHS,
                        help=f"the trainer's epochs of 100 steps (default {EPOCHS}): more for a late --fault-after")
    parser.add_argument("--print", action="store_true", help="only summarize the results file")
    args = parser.parse_args()
    TRAINER[TRAINER.index("--epochs") + 1] = str(args.epochs)
    rows = [json.loads(l) for l in args.results.read_text().splitlines()] if args.results.exists() else []
    if args.print:
        print(summary(rows))
        return
    from netns import Network, stop_on_sigterm

    stop_on_sigterm()
    args.results.parent.mkdir(parents=True, exist_ok=True)
    plans = {"restart": ("auto", "none"), "at": ("auto", "none"), "cold": ("auto", "none", "by-hand"),
             "admission": ("auto", "none")}
    runs = {"restart": restart_run, "at": lambda net, mode: at_run(net, mode, args.fault_after), "cold": cold_run,
            "admission": admission_run}
    net = Network(3 if "admission" in args.kinds else 2).up()
    try:
        for pair in range(args.pairs):
            for kind in args.kinds.split(","):
                modes = plans[kind] if pair % 2 == 0 else plans[kind][::-1]  # alternate who goes first
                if measured(rows, kind, modes, pair):
                    continue  # by an earlier run
                for mode in modes:
                    row = runs[kind](net, mode)
                    row["pair"] = pair
                    rows.append(row)
                    with open(args.results, "a") as f:
                        f.write(json.dumps(row) + "\n")
                    print(json.dumps(row), flush=True)
    finally:
        net.down()
    print(summary(rows))


if __name__ == "__main__":
    main()
