"""examples/cifar10_resnet56.py as a user runs it: through `rendezvous join --expect 2` on
loopback, on synthetic images for a few steps; the two workers end with one model."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

import pytest

from cifar10 import write_cifar10
from paths import REPO
from patience import HANG
from peers import join_argv, start_peer

pytestmark = pytest.mark.training

EXAMPLE = REPO / "examples" / "cifar10_resnet56.py"


def test_the_resnet56_example_trains_one_model_on_two_workers(tmp_path):
    job = f"example-{secrets.token_hex(3)}"
    command = [sys.executable, str(EXAMPLE), "--synthetic", "--steps", "2", "--epochs", "2",
               "--global-batch", "16", "--threads", "1", "--backup-dir", str(tmp_path / "backup")]
    peers = [
        start_peer(join_argv(2, job, tmp_path, address, ["--timeout", "120"], command), tmp_path, address,
                   extra_env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
        for address in ("127.0.0.2", "127.0.0.3")
    ]
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log[-4000:]
    logs = [peer.log for peer in peers]
    assert all("857082 parameters, 2 steps/epoch" in log for log in logs), logs[0][-4000:]
    assert {re.search(r"worker (\d)/2, round 1", log).group(1) for log in logs} == {"0", "1"}
    digests = [re.findall(r"weights sha256 ([0-9a-f]{64})", log) for log in logs]
    assert all(len(found) == 1 for found in digests), digests
    assert digests[0] == digests[1]  # synchronous training: one model, not two


def test_the_example_runs_alone_on_cifar10s_own_files(tmp_path):
    """Without rendezvous (one worker, env() is None) and with --data-dir: the python batches
    as cs.toronto.edu serves them, written small (tests/support/cifar10.py)."""
    data, _ = write_cifar10(tmp_path, per_batch=8, test=16)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    for name in ("TF_CONFIG", "RENDEZVOUS_RANK"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, str(EXAMPLE), "--data-dir", str(data), "--epochs", "1",
                           "--global-batch", "8", "--threads", "1", "--backup-dir", str(tmp_path / "backup")],
                          env=env, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "alone: 857082 parameters, 5 steps/epoch" in done.stdout  # 40 images, 8 a batch
    assert re.search(r"test accuracy \d\.\d{4}", done.stdout) and "weights sha256" in done.stdout
