"""The progress contract from the script's side: one JSON line per report, appended to
`RENDEZVOUS_PROGRESS_FILE`, e.g.

    {"epoch": 3, "epochs": 60, "step": 1170, "loss": 0.84, "images_per_s": 2310.0,
     "metrics": {"accuracy": 0.71}}

`epoch` counts from 1 and is the epoch in progress (or just finished), `step` counts the
steps since the start of the training (resumed epochs included). NaN and infinities
become null. The daemon reads the latest complete line; each line is written with one
write() to a file opened for appending, so a reader never sees half of one.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from typing import Any, Mapping, Optional

PROGRESS_VARIABLE = "RENDEZVOUS_PROGRESS_FILE"
MAX_METRICS = 16  # what the daemon keeps
MAX_NAME = 64


def _finite(value: Any) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def progress_line(epoch: Optional[int] = None, epochs: Optional[int] = None, step: Optional[int] = None,
                  loss: Any = None, images_per_s: Any = None, metrics: Optional[Mapping[str, Any]] = None) -> str:
    """One line of the contract, newline included; what is None or not finite is left out."""
    record: dict[str, Any] = {"epoch": epoch, "epochs": epochs, "step": step,
                              "loss": _finite(loss), "images_per_s": _finite(images_per_s)}
    record = {k: v for k, v in record.items() if v is not None}
    kept: dict[str, float] = {}
    for name, value in (metrics or {}).items():
        number = _finite(value)
        if number is not None and len(kept) < MAX_METRICS:
            kept[str(name)[:MAX_NAME]] = number
    if kept:
        record["metrics"] = kept
    return json.dumps(record, allow_nan=False) + "\n"


def write_progress(epoch: Optional[int] = None, epochs: Optional[int] = None, step: Optional[int] = None,
                   loss: Any = None, images_per_s: Any = None, metrics: Optional[Mapping[str, Any]] = None,
                   path: Optional[str] = None) -> bool:
    """Append one progress line to `path` (default: `$RENDEZVOUS_PROGRESS_FILE`), for a
    custom training loop; whether it was written. Nothing happens outside rendezvous, and a
    file that cannot be written is skipped: progress is for watching, the training goes on."""
    path = path or os.environ.get(PROGRESS_VARIABLE)
    if not path:
        return False
    line = progress_line(epoch, epochs, step, loss, images_per_s, metrics).encode()
    try:
        # O_NONBLOCK: whatever sits at the path (a FIFO nobody reads) never blocks the training
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        try:
            return os.write(fd, line) == len(line)
        finally:
            os.close(fd)
    except OSError:
        return False


class _Reporter:
    """The callback's logic, whatever Keras it runs under: Keras calls these hooks with
    `self.params` set ({"epochs": ..., "steps": ...})."""

    params: dict

    def __init__(self, path: Optional[str], every: int, global_batch_size: Optional[int]) -> None:
        super().__init__()
        self.path = path
        self.every = every
        self.global_batch_size = global_batch_size
        self._epoch = 0
        self._counted = 0  # steps seen, where Keras does not say how many an epoch has
        self._since: Optional[tuple[int, float]] = None  # (step, time) of the last line

    def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
        self._epoch = epoch

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        self._counted += 1
        if self.every and (batch + 1) % self.every == 0:
            self._write(self._epoch + 1, self._step(batch), logs)

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        steps = (getattr(self, "params", None) or {}).get("steps")
        self._write(epoch + 1, (epoch + 1) * steps if steps else self._counted, logs)

    def _step(self, batch: int) -> int:
        steps = (getattr(self, "params", None) or {}).get("steps")
        return self._epoch * steps + batch + 1 if steps else self._counted

    def _write(self, epoch: int, step: int, logs: Any) -> None:
        if not self.path:
            return
        now = time.perf_counter()
        rate = None
        if self.global_batch_size and self._since is not None and step > self._since[0] and now > self._since[1]:
            rate = (step - self._since[0]) * self.global_batch_size / (now - self._since[1])
        self._since = (step, now)
        logs = dict(logs or {})
        epochs = (getattr(self, "params", None) or {}).get("epochs")
        write_progress(epoch, epochs, step, logs.pop("loss", None), rate, logs, path=self.path)


_classes: dict = {}


def _keras_base(keras: Any) -> type:
    """The Callback class of `keras` (a module), else of the Keras TensorFlow uses (tf.keras:
    tf-keras with TF_USE_LEGACY_KERAS=1, else Keras 3), else of Keras 3 alone."""
    if keras is None:
        tf = sys.modules.get("tensorflow")
        if tf is not None:
            keras = tf.keras
        else:
            import keras as keras3  # Keras 3 on another backend

            keras = keras3
    return keras.callbacks.Callback  # type: ignore[no-any-return]


def ProgressCallback(global_batch_size: Optional[int] = None, every: int = 0, path: Optional[str] = None,
                     keras: Any = None) -> Any:
    """A Keras callback that appends a progress line at the end of every epoch and, with
    `every`, every that many steps. `global_batch_size` (summed over the workers) gives
    the images per second. The line goes to `path`, by default `$RENDEZVOUS_PROGRESS_FILE`;
    outside rendezvous the callback does nothing, so a script can always add it.

    The callback subclasses the Callback of `keras` (the module your model comes from, e.g.
    `tf.keras` or `keras`); without it, that of `tf.keras` when TensorFlow is imported
    (tf-keras under TF_USE_LEGACY_KERAS=1, else Keras 3), else Keras 3's."""
    if not isinstance(every, int) or isinstance(every, bool) or every < 0:
        raise ValueError(f"every={every!r}: the number of steps between two lines, 0 for epochs only")
    if global_batch_size is not None and (not isinstance(global_batch_size, int) or global_batch_size < 1):
        raise ValueError(f"global_batch_size={global_batch_size!r}: the images of one step summed over "
                         "the workers, or None")
    base = _keras_base(keras)
    cls = _classes.get(base)
    if cls is None:
        cls = _classes[base] = type("ProgressCallback", (_Reporter, base), {"__module__": __name__})
    return cls(path or os.environ.get(PROGRESS_VARIABLE) or None, every, global_batch_size)
