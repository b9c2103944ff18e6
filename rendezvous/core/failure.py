"""Why a command failed, as plain data: the cause that travels with the failure.

While the command runs, the daemon keeps the last `MAX_TAIL_LINES` lines (at most
`MAX_TAIL_BYTES`) of its stderr (rendezvous.launch.output). A command may instead write a
structured error to the file `$RENDEZVOUS_ERROR_FILE` names (`ERROR_FILE_VARIABLE`):

    {"type": "RuntimeError", "message": "shard 7 is corrupt", "traceback": "Traceback ...\\n"}

When that file exists after a failure, its error is the cause instead of the stderr tail.
The failing member sends its `Failure` with its exit code; the coordinator hands it to
every member with the abort, and `status --job` shows it. Everything here came from a
command or the network: it is bounded and scrubbed of control characters before anyone
shows it, and it is never a format string.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Optional

from .known_failures import KnownFailure, known_failure, recognize
from .record import record, replace

ERROR_FILE_VARIABLE = "RENDEZVOUS_ERROR_FILE"
MAX_TAIL_LINES = 40
MAX_TAIL_BYTES = 8 * 1024
MAX_LINE = 1000  # characters of one shown line; a longer one is cut
MAX_FIELD = 1000  # characters of the error's type or message
MAX_ERROR_FILE_BYTES = 64 * 1024  # read of the error file; the rest is ignored

# ANSI sequences (colours, cursor moves, titles): dropped whole, not shown as `?[31m`.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")


def scrub(text: str, limit: int = MAX_LINE) -> str:
    """One line of a command's text, safe for a terminal and a log: ANSI sequences dropped,
    what a carriage return overwrote dropped (a progress bar keeps its last state), tabs
    as spaces, any other unprintable character (controls, bidirectional overrides) as `?`,
    at most `limit` characters."""
    text = _ANSI.sub("", text)
    text = text.rstrip("\r").rpartition("\r")[2]
    text = "".join(c if c.isprintable() else "?" for c in text.replace("\t", "    ").replace("\n", " ")).rstrip()
    return text if len(text) <= limit else text[:limit] + "..."


def tail_lines(data: bytes, cut: bool = False) -> tuple[str, ...]:
    """The last MAX_TAIL_LINES lines of `data` (at most MAX_TAIL_BYTES, the end of a
    stream; `cut`: the stream was longer, so its first line is only the end of one),
    decoded and scrubbed, blank lines at the end left out."""
    cut = cut or len(data) > MAX_TAIL_BYTES
    lines = data[-MAX_TAIL_BYTES:].decode("utf-8", "replace").split("\n")
    if cut and len(lines) > 1:
        lines = lines[1:]
    shown = [scrub(line) for line in lines]
    while shown and not shown[-1].strip():
        shown.pop()
    return tuple(shown[-MAX_TAIL_LINES:])


@record
class Failure:
    """A member's command failed: `exit_code` (128+N for death by signal N, named in
    `signal`), `reason` when it counts as failed though it did not exit (stopped), and its
    cause: the error file's `error_type`, `message` and traceback (`tail`, with
    `from_error_file`), or the last lines of its stderr (`tail`). `known`: the key of the
    known failure (rendezvous.core.known_failures) its member recognized in it."""

    node_id: str
    address: str
    rank: Optional[int]
    exit_code: int
    signal: str = ""
    reason: str = ""
    error_type: str = ""
    message: str = ""
    tail: tuple[str, ...] = ()
    from_error_file: bool = False
    known: str = ""

    @property
    def cause(self) -> str:
        """The one line that says why: `RuntimeError: shard 7 is corrupt`. A command killed
        by a signal was killed by it, whatever its stderr said last (often a line logged at
        its start: TensorFlow's `failed call to cuInit`), so the signal is the cause, and
        the reason of one failed though it did not exit (stopped, a peer's port blocked) is;
        the tail still follows as context."""
        if self.from_error_file and (self.error_type or self.message):
            first = self.message.splitlines()[0] if self.message.strip() else ""
            return f"{self.error_type}: {first}" if self.error_type and first else self.error_type or first
        if self.reason:
            return self.reason
        if self.signal:
            return f"killed by {self.signal}"
        last = next((line.strip() for line in reversed(self.tail) if line.strip()), "")
        return last or "nothing on stderr"

    @property
    def ending(self) -> str:
        """How the command ended: `exited with code 1`, `killed by SIGKILL (exit 137)`."""
        if self.reason:
            return f"failed with exit code {self.exit_code} ({self.reason})"
        if self.signal:
            return f"killed by {self.signal} (exit {self.exit_code})"
        return f"exited with code {self.exit_code}"

    @property
    def known_failure(self) -> Optional[KnownFailure]:
        """The known failure its member recognized (None: none, or one this version lacks)."""
        return known_failure(self.known)

    @property
    def hint(self) -> str:
        """`fix: ... (see docs/troubleshooting.md#...)` for a known failure, else empty."""
        known = self.known_failure
        return f"fix: {known.fix} (see {known.link})" if known else ""

    def headline(self) -> str:
        """`node 3f2a9c (10.0.0.12), rank 2, exited with code 1: RuntimeError: shard 7 is corrupt`,
        then the fix of a known failure: `; fix: ... (see docs/troubleshooting.md#...)`. A
        command killed by a signal: `node ..., rank 2, killed by SIGKILL (exit 137)`."""
        rank = "no rank" if self.rank is None else f"rank {self.rank}"
        line = f"node {self.node_id} ({self.address}), {rank}, {self.ending}"
        if self.from_error_file or not (self.reason or self.signal):  # else the ending says why
            line += f": {self.cause}"
        return f"{line}; {self.hint}" if self.hint else line

    def details(self) -> tuple[str, ...]:
        """What follows the headline, each line to be shown indented: the tail or traceback."""
        lines = list(self.tail)
        if self.from_error_file and self.message.count("\n"):
            lines = [*self.message.splitlines()[1:], *lines]
        return tuple(lines[-MAX_TAIL_LINES:])


def bounded(failure: Failure) -> Failure:
    """`failure` as it may be shown, whatever sent it: every text scrubbed and cut."""
    tail = [scrub(line) for line in failure.tail[-MAX_TAIL_LINES:]]
    while sum(len(line) + 1 for line in tail) > MAX_TAIL_BYTES:
        tail.pop(0)
    message = "\n".join(scrub(line) for line in failure.message[:MAX_FIELD].splitlines()[:MAX_TAIL_LINES])
    return Failure(
        node_id=scrub(failure.node_id, 64), address=scrub(failure.address, 64),
        rank=failure.rank if failure.rank is None or failure.rank >= 0 else None,
        exit_code=failure.exit_code, signal=scrub(failure.signal, 16), reason=scrub(failure.reason, MAX_FIELD),
        error_type=scrub(failure.error_type, 200), message=message, tail=tuple(tail),
        from_error_file=failure.from_error_file, known=scrub(failure.known, 64),
    )


def recognized(failure: Failure, tf_port: Optional[int] = None) -> Failure:
    """`failure` with the key of the known failure its cause, message or tail shows (none:
    unchanged); `tf_port`: the failing node's port in the TF_CONFIG its command was given."""
    if failure.signal and not failure.reason:
        return failure  # killed from outside: whatever it printed before did not end it
    lines = [failure.reason, failure.cause, *failure.message.splitlines(), *failure.tail]
    known = recognize(lines, tf_port)
    return replace(failure, known=known.key) if known else failure


@record
class ErrorReport:
    """What a command wrote to its error file."""

    error_type: str
    message: str
    traceback: tuple[str, ...] = ()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value)


def _lines(value: Any) -> Iterable[str]:
    if isinstance(value, list):
        return (line for item in value for line in _text(item).splitlines())
    return _text(value).splitlines()


def parse_error_file(data: bytes) -> Optional[ErrorReport]:
    """The error a command wrote (JSON: type, message, traceback as one string or a list
    of lines), bounded and scrubbed; None for anything else (not JSON, not an object,
    neither type nor message)."""
    try:
        value = json.loads(data[:MAX_ERROR_FILE_BYTES].decode("utf-8", "replace"))
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    error_type = scrub(_text(value.get("type")), 200)
    message = "\n".join(scrub(line) for line in _text(value.get("message"))[:MAX_FIELD].splitlines()[:MAX_TAIL_LINES])
    if not error_type and not message.strip():
        return None
    raw = "\n".join(_lines(value.get("traceback"))).encode("utf-8", "replace")
    return ErrorReport(error_type, message, tail_lines(raw))


def failure_to_dict(failure: Failure) -> dict[str, Any]:
    """The JSON of a failure (`status --json`, `status --job --json`, the JSON log)."""
    return {
        "node_id": failure.node_id,
        "address": failure.address,
        "rank": failure.rank,
        "exit_code": failure.exit_code,
        "signal": failure.signal or None,
        "reason": failure.reason or None,
        "cause": failure.cause,
        "error_type": failure.error_type or None,
        "message": failure.message or None,
        "tail": list(failure.tail),
        "source": "error file" if failure.from_error_file else "stderr",
        "known": failure.known_failure.key if failure.known_failure else None,
        "fix": failure.known_failure.fix if failure.known_failure else None,
        "link": failure.known_failure.link if failure.known_failure else None,
    }
