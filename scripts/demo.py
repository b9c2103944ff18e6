"""Train one model with N workers on this machine, each a separate `rendezvous join`.

Every peer gets its own loopback address (127.0.0.2, 127.0.0.3, ...), as separate hosts
would have their own. Their output is shown live, prefixed with the peer's address; at the
end a summary says who became worker 0, the TF_CONFIG each got, and the final accuracy.

    scripts/demo [--peers N] [--epochs E] [-- extra trainer options]
"""

from __future__ import annotations

import argparse
import json
import re
import secrets
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# TensorFlow's native start-up lines (glog style), printed before its log level applies.
TF_NATIVE_LOG = re.compile(r"^(WARNING: All log messages before absl|[IWEF]\d{4} )")
# What a node logs once its round is frozen (rendezvous.daemon.joiner).
TF_CONFIG_LINE = re.compile(r"round \d+ frozen: worker (\d+) of (\d+),.*TF_CONFIG=(\{.*\})")


def stream(prefix: str, pipe, sink: list[str]) -> None:
    for raw in pipe:
        line = raw.decode(errors="replace").rstrip("\n")
        sink.append(line)
        if not TF_NATIVE_LOG.match(line):
            print(f"{prefix} {line}", flush=True)


def shell_code(code: int) -> int:
    """A Popen return code as a shell shows it: -N (died of signal N) is 128+N."""
    return 128 - code if code < 0 else code


def exit_status(codes: list[int]) -> int:
    """0 when every peer succeeded, else the highest of their shell-style codes."""
    return max((shell_code(c) for c in codes), default=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peers", type=int, default=2, help="number of workers (default 2)")
    parser.add_argument("--epochs", type=int, default=5, help="epochs to train (default 5)")
    parser.add_argument("trainer_options", nargs="*", help="more options for python -m trainer")
    args = parser.parse_args()
    if not 1 <= args.peers <= 8:
        parser.error(f"--peers must be from 1 to 8, got {args.peers}")

    job = f"demo-{secrets.token_hex(3)}"
    workdir = Path(tempfile.mkdtemp(prefix="rendezvous-demo-"))
    print(f"demo: job {job!r}, {args.peers} peers, results in {workdir}\n", flush=True)
    peers = []
    for i in range(args.peers):
        address = f"127.0.0.{i + 2}"
        result = workdir / f"{address}.json"
        argv = [
            sys.executable, "-m", "rendezvous", "join",
            "--expect", str(args.peers), "--job", job, "--address", address, "--timeout", "60",
            "--", "--epochs", str(args.epochs), "--threads", "1", "--result-file", str(result),
            *args.trainer_options,
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        lines: list[str] = []
        reader = threading.Thread(target=stream, args=(f"[{address}]", proc.stdout, lines), daemon=True)
        reader.start()
        peers.append((address, proc, lines, reader, result))

    try:
        codes = [shell_code(proc.wait()) for _, proc, _, _, _ in peers]
    except KeyboardInterrupt:
        for _, proc, _, _, _ in peers:
            proc.terminate()
        codes = [shell_code(proc.wait()) for _, proc, _, _, _ in peers]
    for _, _, _, reader, _ in peers:
        reader.join(timeout=5)

    print("\n==== summary ====")
    weights = set()
    for (address, _, lines, _, result), code in zip(peers, codes):
        frozen = next((m for m in map(TF_CONFIG_LINE.search, lines) if m), None)
        if frozen:
            print(f"{address}: worker {frozen[1]} of {frozen[2]}, TF_CONFIG {frozen[3]}")
        else:
            print(f"{address}: never got a TF_CONFIG")
        if result.exists():
            summary = json.loads(result.read_text())
            weights.add(summary.get("weights_sha256"))
            print(f"    test accuracy {summary['test_accuracy']:.3f}, exit code {code}")
        else:
            print(f"    no result, exit code {code}")
    if all(c == 0 for c in codes):
        same = "identical on every worker" if len(weights) == 1 else "DIFFERENT between workers"
        print(f"final weights: {same}")
        print("worker 0 is the peer with the lowest address, 127.0.0.2")
    return exit_status(codes)


if __name__ == "__main__":
    sys.exit(main())
