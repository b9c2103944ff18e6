"""rendezvous.script's Keras callback under both Kerases: lines the daemon reads, from real fits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paths import REPO
from rendezvous.core.progress import parse_progress

pytestmark = pytest.mark.training

SCRIPT = Path(__file__).parents[2] / "support" / "keras_progress.py"


@pytest.mark.parametrize("flavor", ["legacy", "keras3"])
def test_the_progress_callback_writes_the_contract_under_either_keras(tmp_path, flavor):
    path = tmp_path / "progress.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), "RENDEZVOUS_PROGRESS_FILE": str(path)}
    env.pop("TF_CONFIG", None)
    done = subprocess.run([sys.executable, str(SCRIPT), flavor], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [parse_progress(line) for line in path.read_text().splitlines()]
    # every 2 steps and at each epoch's end, 4 steps an epoch
    assert [(p.epoch, p.epochs, p.step) for p in lines] == [
        (1, 2, 2), (1, 2, 4), (1, 2, 4), (2, 2, 6), (2, 2, 8), (2, 2, 8)]
    assert all(p.loss is not None and dict(p.metrics).keys() >= {"mae"} for p in lines)
    assert lines[1].images_per_s is not None and lines[1].images_per_s > 0
