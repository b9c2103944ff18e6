"""The cause of a failure, for the rendezvous daemon: when ``RENDEZVOUS_ERROR_FILE`` is set,
a failing trainer writes its error there as JSON (type, message, traceback), which every
node of the job then shows instead of the last lines of stderr. Without TensorFlow: the
command line's own errors use it too.
"""

from __future__ import annotations

import json
import os
import traceback

ERROR_FILE_VARIABLE = "RENDEZVOUS_ERROR_FILE"


def write_error(error_type: str, message: str, error: BaseException | None = None) -> None:
    """The trainer's error; nothing when the daemon did not ask for one, or when the file
    cannot be written (stderr says the same)."""
    path = os.environ.get(ERROR_FILE_VARIABLE)
    if not path:
        return
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__)) if error else ""
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"type": error_type, "message": message, "traceback": trace}, f)
    except OSError:
        pass
