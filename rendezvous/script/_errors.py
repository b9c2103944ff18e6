"""The error file: what made a script fail, for the daemon to carry to every node.

When `RENDEZVOUS_ERROR_FILE` is set, an uncaught exception is written there as one JSON
object in UTF-8:

    {"type": "ValueError", "message": "loss is NaN at step 1200", "traceback": "Traceback ..."}

`type` is the exception's class name, `message` its str(), `traceback` the formatted
traceback as Python prints it (causes and contexts included). The message is cut to its
first MAX_MESSAGE characters, the traceback to its last MAX_TRACEBACK (the innermost frames
are the ones that matter). The file is replaced atomically: written beside the path under a
temporary name, then renamed, so a reader sees the whole object or nothing.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable, Optional

ERROR_VARIABLE = "RENDEZVOUS_ERROR_FILE"
MAX_MESSAGE = 4096
MAX_TRACEBACK = 32768


def error_record(error: BaseException, skip: int = 0) -> dict:
    """The error file's object for `error`, its traceback without its first `skip` frames."""
    import traceback  # only when there is an error to write

    message = str(error)
    frames = error.__traceback__
    for _ in range(skip):
        frames = frames.tb_next if frames is not None and frames.tb_next is not None else frames
    trace = "".join(traceback.format_exception(type(error), error, frames))
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE - 3] + "..."
    if len(trace) > MAX_TRACEBACK:
        trace = "..." + trace[-(MAX_TRACEBACK - 3):]
    return {"type": type(error).__name__, "message": message, "traceback": trace}


def write_error(error: BaseException, path: Optional[str] = None) -> bool:
    """Write `error` to `path` (default: `$RENDEZVOUS_ERROR_FILE`); whether it was written.
    Nothing happens without a path; a file that cannot be written is reported on stderr."""
    return _write(error, path, 0)


def _write(error: BaseException, path: Optional[str], skip: int) -> bool:
    path = path or os.environ.get(ERROR_VARIABLE)
    if not path:
        return False
    # surrogateescape'd bytes (an undecodable file name in a message) must not fail the write
    data = json.dumps(error_record(error, skip), ensure_ascii=False).encode("utf-8", "backslashreplace")
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f".error-{os.getpid()}-{os.urandom(4).hex()}.json")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError as failure:
        print(f"rendezvous.script: cannot write the error file {path}: {failure.strerror or failure}",
              file=sys.stderr, flush=True)
        return False
    return True


def record(function: Optional[Callable[..., Any]] = None, *, path: Optional[str] = None) -> Any:
    """Decorate a script's main function: an exception it lets out (an `Exception`, not
    SystemExit or KeyboardInterrupt) is written to the error file, then raised on, so the
    script still fails as it would have. `@record` or `@record(path=...)`."""

    def decorate(wrapped: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(wrapped)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return wrapped(*args, **kwargs)
            except Exception as error:
                _write(error, path, 1)  # the traceback from the decorated function on, not this wrapper
                raise

        return wrapper

    return decorate(function) if function is not None else decorate
