"""What following a command's progress costs the daemon: its CPU while the command runs.

Runs `rendezvous join --expect 1` on loopback with a command that appends progress lines
to $RENDEZVOUS_PROGRESS_FILE at a given rate (0: writes nothing), and reads the daemon's
CPU time (utime + stime from /proc) over a window while the command runs.

Usage: python bench/progress_bench.py [--seconds 30] [--rates 0 10 100]
Prints a markdown table, one row per rate.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WRITER = r"""
import json, os, sys, time
rate = float(sys.argv[1])
path = os.environ["RENDEZVOUS_PROGRESS_FILE"]
step = 0
while True:
    if rate:
        step += 1
        with open(path, "a") as f:
            f.write(json.dumps({"epoch": step // 100, "step": step, "loss": 0.5, "images_per_s": 2310.0,
                                "metrics": {"accuracy": 0.9}}) + "\n")
    time.sleep(1 / rate if rate else 1)
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(rate: float, seconds: float, workdir: Path) -> float:
    """The daemon's CPU seconds over `seconds` while its command writes `rate` lines/s."""
    env = dict(os.environ, RENDEZVOUS_RUNTIME_DIR=str(workdir / "run"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    argv = [
        sys.executable, "-m", "rendezvous", "join", "--expect", "1", "--job", f"bench-{secrets.token_hex(3)}",
        "--address", "127.0.0.1", "--", sys.executable, "-c", WRITER, str(rate),
    ]
    log = open(workdir / f"rate-{rate:g}.log", "wb")
    daemon = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while b"starting" not in (workdir / f"rate-{rate:g}.log").read_bytes():
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise RuntimeError((workdir / f"rate-{rate:g}.log").read_text())
            time.sleep(0.1)
        time.sleep(2)  # past the start
        before = cpu_seconds(daemon.pid)
        time.sleep(seconds)
        return cpu_seconds(daemon.pid) - before
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(30)
        log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 10.0, 100.0])
    args = parser.parse_args()
    print(f"| progress lines/s | daemon CPU over {args.seconds:g} s while the command runs | share of one core |")
    print("|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for rate in args.rates:
            cpu = measure(rate, args.seconds, Path(tmp))
            print(f"| {rate:g} | {cpu:.2f} s | {cpu / args.seconds:.2%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
