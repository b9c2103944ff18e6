"""One temporary directory per trainer process, removed however the trainer ends.

TensorFlow's autograph writes the code it generates to files in the temporary directory
and removes them at exit (atexit), and a worker that is not the chief saves its copy of
the model there. The trainer leaves with ``os._exit`` when it is stopped by SIGTERM or a
collective failed, as Python's teardown can block then; that skips atexit, and every
stopped worker left its files in /tmp, once per restart round. Everything the trainer
writes through ``tempfile`` goes to a directory of its own, which `leave` removes first.

A trainer killed with SIGKILL runs nothing: its directory stays until the next trainer
starts, which removes every ``trainer-*`` directory of the temporary directory whose owner
is gone. A trainer holds a lock (flock) on its directory as long as it lives; the kernel
releases it however the process ends, so a directory whose lock can be taken belongs to no
one, whatever the pid namespace of its owner. The directory gets its name only once
locked, so a trainer starting beside another never sees its directory unlocked.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import sys
import tempfile
from typing import NoReturn, Optional

PREFIX = "trainer-"
STARTING = f".{PREFIX}starting-"  # before it is locked: a name the cleanup never looks at

_directory: Optional[str] = None
_lock: Optional[int] = None  # the directory's descriptor, locked while this process lives


def use_own_directory() -> None:
    """Make ``tempfile`` create everything in a new directory, removed at exit; first
    remove the directories of trainers that were killed."""
    global _directory, _lock
    if _directory is not None:
        return
    base = tempfile.gettempdir()
    remove_abandoned(base)
    starting = tempfile.mkdtemp(prefix=STARTING, dir=base)
    _lock = _locked(starting)
    _directory = os.path.join(base, PREFIX + os.path.basename(starting)[len(STARTING):])
    os.rename(starting, _directory)
    tempfile.tempdir = _directory
    atexit.register(remove)


def _locked(directory: str) -> Optional[int]:
    """A descriptor of `directory` holding its lock; None if a live process holds it, or
    where locks do not work."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def remove_abandoned(base: str) -> list[str]:
    """Remove the ``trainer-*`` directories in `base` that this user owns and no live process
    holds the lock of; the paths removed."""
    removed = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX) or entry.path == _directory:
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = _locked(entry.path)
        except OSError:
            continue
        if fd is None:  # a live trainer's, or locks do not work here: leave it
            continue
        try:
            shutil.rmtree(entry.path, ignore_errors=True)
        finally:
            os.close(fd)
        removed.append(entry.path)
    return removed


def remove() -> None:
    if _directory is not None:
        shutil.rmtree(_directory, ignore_errors=True)


def leave(code: int) -> NoReturn:
    """Exit at once with ``code``, without Python's teardown, leaving nothing behind."""
    sys.stdout.flush()
    sys.stderr.flush()
    remove()
    os._exit(code)
