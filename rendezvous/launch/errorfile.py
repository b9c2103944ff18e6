"""The file a command may write its error to: `$RENDEZVOUS_ERROR_FILE` (its JSON:
rendezvous.core.failure).

Each round's member makes a directory only this user can enter, in the runtime directory
(or the system's temporary one), and names a file in it that does not exist yet: when it
exists after the command failed, the command wrote it. It is read like the progress file:
never following a link, never blocking on a FIFO, at most MAX_ERROR_FILE_BYTES.
"""

from __future__ import annotations

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
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("error file %s: cannot read it (%s); the stderr tail is the cause", self.path,
                        exc.strerror or exc)
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                log.warning("error file %s: not a regular file; the stderr tail is the cause", self.path)
                return None
            data = os.read(fd, MAX_ERROR_FILE_BYTES)
        except OSError as exc:
            log.warning("error file %s: cannot read it (%s)", self.path, exc.strerror or exc)
            return None
        finally:
            os.close(fd)
        report = parse_error_file(data)
        if report is None:
            log.warning("error file %s: not a JSON object with a type or a message; the stderr tail is the cause",
                        self.path)
        return report

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)
