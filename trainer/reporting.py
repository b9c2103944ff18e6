"""What the trainer tells the world while it trains, besides its epoch lines.

* Progress for the rendezvous daemon: when ``RENDEZVOUS_PROGRESS_FILE`` is set, one JSON
  line per epoch and every ``--progress-every`` steps is appended to that file (the
  contract is documented in the README; this module does not import rendezvous).
* The cause of a failure: see ``trainer.errorfile``.
* TensorBoard logs from the chief with ``--log-dir``: every epoch's scalars, the learning
  rate included.
"""

from __future__ import annotations

import json
import math
import os
import time

from trainer._keras import keras

PROGRESS_VARIABLE = "RENDEZVOUS_PROGRESS_FILE"


def progress_line(epoch: int, epochs: int, step: int, logs: dict, images_per_s: float | None) -> str:
    """One line of the contract; NaN and infinities become null (JSON has neither)."""

    def finite(value) -> float | None:
        value = None if value is None else float(value)
        return value if value is not None and math.isfinite(value) else None

    metrics = {k: finite(v) for k, v in logs.items() if k != "loss"}
    record = {
        "epoch": epoch,
        "epochs": epochs,
        "step": step,
        "loss": finite(logs.get("loss")),
        "images_per_s": finite(images_per_s),
        "metrics": {k: v for k, v in metrics.items() if v is not None},
    }
    return json.dumps(record, allow_nan=False) + "\n"


class ProgressWriter(keras.callbacks.Callback):
    """Appends progress lines to `path`: at every epoch end and every `every` steps.
    `epoch` counts from 1 and is the epoch in progress (or just finished)."""

    def __init__(self, path: str, epochs: int, steps_per_epoch: int, global_batch_size: int, every: int):
        super().__init__()
        self.path = path
        self.epochs = epochs
        self.steps_per_epoch = steps_per_epoch
        self.global_batch_size = global_batch_size
        self.every = every
        self._epoch = 0
        self._since: tuple[int, float] | None = None  # (step, time) of the last line

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.every and (batch + 1) % self.every == 0:
            self._write(self._epoch + 1, self._step(batch), logs or {})

    def on_epoch_end(self, epoch, logs=None):
        self._write(epoch + 1, (epoch + 1) * self.steps_per_epoch, logs or {})

    def _step(self, batch: int) -> int:
        return self._epoch * self.steps_per_epoch + batch + 1

    def _write(self, epoch: int, step: int, logs: dict) -> None:
        now = time.perf_counter()
        rate = None
        if self._since is not None and step > self._since[0] and now > self._since[1]:
            rate = (step - self._since[0]) * self.global_batch_size / (now - self._since[1])
        self._since = (step, now)
        line = progress_line(epoch, self.epochs, step, logs, rate)
        try:
            with open(self.path, "a") as f:  # one write per line: a reader never sees half of it
                f.write(line)
        except OSError:
            pass  # progress is for watching: the training goes on without it


def progress_callback(epochs: int, steps_per_epoch: int, global_batch_size: int, every: int, environ=os.environ):
    """The ProgressWriter if the daemon asked for progress, else None."""
    path = environ.get(PROGRESS_VARIABLE)
    if not path:
        return None
    return ProgressWriter(path, epochs, steps_per_epoch, global_batch_size, every)


def tensorboard_callback(log_dir: str | None, is_chief: bool):
    """TensorBoard scalars per epoch (learning rate included) from the chief only: the
    workers train one model, so one set of curves tells it all."""
    if not log_dir or not is_chief:
        return None
    return keras.callbacks.TensorBoard(log_dir, update_freq="epoch", write_graph=False, profile_batch=0)
