"""Training progress as a command reports it: the contract, and reading it.

The daemon passes `RENDEZVOUS_PROGRESS_FILE` to the command: a regular file to which the
command appends one JSON object per line, whenever it likes, e.g.

    {"epoch": 12, "epochs": 60, "step": 5400, "loss": 0.84, "images_per_s": 2310,
     "metrics": {"accuracy": 0.91}}

Every key is optional; unknown keys are ignored. Epochs and steps are whole numbers from
0 to 2**64 - 1 (what the wire's uint64 holds: a larger one makes the line malformed), the
rest finite numbers (NaN, infinities, which JSON writers produce for a diverged loss, and
integers too large for a double count as unknown). Metric names are cut to MAX_NAME
characters, and what UTF-8 cannot carry in them (a lone surrogate escaped in the JSON)
becomes "?". The latest valid line is the command's progress.
A file, not a pipe: a command never blocks or dies because nobody reads.

A line may carry junk before its object (terminal escapes, NUL bytes, a progress bar's
carriage return, more than MAX_LINE bytes of anything): the object that ends the line
counts, so that a valid report is never lost to what the command wrote before it.

Everything here is pure: `parse_progress` reads one object, `parse_progress_line` one
line, `split_lines` cuts a stream of bytes into complete lines of bounded length (their
newest bytes).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Mapping, Optional

from .record import record

VARIABLE = "RENDEZVOUS_PROGRESS_FILE"

# Longer lines are cut to this: progress is a few hundred bytes, and a runaway writer
# must not make the daemon hold its whole output.
MAX_LINE = 4096
# At most this many metrics are kept, with names of at most MAX_NAME characters.
MAX_METRICS = 16
MAX_NAME = 64
# Epochs and steps travel as protobuf uint64.
MAX_WHOLE = 2**64 - 1


@record
class Progress:
    """A command's latest report; None where it said nothing (or nothing finite)."""

    epoch: Optional[int] = None
    epochs: Optional[int] = None  # how many the run will do, for `epoch 12/60`
    step: Optional[int] = None
    loss: Optional[float] = None
    images_per_s: Optional[float] = None
    metrics: tuple[tuple[str, float], ...] = ()

    @property
    def is_empty(self) -> bool:
        return self == Progress()


def _whole(data: Mapping[str, Any], key: str) -> Optional[int]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_WHOLE:
        raise ValueError(f"{key} must be a whole number of zero or more, at most {MAX_WHOLE}, got {_short(value)}")
    return value


def _short(value: Any) -> str:
    """A bad value for a message: a 4,000-digit number is not worth a 4,000-character warning."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite(value: Any, key: str) -> Optional[float]:
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ValueError(f"{key} must be a number, got {_short(value)}")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double's range: as unknown as an infinity
        return None
    return number if math.isfinite(number) else None


def _name(name: str) -> str:
    """A metric's name as protobuf's string field takes it: valid UTF-8."""
    return name[:MAX_NAME].encode("utf-8", "replace").decode("utf-8")


def _metrics(value: Any) -> tuple[tuple[str, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ValueError(f"metrics must be an object of names to numbers, got {_short(value)}")
    kept = []
    for name, number in list(value.items())[:MAX_METRICS]:
        finite = _finite(number, f"metric {name!r}")
        if finite is not None:
            kept.append((_name(str(name)), finite))
    return tuple(sorted(kept))


def parse_progress(line: str) -> Progress:
    """One line of the progress file; ValueError saying what is wrong with it."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"not a JSON object: {line[:40]!r}")
    return Progress(
        epoch=_whole(data, "epoch"),
        epochs=_whole(data, "epochs"),
        step=_whole(data, "step"),
        loss=_finite(data.get("loss"), "loss"),
        images_per_s=_finite(data.get("images_per_s"), "images_per_s"),
        metrics=_metrics(data.get("metrics")),
    )


# What a terminal-minded writer puts around a line: escape sequences (colours, "clear the
# line"), and the other control characters JSON never holds raw (NUL padding, a progress
# bar's carriage returns).
_TERMINAL_JUNK = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")
# A line that is not one JSON object is searched for one that ends it, from at most this
# many opening braces: a line of braces costs no more than a few lines.
MAX_STARTS = 64


def parse_progress_line(line: bytes) -> Progress:
    """One line of the progress file: the JSON object it is, or else the one that ends it
    after junk the command wrote before it on the same line (terminal escapes, NUL bytes, a
    carriage return, the start of a cut line); ValueError naming the whole line's problem
    when it holds none."""
    text = line.decode("utf-8", "replace")
    try:
        return parse_progress(text)
    except ValueError as exc:
        problem = exc
    text = _TERMINAL_JUNK.sub("", text).strip()
    decoder = json.JSONDecoder()
    start = text.find("{")
    for _ in range(MAX_STARTS):
        if start < 0:
            break
        try:
            data, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            data, end = None, -1
        if isinstance(data, dict) and end == len(text):
            return parse_progress(text[start:])
        start = text.find("{", start + 1)
    raise problem


def split_lines(pending: bytes, chunk: bytes, limit: int = MAX_LINE) -> tuple[list[bytes], bytes, bool]:
    """Add `chunk` to the incomplete line `pending`: the complete lines, the new incomplete
    rest, and whether a line was cut. A line longer than `limit` keeps its last `limit`
    bytes (the newest: what a writer put after junk on the same line); an incomplete rest
    never grows past `limit` + 1."""
    lines = (pending + chunk).split(b"\n")
    rest = lines.pop()
    cut = any(len(line) > limit for line in lines) or len(rest) > limit
    return [line[-limit:] for line in lines], rest[-(limit + 1):], cut


def _group(number: float) -> str:
    return f"{number:,.0f}"


def describe(progress: Progress) -> str:
    """`epoch 12/60, loss 0.84, 2,310 img/s`; only what is known."""
    parts = []
    if progress.epoch is not None:
        parts.append(f"epoch {progress.epoch}" + (f"/{progress.epochs}" if progress.epochs else ""))
    elif progress.step is not None:
        parts.append(f"step {progress.step}")
    if progress.loss is not None:
        parts.append(f"loss {progress.loss:.3g}")
    if progress.images_per_s is not None:
        parts.append(f"{_group(progress.images_per_s)} img/s")
    return ", ".join(parts)


def progress_to_dict(progress: Progress) -> dict[str, Any]:
    """For JSON output: never NaN (unknowns are null)."""
    return {
        "epoch": progress.epoch,
        "epochs": progress.epochs,
        "step": progress.step,
        "loss": progress.loss,
        "images_per_s": progress.images_per_s,
        "metrics": dict(progress.metrics),
    }
