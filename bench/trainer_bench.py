"""Trainer throughput and start-up: 1 worker vs 2 workers on loopback.

Runs ``python -m trainer`` on synthetic 32x32x3 data and reads each worker's
result file. For every configuration it reports:

- steps/s: global steps per second over the second epoch (the first one
  includes tracing), i.e. steps_per_epoch / epoch-2 time;
- images/s: steps/s x global batch size;
- start -> first step: from launching the (first) process to the end of the
  first training step on the slowest worker.

Usage: python bench/trainer_bench.py [--models small_cnn resnet56] [--quick] [--repeats N]
Prints a markdown table (medians over the repeats). With one repeat a run
takes about 2 minutes on 2 cores. Other load on the machine skews the
numbers: the header shows the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GLOBAL_BATCH = 64
STEPS = {"small_cnn": 100, "resnet56": 16}
# (workers, threads per worker)
LAYOUTS = [(1, 1), (1, 2), (2, 1)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run(model: str, workers: int, threads: int, steps: int, workdir: Path) -> dict:
    ports = [free_port() for _ in range(workers)]
    procs, results = [], []
    launched = time.time()
    for i in range(workers):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.pop("TF_CONFIG", None)
        if workers > 1:
            env["TF_CONFIG"] = json.dumps({
                "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                "task": {"type": "worker", "index": i},
            })
        out = workdir / f"{model}-{workers}x{threads}-{i}.json"
        results.append(out)
        argv = [sys.executable, "-m", "trainer", "--model", model, "--dataset", "synthetic",
                "--epochs", "2", "--steps-per-epoch", str(steps),
                "--global-batch-size", str(GLOBAL_BATCH), "--threads", str(threads),
                "--result-file", str(out)]
        procs.append(subprocess.Popen(argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=600)
        if p.returncode:
            raise SystemExit(f"trainer failed ({p.returncode}):\n{err[-3000:]}")
    rs = [json.loads(r.read_text()) for r in results]
    epoch2 = max(r["timing"]["epoch_s"][1] for r in rs)
    first_step = max(r["timing"]["first_step_unix"] for r in rs) - launched
    return {"steps_per_s": steps / epoch2, "first_step_s": first_step}


def tf_version() -> str:
    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            pass
    return "tensorflow not installed"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(STEPS), choices=list(STEPS))
    ap.add_argument("--quick", action="store_true", help="a quarter of the steps")
    ap.add_argument("--repeats", type=int, default=1, help="runs per configuration (median)")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]

    rows = []
    with tempfile.TemporaryDirectory(prefix="trainer-bench-") as tmp:
        for model in args.models:
            steps = max(4, STEPS[model] // 4) if args.quick else STEPS[model]
            base = None
            for workers, threads in LAYOUTS:
                runs = [run(model, workers, threads, steps, Path(tmp)) for _ in range(args.repeats)]
                r = {k: statistics.median(x[k] for x in runs) for k in runs[0]}
                if base is None:
                    base = r["steps_per_s"]
                rows.append((model, workers, threads, steps, r, r["steps_per_s"] / base))
                print(f"{model} workers={workers} threads={threads}: "
                      f"{r['steps_per_s']:.2f} steps/s, first step {r['first_step_s']:.1f}s",
                      file=sys.stderr, flush=True)

    print(f"{tf_version()}, legacy Keras (tf-keras), Python {platform.python_version()}, "
          f"{os.cpu_count()} CPU cores; synthetic 32x32x3, global batch {GLOBAL_BATCH}, "
          f"loopback gRPC; {args.repeats} run(s) each, median; "
          f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after\n")
    print("| model | workers | threads/worker | steps/s | images/s | vs 1 worker, 1 thread | start -> first step (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model, workers, threads, steps, r, rel in rows:
        print(f"| {model} | {workers} | {threads} | {r['steps_per_s']:.1f} | "
              f"{r['steps_per_s'] * GLOBAL_BATCH:.0f} | {rel:.2f}x | {r['first_step_s']:.1f} |")


if __name__ == "__main__":
    main()
