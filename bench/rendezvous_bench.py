"""Rendezvous benchmark: time from the last peer's launch to every command started.

For N peers it starts N `rendezvous join` processes (N=2 on loopback addresses, every N in
network namespaces on one bridge, which needs root), each running a tiny shell command that
records the wall-clock time it started and its daemon's peak RSS. N-1 peers start first and
wait; the measured interval runs from the launch of the last peer (as when the last node of
a job comes up) to the last command start. Reported over several repetitions: that interval,
the skew between the first and the last command start, and the daemon's peak RSS.
`--cold` starts all N at once instead (on one 2-core machine that mostly measures N Python
interpreters starting on 2 cores).

`--auth` measures the cost of `--token-file` instead: the same interval with and without a
token, runs of both alternating on the same namespaces, for each of `--sizes`.

    .venv/bin/python bench/rendezvous_bench.py [--sizes 2,4,8,16] [--repeat 5]
    .venv/bin/python bench/rendezvous_bench.py --auth --sizes 2,8 [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from netns import Network, stop_on_sigterm  # noqa: E402

from rendezvous.launch.launcher import Launcher  # noqa: E402

# Started by the daemon: the time it ran, then the daemon's (its parent's) peak RSS in kB.
RECORD = (
    'echo $EPOCHREALTIME > "$0/$RENDEZVOUS_NODE_ID.tmp" && a=$(cut -d" " -f4 /proc/$PPID/stat) && '
    "grep VmHWM /proc/$a/status | tr -s ' ' | cut -d' ' -f2 >> \"$0/$RENDEZVOUS_NODE_ID.tmp\" && "
    'mv "$0/$RENDEZVOUS_NODE_ID.tmp" "$0/$RENDEZVOUS_NODE_ID"'
)


def join_argv(n: int, job: str, out: Path, address: str | None, token: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", str(n), "--job", job, "--timeout", "60"]
    if token:
        argv += ["--token-file", token]
    if address:
        argv += ["--address", address]
    return argv + ["--", "/bin/bash", "-c", RECORD, str(out)]


def one_run(n: int, hosts: list | None, cold: bool, with_token: bool = False) -> tuple[float, float, float]:
    job = f"bench-{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        token = None
        if with_token:
            token = str(Path(tmp) / "token")
            Path(token).write_text(secrets.token_hex(32))
            os.chmod(token, 0o600)
        procs = []
        for i in range(n):
            argv = join_argv(n, job, out, None if hosts else f"127.0.0.{i + 2}", token)
            if hosts:
                argv = hosts[i].command(argv)
            if i == n - 1 and not cold:
                wait_until_waiting(Path(tmp), n - 1)
            launched = time.time()
            log = open(Path(tmp) / f"{i}.log", "w")
            procs.append(subprocess.Popen(argv, stdout=log, stderr=log))
        codes = [p.wait(timeout=90) for p in procs]
        if any(codes):
            raise SystemExit(f"a peer failed: exit codes {codes}")
        rows = [(out / f).read_text().split() for f in os.listdir(out)]
        starts = [float(r[0]) for r in rows]
        rss_mb = max(int(r[1]) for r in rows) / 1024
        return max(starts) - launched, max(starts) - min(starts), rss_mb


def wait_until_waiting(log_dir: Path, count: int, timeout: float = 60) -> None:
    """Until `count` peers have seen all the others that are up, i.e. they are waiting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = [(log_dir / f"{i}.log").read_text() for i in range(count)]
        if all(f" {count}/" in log for log in logs):
            time.sleep(0.2)  # let the last announcements settle
            return
        time.sleep(0.02)
    raise SystemExit(f"{count} peers did not see each other within {timeout}s")


def floor_skew(n: int) -> float:
    """The same start with no rendezvous: n gated commands told to start at one instant.

    What remains is this machine's cost of waking n processes at once (2 cores here)."""

    async def run() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            launchers = [Launcher() for _ in range(n)]
            for i, launcher in enumerate(launchers):
                await launcher.arm(["/bin/bash", "-c", RECORD, tmp], {"RENDEZVOUS_NODE_ID": f"{i:012x}"})
            start_at = time.time() + 0.2
            for launcher in launchers:
                launcher.fire(start_at)
            await asyncio.gather(*(launcher.wait() for launcher in launchers))
            starts = [float((Path(tmp) / f).read_text().split()[0]) for f in os.listdir(tmp)]
            return max(starts) - min(starts)

    return asyncio.run(run())


def measure(n: int, repeat: int, netns: bool, cold: bool) -> dict:
    results = []
    if netns:
        with Network(n) as net:
            for _ in range(repeat):
                results.append(one_run(n, net.hosts, cold))
                time.sleep(0.3)
    else:
        for _ in range(repeat):
            results.append(one_run(n, None, cold))
            time.sleep(0.3)
    latency, skew, rss = zip(*results)
    floor = [floor_skew(n) for _ in range(repeat)]
    return {
        "n": n,
        "where": "netns" if netns else "loopback",
        "latency_median": statistics.median(latency),
        "latency_max": max(latency),
        "skew_median": statistics.median(skew),
        "skew_max": max(skew),
        "rss_max": max(rss),
        "floor_median": statistics.median(floor),
    }


def measure_auth(n: int, repeat: int) -> dict:
    """Last launch -> all started, without and with a token, alternating on one network."""
    runs: dict[bool, list[float]] = {False: [], True: []}
    with Network(n) as net:
        for _ in range(repeat):
            for with_token in (False, True):
                runs[with_token].append(one_run(n, net.hosts, cold=False, with_token=with_token)[0])
                time.sleep(0.3)
    return {"n": n, "open": runs[False], "token": runs[True]}


def print_auth(sizes: list[int], repeat: int) -> None:
    print("| peers | without token, median (max) | with --token-file, median (max) | difference of medians |")
    print("|---:|---:|---:|---:|")
    for r in (measure_auth(n, repeat) for n in sizes):
        plain, signed = statistics.median(r["open"]), statistics.median(r["token"])
        print(
            f"| {r['n']} | {plain*1000:.0f} ms ({max(r['open'])*1000:.0f} ms) "
            f"| {signed*1000:.0f} ms ({max(r['token'])*1000:.0f} ms) | {(signed - plain) / plain:+.0%} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2,4,8,16", help="peer counts to measure in namespaces")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-netns", action="store_true", help="only the loopback measurement")
    parser.add_argument("--cold", action="store_true", help="start all peers at once")
    parser.add_argument("--auth", action="store_true", help="with and without --token-file, in namespaces")
    args = parser.parse_args()
    if args.auth:
        return print_auth([int(n) for n in args.sizes.split(",")], args.repeat)
    rows = [measure(2, args.repeat, netns=False, cold=args.cold)]
    if not args.no_netns:
        rows += [measure(int(n), args.repeat, netns=True, cold=args.cold) for n in args.sizes.split(",")]
    print("| peers | hosts | last launch -> all started, median (max) | start skew, median (max) "
          "| same start without rendezvous, median | daemon peak RSS |")
    print("|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']} | {r['where']} | {r['latency_median']*1000:.0f} ms ({r['latency_max']*1000:.0f} ms) "
            f"| {r['skew_median']*1000:.1f} ms ({r['skew_max']*1000:.1f} ms) "
            f"| {r['floor_median']*1000:.1f} ms | {r['rss_max']:.0f} MB |"
        )


if __name__ == "__main__":
    stop_on_sigterm()
    main()
