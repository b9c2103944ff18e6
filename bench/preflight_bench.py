"""What the preflight's fingerprint costs at startup: `rendezvous join` takes it once, before
it advertises itself, so it adds to every node's start.

Parts, each timed `--runs` times (median, min-max):

    interpreter  the command's Python version and TensorFlow's (package metadata, no import):
                 read in-process when the command runs rendezvous's own interpreter, and
                 asked of another interpreter in a subprocess
    nvidia-smi   list the GPUs (a fake nvidia-smi printing 8 lines, unless --real-smi)
    same-file    SHA-256 of a --same-file of --file-mb MiB
    total        take_fingerprint() with all three, as the daemon runs it

    python bench/preflight_bench.py [--runs 20] [--file-mb 1] [--real-smi]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rendezvous.config.join import JoinConfig  # noqa: E402
from rendezvous.host.fingerprint import file_digest, list_gpus, probe_interpreter, take_fingerprint  # noqa: E402


def timed(action: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return times


def row(name: str, times: list[float]) -> str:
    ms = sorted(t * 1e3 for t in times)
    return f"| {name} | {statistics.median(ms):.1f} ms ({ms[0]:.1f}-{ms[-1]:.1f}) |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--file-mb", type=float, default=1.0, help="size of the --same-file (default: 1 MiB)")
    parser.add_argument("--real-smi", action="store_true", help="use the nvidia-smi on PATH, not a fake one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if not args.real_smi:
            smi = Path(tmp) / "nvidia-smi"
            smi.write_text("#!/bin/sh\n" + "echo 'NVIDIA H100 80GB HBM3'\n" * 8)
            smi.chmod(0o755)
            os.environ["PATH"] = f"{tmp}{os.pathsep}{os.environ['PATH']}"
        same = Path(tmp) / "train.py"
        same.write_bytes(os.urandom(int(args.file_mb * (1 << 20))))
        config = JoinConfig(expect=1, command=(sys.executable, str(same)), same_file=(str(same),))
        print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores, {args.runs} runs, "
              f"a --same-file of {args.file_mb:g} MiB, {'real' if args.real_smi else 'fake'} nvidia-smi")
        print(f"fingerprint: {take_fingerprint(config).describe()}\n")
        print("| part | time, median (min-max) |\n|---|---:|")
        other = Path(tmp) / "python"  # the same interpreter by another name: asked in a subprocess
        other.symlink_to(sys.executable)
        print(row("Python and TensorFlow versions, rendezvous's interpreter", timed(lambda: probe_interpreter(sys.executable), args.runs)))
        print(row("Python and TensorFlow versions, another interpreter", timed(lambda: probe_interpreter(str(other)), args.runs)))
        print(row("nvidia-smi", timed(list_gpus, args.runs)))
        print(row(f"SHA-256 of {args.file_mb:g} MiB", timed(lambda: file_digest(str(same)), args.runs)))
        print(row("whole fingerprint", timed(lambda: take_fingerprint(config), args.runs)))


if __name__ == "__main__":
    main()
