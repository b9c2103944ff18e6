"""A command that writes junk to its progress file (terminal escapes, NUL bytes, NaN, 3 MB
of one line, the end of it on the report's own line) and then a valid report: a real daemon
shows the report in `rendezvous status` and on /metrics."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from patience import HANG, wait_until
from peers import join_argv, start_peer

WRITER = r"""
import os, time
with open(os.environ["RENDEZVOUS_PROGRESS_FILE"], "ab", buffering=0) as f:
    f.write(b"\x1b[31mred\x1b[0m\n")
    f.write(b"\x00\x00\x00\n")
    f.write(b'{"loss": NaN}\n')
    f.write(b"x" * (3 << 20))  # no newline: the report ends this line
    f.write(b'\x1b[2K{"epoch": 3, "epochs": 9, "step": 7, "loss": 0.5}\x1b[0m\n')
time.sleep(300)
"""


def status(run_dir: Path) -> list[dict]:
    result = subprocess.run(
        [sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True, timeout=HANG,
        env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(run_dir)}, stdin=subprocess.DEVNULL,
    )
    return json.loads(result.stdout) if result.returncode == 0 else []


def test_a_report_after_junk_reaches_status_and_metrics(tmp_path: Path):
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        metrics_port = s.getsockname()[1]
    options = ["--metrics-port", str(metrics_port), "--timings", "progress-poll=0.1,progress-send=0.2"]
    job = f"p-{secrets.token_hex(4)}"
    peer = start_peer(join_argv(1, job, tmp_path, address="127.0.0.2", options=options,
                                command=[sys.executable, "-c", WRITER]), tmp_path, "junk")
    try:
        shown = wait_until(lambda: [s["progress"] for s in status(tmp_path / "run") if s["progress"]],
                           lambda: f"progress in status:\n{peer.log}")
        assert shown[0]["epoch"] == 3 and shown[0]["step"] == 7 and shown[0]["loss"] == 0.5, shown
        with urllib.request.urlopen(f"http://127.0.0.2:{metrics_port}/metrics", timeout=HANG) as answer:
            metrics = answer.read().decode()
        assert f'rendezvous_training_epoch{{job="{job}",' in metrics and "} 3.0" in metrics.split(
            "rendezvous_training_epoch{", 1)[1].splitlines()[0], metrics
    finally:
        peer.proc.terminate()
        peer.wait()
