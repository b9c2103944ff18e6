"""How fast `--sync-dir` spreads a checkpoint: `rendezvous join` x 3 on loopback.

    copy     one node holds a directory of --files files (--mb MB in all), the two others an
             empty one; the figures come from the coordinator's log:
                 freeze -> source chosen   every member scans (hashes) its copy
                 source chosen -> release  both peers fetch, check and swap in the files
             next to `cp -r` of the same directory, in the same run (page cache warm for both)
    restart  round 1: the chief writes a --restart-mb MB checkpoint, then its command is
             killed; fault -> every round-2 command started, the checkpoint synced to both
             peers on the way

    python bench/sync_bench.py [--mb 200] [--files 50] [--runs 3] [--restart-mb 20]
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ADDRESSES = ["127.0.0.30", "127.0.0.31", "127.0.0.32"]
LINE = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) .*?(froze job|every --sync-dir becomes|releasing)")


def make_directory(root: Path, mb: int, files: int) -> None:
    size = mb * 10**6 // files
    for i in range(files):
        sub = root / f"shard-{i % 5}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"ckpt.data-{i:05d}").write_bytes(os.urandom(size))


def start(address: str, job: str, sync_dir: Path, log: Path, script: str, env=None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", "3", "--job", job, "--address", address,
            "--timeout", "120", "--sync-dir", str(sync_dir), "--stop-grace", "2", "--log-format", "plain",
            "--", "sh", "-c", script]
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})


def clock(text: str) -> float:
    t = datetime.strptime(text, "%H:%M:%S.%f")
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def phases(log: Path) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = LINE.match(line)
        if m:
            found.setdefault(m.group(2), clock(m.group(1)))
    return found


def one_copy(mb: int, files: int) -> tuple[float, float, float]:
    """(cp -r seconds, scan seconds, transfer seconds)."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        tmp_path = Path(tmp)
        make_directory(tmp_path / "dir-0", mb, files)
        began = time.perf_counter()
        subprocess.run(["cp", "-r", str(tmp_path / "dir-0"), str(tmp_path / "cp-copy")], check=True)
        subprocess.run(["sync"], check=True)
        cp = time.perf_counter() - began
        shutil.rmtree(tmp_path / "cp-copy")
        job = f"syncb-{secrets.token_hex(3)}"
        logs = [tmp_path / f"node-{i}.log" for i in range(3)]
        procs = [start(a, job, tmp_path / f"dir-{i}", logs[i], "true") for i, a in enumerate(ADDRESSES)]
        for p in procs:
            if p.wait(300) != 0:
                raise RuntimeError(logs[0].read_text())
        seen = phases(logs[0])
        chosen = seen["every --sync-dir becomes"]
        return cp, chosen - seen["froze job"], seen["releasing"] - chosen


RESTART_SCRIPT = (
    'if [ "$RENDEZVOUS_ROUND" = 1 ]; then '
    '  [ "$RENDEZVOUS_RANK" = 0 ] && head -c "$CKPT_BYTES" /dev/urandom > "$SYNC/ckpt.data" && echo $$ > "$OUT/chief.pid"; '
    '  exec sleep 300; '
    'fi; date +%s.%N > "$OUT/$RENDEZVOUS_RANK.start"'
)


def one_restart(mb: int) -> float:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        tmp_path = Path(tmp)
        job = f"syncr-{secrets.token_hex(3)}"
        procs = []
        for i, address in enumerate(ADDRESSES):
            env = {"OUT": tmp, "SYNC": str(tmp_path / f"dir-{i}"), "CKPT_BYTES": str(mb * 10**6)}
            (tmp_path / f"dir-{i}").mkdir()
            procs.append(start(address, job, tmp_path / f"dir-{i}", tmp_path / f"node-{i}.log", RESTART_SCRIPT, env))
        pid_file = tmp_path / "chief.pid"
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError((tmp_path / "node-0.log").read_text())
            time.sleep(0.01)
        time.sleep(0.5)  # the checkpoint is written before the pid
        fault = time.time()
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        for p in procs:
            p.wait(120)
        starts = [float((tmp_path / f"{r}.start").read_text()) for r in range(3)]
        return max(starts) - fault


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--restart-mb", type=int, default=20)
    args = parser.parse_args()
    copies = [one_copy(args.mb, args.files) for _ in range(args.runs)]
    cp, scan, transfer = ([c[i] for c in copies] for i in range(3))
    rate = statistics.median(2 * args.mb / t for t in transfer)
    print(f"{args.mb} MB in {args.files} files, 1 source -> 2 peers, median (min-max) of {args.runs} runs\n")
    print("| step | time | MB/s |")
    print("|---|---:|---:|")
    print(f"| `cp -r` (one copy, with `sync`) | {fmt(cp)} | {statistics.median(args.mb / t for t in cp):.0f} |")
    print(f"| freeze -> source chosen (every member hashes its copy) | {fmt(scan)} | |")
    print(f"| source chosen -> release (2 peers fetch, check, swap in) | {fmt(transfer)} | {rate:.0f} (both copies) |")
    restarts = [one_restart(args.restart_mb) for _ in range(args.runs)]
    print(f"\n| restart, {args.restart_mb} MB checkpoint | fault -> every command running again: {fmt(restarts)} |")


if __name__ == "__main__":
    main()
