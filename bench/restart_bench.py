"""How fast a job notices a fault and runs again: `rendezvous join` x N, one per network
namespace (needs root), so that a host's link can be cut.

For each fault kind, N nodes start a command that records when it started (a fork of
`date`, exec'd into `sleep` in round 1, exiting 0 in round 2). The fault is made at a
known instant on the node with the highest address (never the coordinator); the figures are

    stopped  fault -> every other node's round-1 command has exited
    running  fault -> every node's round-2 command has started

Faults: `command` (kill -9 of one node's command), `daemon` (kill -9 of a member's daemon,
started again at once, as systemd would), `stopped-command` (SIGSTOP of one command),
`frozen` (SIGSTOP of a member's daemon for good: with --expect N the next round waits for
it, so only `stopped` is measured), `link-down` (the host's link cut; put back once the
others have stopped), `lost-elastic` (the link cut for good, with --expect N-1:N: the next
round forms without it after --settle).

    python bench/restart_bench.py [--nodes 3] [--runs 5] [--liveness 5] [--settle 3]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from netns import Network, stop_on_sigterm  # noqa: E402

from comparison.agents import tail  # noqa: E402

SCRIPT = (
    'date +%s.%N > "$OUT/$RENDEZVOUS_NODE_ID-$RENDEZVOUS_ROUND.start"; '
    'echo $$ > "$OUT/$RENDEZVOUS_NODE_ID-$RENDEZVOUS_ROUND.pid"; '
    '[ "$RENDEZVOUS_ROUND" = 1 ] && exec sleep 300; exit 0'
)
FAULTS = ("command", "daemon", "stopped-command", "frozen", "link-down", "lost-elastic")


def start_node(host, job: str, expect: str, out: Path, liveness: float, settle: float,
               python: str) -> subprocess.Popen:
    argv = [python, "-m", "rendezvous", "join", "--expect", expect, "--job", job,
            "--liveness-timeout", str(liveness), "--settle", str(settle), "--timeout", "120",
            "--stop-grace", "2", "--log-format", "plain", "--", "sh", "-c", SCRIPT]
    with open(out / f"{host.name}.log", "a") as log:  # a daemon started again appends
        return host.popen(argv, env={**os.environ, "OUT": str(out)}, stdout=log,
                          stderr=subprocess.STDOUT, start_new_session=True)


def log_tails(out: Path, lines: int = 12) -> str:
    """The end of every node's log, for an error message."""
    return "".join(f"\n--- {log.stem}:\n{tail(log, lines)}" for log in sorted(out.glob("*.log")))


def set_link(host, state: str) -> None:
    host.run(["ip", "link", "set", host.interface, state], check=True)


def wait_for(predicate, what: str, out: Path, timeout: float = 60.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.time()
        time.sleep(0.001)
    raise TimeoutError(f"{what} did not happen within {timeout:g} s; the nodes' logs:{log_tails(out)}")


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


def one_run(fault: str, hosts: list, liveness: float, settle: float,
            python: str = sys.executable) -> tuple[float, float | None]:
    job = f"bench-{secrets.token_hex(4)}"
    nodes = len(hosts)
    expect = f"{nodes - 1}:{nodes}" if fault == "lost-elastic" else str(nodes)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        procs = [start_node(h, job, expect, out, liveness, settle, python) for h in hosts]
        try:
            wait_for(lambda: len(pids(out, 1)) == nodes and len(starts(out, 1)) == nodes,
                     f"every command of round 1 starting ({fault})", out)
            commands = list(pids(out, 1).values())
            victim_node = procs[-1]  # the highest address: never the coordinator
            # each command runs under its supervisor, the daemon's child
            (victim_cmd,) = [p for p in commands if parent(parent(p)) == victim_node.pid]
            fault_at = time.time()
            if fault == "command":
                os.kill(victim_cmd, signal.SIGKILL)
            elif fault == "stopped-command":
                os.kill(victim_cmd, signal.SIGSTOP)
            elif fault == "daemon":
                victim_node.kill()
                victim_node.wait()
                procs[-1] = start_node(hosts[-1], job, expect, out, liveness, settle, python)
            elif fault == "frozen":
                victim_node.send_signal(signal.SIGSTOP)
            elif fault in ("link-down", "lost-elastic"):
                set_link(hosts[-1], "down")
            others = [p for p in commands if p != victim_cmd]
            stopped = wait_for(lambda: not any(alive(p) for p in others),
                               f"the other commands stopping after the fault ({fault})", out) - fault_at
            if fault == "frozen":
                return stopped, None
            if fault == "link-down":
                set_link(hosts[-1], "up")
            expected = nodes - 1 if fault == "lost-elastic" else nodes
            wait_for(lambda: len(starts(out, 2)) == expected,
                     f"{expected} commands of round 2 starting after the fault ({fault})", out)
            return stopped, max(starts(out, 2)) - fault_at
        finally:
            set_link(hosts[-1], "up")
            for p in procs:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--liveness", type=float, default=5.0)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--faults", default=",".join(FAULTS))
    args = parser.parse_args()
    print(f"| fault | N | fault -> others stopped (median, min-max) | fault -> all running again |")
    print("|---|---:|---:|---:|")
    for fault in args.faults.split(","):
        with Network(args.nodes) as net:
            results = [one_run(fault, net.hosts, args.liveness, args.settle) for _ in range(args.runs)]
        stopped = [r[0] for r in results]
        running = [r[1] for r in results if r[1] is not None]
        def fmt(xs):
            return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"
        print(f"| {fault} | {args.nodes} | {fmt(stopped)} | {fmt(running)} |", flush=True)


if __name__ == "__main__":
    stop_on_sigterm()
    main()
