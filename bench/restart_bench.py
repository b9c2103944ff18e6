"""How fast a job notices a fault and runs again: `rendezvous join` x N on loopback.

For each fault kind, N nodes start a command that records when it started (a fork of
`date`, exec'd into `sleep` in round 1, exiting 0 in round 2). The fault is made at a
known instant; the figures are

    stopped  fault -> every other node's round-1 command has exited
    running  fault -> every node's round-2 command has started

Faults: `command` (kill -9 of one node's command), `daemon` (kill -9 of a member's
daemon, started again at once, as systemd would), `stopped-command` (SIGSTOP of one
command), `frozen` (SIGSTOP of a member's daemon for good: with --expect N the next round
waits for it, so only `stopped` is measured).

    python bench/restart_bench.py [--nodes 3] [--runs 5] [--liveness 5]
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = (
    'date +%s.%N > "$OUT/$RENDEZVOUS_NODE_ID-$RENDEZVOUS_ROUND.start"; '
    'echo $$ > "$OUT/$RENDEZVOUS_NODE_ID-$RENDEZVOUS_ROUND.pid"; '
    '[ "$RENDEZVOUS_ROUND" = 1 ] && exec sleep 300; exit 0'
)
FAULTS = ("command", "daemon", "stopped-command", "frozen")


def start_node(address: str, job: str, nodes: int, out: Path, liveness: float) -> subprocess.Popen:
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", str(nodes), "--job", job,
            "--address", address, "--liveness-timeout", str(liveness), "--timeout", "120",
            "--stop-grace", "2", "-q", "--", "sh", "-c", SCRIPT]
    return subprocess.Popen(argv, env={**os.environ, "OUT": str(out)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def wait_for(predicate, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.time()
        time.sleep(0.001)
    raise TimeoutError("the job did not get there in time")


def pids(out: Path, round_: int) -> dict[str, int]:
    found = {}
    for p in out.glob(f"*-{round_}.pid"):
        text = p.read_text().strip()
        if text:
            found[p.name.split("-")[0]] = int(text)
    return found


def starts(out: Path, round_: int) -> list[float]:
    """The start times recorded so far in `round_` (a file still being written is skipped)."""
    found = []
    for p in out.glob(f"*-{round_}.start"):
        text = p.read_text().strip()
        if text:
            found.append(float(text))
    return found


def parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def one_run(fault: str, nodes: int, liveness: float) -> tuple[float, float | None]:
    job = f"bench-{secrets.token_hex(4)}"
    addresses = [f"127.0.0.{20 + i}" for i in range(nodes)]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        procs = [start_node(a, job, nodes, out, liveness) for a in addresses]
        try:
            wait_for(lambda: len(pids(out, 1)) == nodes and len(starts(out, 1)) == nodes)
            commands = list(pids(out, 1).values())
            victim_node = procs[-1]  # the highest address: never the coordinator
            (victim_cmd,) = [p for p in commands if parent(p) == victim_node.pid]
            fault_at = time.time()
            if fault == "command":
                os.kill(victim_cmd, signal.SIGKILL)
            elif fault == "stopped-command":
                os.kill(victim_cmd, signal.SIGSTOP)
            elif fault == "daemon":
                victim_node.kill()
                victim_node.wait()
                procs[-1] = start_node(addresses[-1], job, nodes, out, liveness)
            elif fault == "frozen":
                victim_node.send_signal(signal.SIGSTOP)
            others = [p for p in commands if p != victim_cmd]
            stopped = wait_for(lambda: not any(alive(p) for p in others)) - fault_at
            if fault == "frozen":
                return stopped, None
            wait_for(lambda: len(starts(out, 2)) == nodes)
            return stopped, max(starts(out, 2)) - fault_at
        finally:
            for p in procs:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--liveness", type=float, default=5.0)
    parser.add_argument("--faults", default=",".join(FAULTS))
    args = parser.parse_args()
    print(f"| fault | N | fault -> others stopped (median, min-max) | fault -> all running again |")
    print("|---|---:|---:|---:|")
    for fault in args.faults.split(","):
        results = [one_run(fault, args.nodes, args.liveness) for _ in range(args.runs)]
        stopped = [r[0] for r in results]
        running = [r[1] for r in results if r[1] is not None]
        def fmt(xs):
            return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"
        print(f"| {fault} | {args.nodes} | {fmt(stopped)} | {fmt(running)} |", flush=True)


if __name__ == "__main__":
    main()
