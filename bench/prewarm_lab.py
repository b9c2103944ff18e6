"""--prewarm on a lab's own machines (GPUs, real network, one node per machine): kill -9 of one
worker's trainer -> the first training step of the next round, warm vs `--prewarm none`.

Run on every machine of the job at about the same time, the same arguments but for --victim on
exactly one of them; each prints one JSON line (and appends it to --out):

    python bench/prewarm_lab.py --job run1 --expect 2 --prewarm auto [--victim] \\
        -- python train.py --backup-dir /shared/backup --epochs 20      # your trainer, or
    python bench/prewarm_lab.py --job run2 --expect 2 --prewarm none [--victim] --backup-dir /shared/b

(no command: the bundled trainer on digits, --threads 1). The command must resume from a
backup every node sees (a shared directory, or --sync-dir) and write its first step's time:
the bundled trainer's --result-file does (`timing.first_step_unix`); a script of your own
writes {"timing": {"first_step_unix": time.time()}} to the path in $PREWARM_LAB_RESULT at its
first step. The victim kills its trainer once epoch --kill-after-epoch is logged (and, warm,
once the spare's import is done). Collect every machine's lines in one file, then:

    python bench/prewarm_lab.py --summarize prewarm-lab.jsonl

gives, per --prewarm, the median of (latest first step of the next round - the kill) over the
runs (clocks in sync by NTP: a few ms). Extra `rendezvous join` options go in --join "...".
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prewarm_bench import settled, trainers  # noqa: E402


def run(args: argparse.Namespace, command: list[str]) -> dict:
    result = Path(tempfile.mkdtemp(prefix="prewarm-lab-")) / "result.json"
    if not command:
        command = [sys.executable, "-m", "trainer", "--threads", "1", "--epochs", "20",
                   "--backup-dir", args.backup_dir or str(result.parent / "backup")]
    if "trainer" in " ".join(command) and "--result-file" not in command:
        command += ["--result-file", str(result)]
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", args.expect, "--job", args.job,
            "--prewarm", args.prewarm, *shlex.split(args.join), "--", *command]
    env = {**os.environ, "PREWARM_LAB_RESULT": str(result)}
    daemon = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    seen_epoch = threading.Event()
    pattern = re.compile(rf"\bepoch {args.kill_after_epoch}/\d+")

    def read() -> None:
        assert daemon.stdout is not None
        for line in daemon.stdout:
            sys.stdout.write(line)
            if pattern.search(line):
                seen_epoch.set()
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    killed = None
    if args.victim:
        seen_epoch.wait()
        deadline = time.monotonic() + 600
        while args.prewarm != "none" and not settled(daemon.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        running = trainers(daemon.pid)[0]
        killed = time.time()
        os.kill(running[0], signal.SIGKILL)
    code = daemon.wait()
    reader.join(5)
    first = json.loads(result.read_text())["timing"]["first_step_unix"] if result.exists() else None
    return {"host": socket.gethostname(), "job": args.job, "prewarm": args.prewarm, "exit_code": code,
            "killed_unix": killed, "first_step_unix": first}


def summarize(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    by_job: dict[str, list[dict]] = {}
    for row in rows:
        by_job.setdefault(row["job"], []).append(row)
    figures: dict[str, list[float]] = {}
    for job_rows in by_job.values():
        kills = [r["killed_unix"] for r in job_rows if r["killed_unix"]]
        firsts = [r["first_step_unix"] for r in job_rows if r["first_step_unix"]]
        if len(kills) == 1 and firsts:
            figures.setdefault(job_rows[0]["prewarm"], []).append(max(firsts) - kills[0])
    return "\n".join(f"kill -> first step, --prewarm {mode}: median {statistics.median(xs):.2f} s over {len(xs)} runs "
                     f"(min {min(xs):.2f}, max {max(xs):.2f})" for mode, xs in sorted(figures.items()))


def main() -> None:
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    options = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--expect", default="2")
    parser.add_argument("--job", help="the job's name: the same on every machine of one run, new for each run")
    parser.add_argument("--prewarm", default="auto")
    parser.add_argument("--victim", action="store_true", help="this machine kills its trainer")
    parser.add_argument("--kill-after-epoch", type=int, default=2)
    parser.add_argument("--backup-dir", help="for the bundled trainer: a directory every machine sees")
    parser.add_argument("--join", default="", help="more `rendezvous join` options, one string")
    parser.add_argument("--out", type=Path, default=Path("prewarm-lab.jsonl"))
    parser.add_argument("--summarize", type=Path, metavar="RESULTS")
    args = parser.parse_args(options)
    if args.summarize:
        print(summarize(args.summarize))
        return
    if not args.job:
        parser.error("--job NAME is required: the same on every machine of one run, new for each run")
    row = run(args, command)
    with open(args.out, "a") as out:
        out.write(json.dumps(row) + "\n")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
