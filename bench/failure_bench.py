"""What the cause of a failure costs and how fast it is shown.

`cause`: N nodes, one per network namespace (needs root), run tests/support/raise_command.py:
rank 1 raises `RuntimeError: shard 7 is corrupt` once every rank runs. The figure is, from
the coordinator's "round 1 ... aborted" log line, how long until every other node has
logged the failed node, its rank and the exception (from the logs' timestamps: one clock).

`stderr`: a command that writes BYTES to stderr in 64 KiB writes, run directly (its stderr
/dev/null, a pipe to `cat >/dev/null` as a terminal or the journal would read it, or a file
in the same directory as --output-dir's) and under `rendezvous join --expect 1` (the
daemon's stderr to /dev/null), with and without --output-dir: the command's own time for
its writes, and the daemon's peak RSS (VmHWM) against the same daemon running `true`.

    python bench/failure_bench.py cause [--nodes 3] [--runs 5]
    python bench/failure_bench.py stderr [--bytes 1073741824] [--runs 3]
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(REPO / "tests" / "support"))
from netns import Network  # noqa: E402

RAISER = REPO / "tests" / "support" / "raise_command.py"
STAMP = r"(\d\d):(\d\d):(\d\d)\.(\d{3}) rendezvous "
ABORT = re.compile(STAMP + r"WARNING round 1 of job \S+ aborted")
SHOWN = re.compile(STAMP + r"ERROR command failed: node \w+ \([0-9.]+\), rank 1, exited with code 1: "
                   r"RuntimeError: shard 7 is corrupt")
WRITER = ("import os, sys, time; n = int(sys.argv[1]); chunk = b'x' * 65535 + b'\\n'; t = time.perf_counter()\n"
          "for _ in range(n // len(chunk)): os.write(2, chunk)\n"
          "open(sys.argv[2], 'w').write(repr(time.perf_counter() - t))")


def seconds(match: re.Match) -> float:
    h, m, s, ms = (int(g) for g in match.groups()[:4])
    return h * 3600 + m * 60 + s + ms / 1000


def one_cause_run(nodes: int, out: Path) -> float:
    job = f"bench-{secrets.token_hex(3)}"
    with Network(nodes) as net:
        procs = []
        for host in net.hosts:
            argv = [sys.executable, "-m", "rendezvous", "join", "--expect", str(nodes), "--job", job,
                    "--max-restarts", "1", "--timeout", "120", "--log-format", "plain", "--",
                    sys.executable, str(RAISER), str(out), "10"]
            with open(out / f"{host.name}.log", "w") as log:
                procs.append(host.popen(argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ,
                                        "PYTHONPATH": str(REPO)}))
        try:
            deadline = time.monotonic() + 120
            while True:
                logs = [(out / f"{h.name}.log").read_text(errors="replace") for h in net.hosts]
                shown = [SHOWN.search(log) for log in logs]
                aborted = ABORT.search(logs[0])
                if aborted and all(shown):
                    return max(seconds(m) for i, m in enumerate(shown) if i != 1) - seconds(aborted)
                if time.monotonic() > deadline:
                    raise SystemExit("no failure shown on every node within 120 s:\n" + "\n".join(
                        log[-1500:] for log in logs))
                time.sleep(0.1)
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(30)


def cause(args: argparse.Namespace) -> None:
    delays = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            delays.append(one_cause_run(args.nodes, Path(tmp)))
    print(f"failure -> cause shown on every node ({args.nodes} nodes, {args.runs} runs): "
          f"{' '.join(f'{d * 1e3:.0f}' for d in delays)} ms, median {statistics.median(delays) * 1e3:.0f} ms")


def peak_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


def under_daemon(command: list[str], extra: list[str]) -> int:
    """Runs `command` under a one-node job; the daemon's peak RSS in KiB."""
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", "1", "--address", "127.0.0.1", "--job",
            f"bench-{secrets.token_hex(3)}", *extra, "--", *command]
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=null, env={**os.environ, "PYTHONPATH": str(REPO)})
        peak = 0
        while proc.poll() is None:
            peak = max(peak, peak_rss(proc.pid))
            time.sleep(0.05)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return peak


def stderr(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        took = Path(tmp) / "took"
        writer = [sys.executable, "-c", WRITER, str(args.bytes), str(took)]
        rows: dict[str, list[float]] = {"direct to /dev/null": [], "direct to cat": [], "direct to a file": [],
                                        "daemon": [], "daemon --output-dir": []}
        peaks: dict[str, list[int]] = {"true": [], "daemon": [], "daemon --output-dir": []}
        for _ in range(args.runs):
            with open(os.devnull, "wb") as null:
                subprocess.run(writer, stderr=null, check=True)
                rows["direct to /dev/null"].append(float(took.read_text()))
                cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=null)
                subprocess.run(writer, stderr=cat.stdin, check=True)
                cat.stdin.close()
                cat.wait()
                rows["direct to cat"].append(float(took.read_text()))
            with open(Path(tmp) / "direct.log", "wb") as file:
                subprocess.run(writer, stderr=file, check=True)
            os.unlink(Path(tmp) / "direct.log")
            rows["direct to a file"].append(float(took.read_text()))
            peaks["true"].append(under_daemon(["true"], []))
            peaks["daemon"].append(under_daemon(writer, []))
            rows["daemon"].append(float(took.read_text()))
            peaks["daemon --output-dir"].append(under_daemon(writer, ["--output-dir", tmp]))
            rows["daemon --output-dir"].append(float(took.read_text()))
        size = args.bytes / (1 << 20)
        for name, times in rows.items():
            best = max(min(times), 1e-6)
            print(f"{name:22} {size:.0f} MiB to stderr in {' '.join(f'{t:.2f}' for t in times)} s "
                  f"(best {size / best:.0f} MiB/s)")
        for name, kib in peaks.items():
            print(f"daemon peak RSS running {name:20} {' '.join(f'{k / 1024:.1f}' for k in kib)} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    one = sub.add_parser("cause")
    one.add_argument("--nodes", type=int, default=3)
    one.add_argument("--runs", type=int, default=5)
    two = sub.add_parser("stderr")
    two.add_argument("--bytes", type=int, default=1 << 30)
    two.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cause(args) if args.what == "cause" else stderr(args)


if __name__ == "__main__":
    main()
