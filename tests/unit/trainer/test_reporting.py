"""The trainer's side of the progress contract: lines the daemon can read, only when asked."""

from __future__ import annotations

import json
import math

from rendezvous.core.progress import Progress, parse_progress
from trainer import reporting


def test_a_line_the_daemon_reads_even_with_a_diverged_loss():
    line = reporting.progress_line(3, 10, 120, {"loss": math.nan, "accuracy": 0.5, "lr": math.inf}, 2310.0)
    assert line.endswith("\n") and "NaN" not in line and "Infinity" not in line
    assert json.loads(line)["loss"] is None
    assert parse_progress(line) == Progress(epoch=3, epochs=10, step=120, images_per_s=2310.0, metrics=(("accuracy", 0.5),))


def test_progress_and_tensorboard_only_when_asked(tmp_path):
    assert reporting.progress_callback(2, 10, 64, 5, environ={}) is None
    writer = reporting.progress_callback(2, 10, 64, 5, environ={"RENDEZVOUS_PROGRESS_FILE": str(tmp_path / "p")})
    assert writer.path == str(tmp_path / "p")
    assert reporting.tensorboard_callback(str(tmp_path), is_chief=False) is None
    assert reporting.tensorboard_callback(None, is_chief=True) is None
    assert reporting.tensorboard_callback(str(tmp_path), is_chief=True) is not None
