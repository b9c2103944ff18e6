"""Following the progress file a command appends to (the contract: rendezvous.core.progress).

The daemon creates the file before the command starts and polls it: only complete new
lines are read, at most `MAX_READ` bytes per poll (a command that writes faster is read
from its latest lines on), and the latest valid line becomes the command's `Progress`.
Malformed lines are skipped with one warning per round, never an error: progress
is for people watching, and the training goes on whatever it writes. Whatever the command
puts at the path instead of the file (a FIFO, a symbolic link, a directory) is not read,
with the same one warning: opening never blocks and never follows a link.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..core.progress import MAX_LINE, Progress, parse_progress_line, split_lines

log = logging.getLogger(__name__)

# Per poll: enough for hundreds of lines; older ones would be overwritten by newer anyway.
MAX_READ = 64 * MAX_LINE


def create_progress_file(directory: Optional[Path], node_id: str) -> Path:
    """An empty file only this user can write, in `directory` (the runtime directory)
    or, without one, the system's temporary directory."""
    where = directory if directory is not None and directory.is_dir() else Path(tempfile.gettempdir())
    fd, path = tempfile.mkstemp(prefix=f"{node_id}-progress-", suffix=".jsonl", dir=where)
    os.close(fd)
    return Path(path)


class ProgressFollower:
    """Polls `path` every `interval` seconds and calls `on_progress` with each new latest
    progress, until `close`, which also removes the file."""

    def __init__(self, path: Path, interval: float, on_progress: Callable[[Progress], None]) -> None:
        self.path = path
        self._interval = interval
        self._on_progress = on_progress
        self._offset = 0
        self._pending = b""
        self._warned = False
        self.latest: Optional[Progress] = None
        self._task: Optional[asyncio.Task] = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._poll(), name="progress")

    async def _poll(self) -> None:
        while True:
            self.read()
            await asyncio.sleep(self._interval)

    def read(self) -> None:
        """Read what was appended since the last call; report the newest valid line."""
        chunk = self._read_new()
        if not chunk:
            return
        lines, self._pending, cut = split_lines(self._pending, chunk)
        if cut:
            self._warn(f"a line longer than {MAX_LINE} bytes was cut")
        newest = None
        for line in lines:
            if not line.strip():
                continue
            try:
                newest = parse_progress_line(line)
            except ValueError as exc:
                self._warn(f"a line is not progress ({exc})")
        if newest is not None and newest != self.latest:
            self.latest = newest
            self._on_progress(newest)

    def _read_new(self) -> bytes:
        # The command may have put anything at the path: a FIFO would block a plain open()
        # for ever (and the daemon with it, deaf to SIGTERM), a symbolic link could lead to
        # one or to a device. Only a regular file of its own is read.
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            problem = "it is a symbolic link" if exc.errno == errno.ELOOP else f"cannot read it: {exc.strerror or exc}"
            self._warn(problem)
            return b""
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                self._warn("it is not a regular file")
                return b""
            return self._read_from(fd, status.st_size)
        except OSError as exc:
            self._warn(f"cannot read it: {exc.strerror or exc}")
            return b""
        finally:
            os.close(fd)

    def _read_from(self, fd: int, size: int) -> bytes:
        """At most MAX_READ bytes from the offset on; when the file has grown further, its
        last MAX_READ bytes. What comes before their first newline ends a line whose start
        was skipped: like a line cut for its length, it keeps its newest bytes, which may
        hold a report the command wrote after junk on the same line."""
        if size < self._offset:  # truncated: start over
            self._offset, self._pending = 0, b""
        if size - self._offset > MAX_READ:  # fell behind: only the latest lines matter
            self._offset, self._pending = size - MAX_READ, b""
        chunk = os.pread(fd, MAX_READ, self._offset)
        self._offset += len(chunk)
        return chunk

    def _warn(self, problem: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("progress file %s: %s; such lines are ignored (warned once)", self.path, problem)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            self.path.unlink()
        except OSError:
            pass
