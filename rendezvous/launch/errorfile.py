"""The file a command may write its error to: `$RENDEZVOUS_ERROR_FILE` (its JSON:
rendezvous.core.failure).

Each round's member makes a directory only this user can enter, in the runtime directory
(or the system's temporary one), and names a file in it that does not exist yet: when it
exists after the command failed, the command wrote it. It is read like the progress file:
never following a link, never blocking on a FIFO, at most MAX_ERROR_FILE_BYTES.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Optional

from ..core.failure import MAX_ERROR_FILE_BYTES, ErrorReport, parse_error_file

log = logging.getLogger(__name__)


class ErrorFile:
    """One round's error file: `path` goes into the command's environment."""

    def __init__(self, directory: Optional[Path], node_id: str) -> None:
        where = directory if directory is not None and directory.is_dir() else Path(tempfile.gettempdir())
        self._dir = Path(tempfile.mkdtemp(prefix=f"{node_id}-error-", dir=where))
        self.path = self._dir / "error.json"

    def read(self) -> Optional[ErrorReport]:
        """What the command wrote, or None: nothing, or nothing usable (logged)."""
        try:
            data = self._read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            problem = "it is a symbolic link" if exc.errno == errno.ELOOP else f"cannot read it: {exc.strerror or exc}"
            log.warning("error file %s: %s; the stderr tail is the cause", self.path, problem)
            return None
        report = parse_error_file(data) if data is not None else None
        if report is None:
            problem = "not a regular file" if data is None else "not a JSON object with a type or a message"
            log.warning("error file %s: %s; the stderr tail is the cause", self.path, problem)
        return report

    def _read(self) -> Optional[bytes]:
        """At most MAX_ERROR_FILE_BYTES of the file; None when it is not a regular file."""
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            return os.read(fd, MAX_ERROR_FILE_BYTES)
        finally:
            os.close(fd)

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
