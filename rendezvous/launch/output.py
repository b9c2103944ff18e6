"""The command's output: where its stderr (and stdout) go on their way to the terminal.

The command's stderr is a pipe whose other end this daemon reads in a thread of its own
(`Pump`), never on the event loop: every byte goes on to the daemon's own stderr (the
terminal or the journal) unchanged, and the last lines stay in a ring (`Tail`, at most
8 KiB), the cause a failure carries (rendezvous.core.failure). With `--output-dir`, the
command's stdout is a pipe too, and both go to one file per round and rank as well
(`RoundFile`, capped at `--output-max-bytes`, the newest output kept).

What that costs the command: nothing it waits for but the terminal, as before. A command
that writes 1 GB to stderr is read 256 KiB at a time; the ring and the file never hold
more than their caps, so the daemon's memory does not grow. What changes for it: its
stderr is a pipe, not the terminal (`isatty()` is false: colours that depend on it are
off); with `--output-dir`, its stdout too, which Python and C block-buffer: its lines
may then reach the terminal later than its stderr's (PYTHONUNBUFFERED=1 or `stdbuf -oL`
keep them in step). Each stream keeps its order in the file; between the two, lines
written at the same instant may come in either order (a terminal, sharing one file
description, sees them as written). Without `--output-dir`, stdout is the daemon's own,
untouched.

Whatever starts the command gives it `Plumbing.ends()` as its fds 1 and 2 (a spawned gate)
or takes a pump over the stderr pipe a spare gate was forked with (`Pump.adopt`).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import select
import threading
from pathlib import Path
from typing import Optional

from ..core.failure import MAX_TAIL_BYTES, tail_lines
from ..core.record import record
from .outdir import open_job_dir

log = logging.getLogger(__name__)

CHUNK = 256 * 1024
# A pipe that holds more than the default 64 KiB: a command that writes in bursts waits
# less for this daemon's thread to be scheduled (Linux's F_SETPIPE_SZ; 1 MiB is the most
# an unprivileged process may ask for by default).
PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031
# After the command's tree ended, what is still in the pipes is read, up to this much: a
# process that escaped the tree and writes on cannot hold the daemon.
DRAIN_LIMIT = 4 * 1024 * 1024
_ROUND_FILE = re.compile(r"round-(\d+)\.(\d+)\.log(\.1)?")


@record
class OutputSettings:
    """--output-dir, --output-max-bytes, --output-keep-rounds, and the job (DIR/<job>)."""

    directory: Optional[Path] = None
    job: str = "default"
    max_bytes: int = 1 << 30
    keep_rounds: int = 10


class Tail:
    """The last MAX_TAIL_BYTES of a stream, from any thread."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._cut = False
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            if len(chunk) > MAX_TAIL_BYTES:
                self._cut = True
                chunk = chunk[-MAX_TAIL_BYTES:]
            self._data += chunk
            if len(self._data) > 2 * MAX_TAIL_BYTES:
                del self._data[:-MAX_TAIL_BYTES]
                self._cut = True

    def lines(self) -> tuple[str, ...]:
        with self._lock:
            data, cut = bytes(self._data), self._cut
        return tail_lines(data, cut)


class RoundFile:
    """One round's output of one rank: `path` holds the newest, at most half of `max_bytes`;
    once full it becomes `path.1` (the older half, replacing the one before) and `path`
    starts again, so that both together never pass `max_bytes`. Opened, rotated and
    removed by name in `directory`, a descriptor of its directory the file then owns
    (outdir.open_job_dir; without it, the directory is opened here), never through a link."""

    def __init__(self, path: Path, max_bytes: int, directory: Optional[int] = None) -> None:
        self.path = path
        self._half = max(1, max_bytes // 2)
        self._size = 0
        self._dir = directory if directory is not None else os.open(
            path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._fd = self._open()
        except OSError:
            os.close(self._dir)
            raise

    def _open(self) -> int:
        return os.open(self.path.name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644,
                       dir_fd=self._dir)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._size >= self._half:
                os.close(self._fd)
                os.replace(self.path.name, f"{self.path.name}.1", src_dir_fd=self._dir, dst_dir_fd=self._dir)
                self._fd, self._size = self._open(), 0
            written = os.write(self._fd, view[: self._half - self._size])
            self._size += written
            view = view[written:]

    def close(self) -> None:
        try:
            os.close(self._fd)
        finally:
            os.close(self._dir)


def round_file_path(directory: Path, job: str, round: int, rank: int) -> Path:
    """DIR/<job>/round-<N>.<rank>.log"""
    return directory / job / f"round-{round}.{rank}.log"


def prune_rounds(job_dir: Path, current: int, keep: int, dir_fd: Optional[int] = None) -> list[Path]:
    """Remove the files of rounds older than the `keep` newest (`current` one included); the
    paths removed. Files of other names, and of rounds after `current`, stay. With `dir_fd`
    (a descriptor of `job_dir`), by name in it."""
    removed: list[Path] = []
    try:
        names = os.listdir(dir_fd if dir_fd is not None else job_dir)
    except OSError:
        return removed
    for name in names:
        match = _ROUND_FILE.fullmatch(name)
        if match and int(match.group(1)) <= current - keep:
            try:
                os.unlink(name if dir_fd is not None else job_dir / name, dir_fd=dir_fd)
                removed.append(job_dir / name)
            except OSError:
                pass
    return removed


def _write_all(fd: int, data: bytes) -> bool:
    """`data` to `fd` (the daemon's stderr or stdout) whole, waiting when it is full; False
    when it cannot take more (closed, a broken pipe): the caller stops passing on."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:  # a terminal or pipe set non-blocking by someone else
            select.select([], [fd], [])
        except InterruptedError:
            continue
        except OSError:
            return False
    return True


class Pump:
    """Reads the command's stderr (and stdout) pipes in a thread until the command's tree
    has ended: each chunk goes on to where it would have gone (the daemon's own fd 2, and 1
    for stdout; no longer once that fails, as on a broken pipe), into the stderr `tail`, and
    into the round's file once `record_to` named one."""

    def __init__(self, stderr: int, stdout: Optional[int] = None) -> None:
        self.tail = Tail()
        # stdout first: of two chunks read at once, its (usually the earlier) goes to the file first
        self._targets = {**({stdout: 1} if stdout is not None else {}), stderr: 2}
        self._stderr = stderr
        self._file: Optional[RoundFile] = None
        self._file_failed = False
        self._wake_read, self._wake_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        for fd in self._targets:
            os.set_blocking(fd, False)
            try:
                fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
            except OSError:  # over /proc/sys/fs/pipe-max-size, or not Linux: the default size
                pass
        self._thread = threading.Thread(target=self._run, name="command-output", daemon=True)
        self._thread.start()

    @property
    def file(self) -> Optional[Path]:
        return self._file.path if self._file else None

    def record_to(self, file: RoundFile) -> None:
        """From now on, also write everything to `file`, which the pump then closes."""
        self._file = file

    def _run(self) -> None:
        poller = select.poll()
        for fd in (*self._targets, self._wake_read):
            poller.register(fd, select.POLLIN)
        passing = {fd: True for fd in self._targets}
        draining = False
        while self._targets and not draining:
            for fd, _ in poller.poll():
                if fd == self._wake_read:
                    draining = True
                elif not self._read(fd, passing, poller):
                    break
        budget = DRAIN_LIMIT
        for fd in list(self._targets):  # what the ended tree left in the pipes
            while budget > 0 and self._read(fd, passing, poller):
                budget -= CHUNK
        for fd in list(self._targets):
            poller.unregister(fd)
            self._close(fd)

    def _read(self, fd: int, passing: dict[int, bool], poller: select.poll) -> bool:
        """One chunk of `fd` passed on; False at its end or when it is empty for now."""
        try:
            chunk = os.read(fd, CHUNK)
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno != errno.EINTR:
                chunk = b""
            else:
                return True
        if not chunk:
            poller.unregister(fd)
            self._close(fd)
            return False
        if passing[fd]:
            passing[fd] = _write_all(self._targets[fd], chunk)
        if fd == self._stderr:
            self.tail.add(chunk)
        if self._file is not None and not self._file_failed:
            try:
                self._file.write(chunk)
            except OSError as exc:
                self._file_failed = True
                log.warning("cannot write the command's output to %s: %s; it goes on to the terminal only",
                            self._file.path, exc.strerror or exc)
        return True

    def _close(self, fd: int) -> None:
        del self._targets[fd]
        os.close(fd)

    def finish(self) -> None:
        """Once the command's tree has ended: read what it left in the pipes, stop, close the
        file. Blocks (briefly): call it from a thread, not the event loop."""
        try:
            os.write(self._wake_write, b"x")
        except OSError:
            pass
        self._thread.join()
        os.close(self._wake_read)
        os.close(self._wake_write)
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass


class Plumbing:
    """The pipes a command gets as its stderr (and with a file, its stdout), and their pump."""

    def __init__(self, settings: OutputSettings) -> None:
        self.settings = settings
        self.pump: Optional[Pump] = None
        self._ends: dict[int, int] = {}  # the command's fd -> the write end it gets

    @property
    def captures_stdout(self) -> bool:
        return self.settings.directory is not None

    def ends(self) -> dict[int, int]:
        """New pipes: the write ends for the command's process, by the fd each becomes (2, and 1
        with --output-dir); its pump reads the other ends from now on. `close_ends` once the
        process that takes them started."""
        err_read, err_write = os.pipe2(os.O_CLOEXEC)
        out_read = None
        self._ends = {2: err_write}
        if self.captures_stdout:
            out_read, self._ends[1] = os.pipe2(os.O_CLOEXEC)
        self.pump = Pump(err_read, out_read)
        return dict(self._ends)

    def adopt(self, stderr: int) -> None:
        """Pump the read end of the stderr pipe a spare gate was forked with."""
        self.pump = Pump(stderr)

    def close_ends(self) -> None:
        for fd in self._ends.values():
            os.close(fd)
        self._ends = {}

    def record(self, round: int, rank: int) -> Optional[Path]:
        """With --output-dir: the round's file, from now on; the rounds before the kept ones
        are removed. None without --output-dir, or when the file cannot be made (logged)."""
        directory = self.settings.directory
        if directory is None or self.pump is None:
            return None
        path = round_file_path(directory, self.settings.job, round, rank)
        try:
            job_dir = open_job_dir(directory, self.settings.job)
        except OSError as exc:
            log.warning("--output-dir: cannot write %s: %s; the command's output goes to the terminal only",
                        path, exc.strerror or exc)
            return None
        try:
            for old in prune_rounds(path.parent, round, self.settings.keep_rounds, job_dir):
                log.debug("--output-keep-rounds: removed %s", old)
            self.pump.record_to(RoundFile(path, self.settings.max_bytes, os.dup(job_dir)))
        except OSError as exc:
            log.warning("--output-dir: cannot write %s: %s; the command's output goes to the terminal only",
                        path, exc.strerror or exc)
            return None
        finally:
            os.close(job_dir)
        return path

    def tail(self) -> tuple[str, ...]:
        return self.pump.tail.lines() if self.pump else ()

    def finish(self) -> None:
        """See `Pump.finish` (blocks briefly)."""
        self.close_ends()
        if self.pump is not None:
            self.pump.finish()


def check_output_dir(directory: Path, job: str) -> None:
    """Make DIR/<job> now, so that a directory that cannot be made, or cannot be trusted
    (outdir.open_job_dir), fails the start, not a round; raises OSError."""
    fd = open_job_dir(directory, job)
    try:
        if not os.access(".", os.W_OK | os.X_OK, dir_fd=fd):
            raise PermissionError(errno.EACCES, "not writable", str(directory / job))
    finally:
        os.close(fd)
