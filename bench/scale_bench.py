"""Scale benchmark: N daemons in N network namespaces, mDNS against unicast seeds.

For each N and each discovery it starts N `rendezvous join` processes, one per namespace on
one bridge (needs root): N-1 first, and once they have all seen each other the last one. Each
runs a tiny shell command that records the wall-clock time it started and what its daemon
(its supervisor's parent) had spent until then: CPU seconds (utime+stime from /proc of the daemon) and peak
RSS (VmHWM). Reported: last launch -> every command started (wall clock), and per daemon,
CPU and peak RSS from start to release, median and max over all daemons of all runs.

With `unicast` the bridge forwards no multicast and every node names the first as its seed
(`--peer`); with `mdns` the bridge floods multicast and nothing else is given. All daemons
share this machine's cores: the CPU per daemon is what each real host would pay, the wall
clock is this machine's.

    sudo .venv/bin/python bench/scale_bench.py [--sizes 2,8,16,32,64] [--modes mdns,unicast] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from netns import Network, stop_on_sigterm  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Started by the daemon: the time it ran, its daemon's utime and stime (ticks), peak RSS (kB).
RECORD = (  # the daemon is the parent of the command's supervisor (rendezvous-gate)
    'a=$(cut -d" " -f4 /proc/$PPID/stat); echo $EPOCHREALTIME $(cut -d" " -f14,15 /proc/$a/stat) '
    "$(grep VmHWM /proc/$a/status | tr -s ' ' | cut -d' ' -f2) > \"$0/$RENDEZVOUS_NODE_ID.tmp\" && "
    'mv "$0/$RENDEZVOUS_NODE_ID.tmp" "$0/$RENDEZVOUS_NODE_ID"'
)


def join_argv(n: int, job: str, out: Path, seed: str | None) -> list[str]:
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", str(n), "--job", job, "--timeout", "240"]
    if seed:
        argv += ["--peer", seed]
    return argv + ["--", "/bin/bash", "-c", RECORD, str(out)]


def wait_until_waiting(logs: list[Path], count: int, timeout: float = 240) -> None:
    """Until each of `count` daemons has seen all the others: the job waits for the last."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(f" {count}/" in log.read_text() for log in logs):
            time.sleep(0.5)  # let the last announcements settle
            return
        time.sleep(0.1)
    raise SystemExit(f"{count} daemons did not see each other within {timeout}s")


def one_run(net: Network, mode: str) -> tuple[float, list[float], list[float]]:
    n = len(net.hosts)
    job = f"scale-{secrets.token_hex(4)}"
    seed = net.hosts[0].address if mode == "unicast" else None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        logs = [Path(tmp) / f"{i}.log" for i in range(n)]
        procs = []
        for i, host in enumerate(net.hosts):
            if i == n - 1:
                wait_until_waiting(logs[:-1], n - 1)
            launched = time.time()
            with open(logs[i], "w") as log:
                procs.append(host.popen(join_argv(n, job, out, seed), stdout=log, stderr=log))
        codes = [p.wait(timeout=300) for p in procs]
        if any(codes):
            raise SystemExit(f"a daemon failed: exit codes {codes}\n{logs[codes.index(max(codes))].read_text()}")
        rows = [(out / f).read_text().split() for f in os.listdir(out)]
    starts = [float(r[0]) for r in rows]
    cpu = [(int(r[1]) + int(r[2])) / CLOCK_TICKS for r in rows]
    rss = [int(r[3]) / 1024 for r in rows]
    return max(starts) - launched, cpu, rss


def measure(n: int, mode: str, repeat: int) -> dict:
    walls, cpu, rss = [], [], []
    with Network(n, multicast=mode == "mdns") as net:
        for _ in range(repeat):
            wall, c, r = one_run(net, mode)
            walls.append(wall)
            cpu += c
            rss += r
    return {"n": n, "mode": mode, "wall": walls, "cpu": cpu, "rss": rss}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2,8,16,32,64")
    parser.add_argument("--modes", default="mdns,unicast")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 64 daemons' logs and pipes
    print("| N | discovery | last launch -> all started, median (max) | CPU per daemon, start -> release, "
          "median (max) | peak RSS per daemon, median (max) |")
    print("|---:|---|---:|---:|---:|")
    for n in map(int, args.sizes.split(",")):
        for mode in args.modes.split(","):
            r = measure(n, mode, args.repeat)
            print(
                f"| {n} | {mode} | {statistics.median(r['wall']):.2f} s ({max(r['wall']):.2f} s) "
                f"| {statistics.median(r['cpu']):.2f} s ({max(r['cpu']):.2f} s) "
                f"| {statistics.median(r['rss']):.0f} MiB ({max(r['rss']):.0f} MiB) |",
                flush=True,
            )


if __name__ == "__main__":
    stop_on_sigterm()
    main()
