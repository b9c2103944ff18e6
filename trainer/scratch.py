"""One temporary directory per trainer process, removed however the trainer ends itself.

TensorFlow's autograph writes the code it generates to files in the temporary directory
and removes them at exit (atexit), and a worker that is not the chief saves its copy of
the model there. The trainer leaves with ``os._exit`` when it is stopped by SIGTERM or a
collective failed, as Python's teardown can block then; that skips atexit, and every
stopped worker left its files in /tmp, once per restart round. Everything the trainer
writes through ``tempfile`` goes to a directory of its own, which `leave` removes first.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from typing import NoReturn, Optional

_directory: Optional[str] = None


def use_own_directory() -> None:
    """Make ``tempfile`` create everything in a new directory, removed at exit."""
    global _directory
    if _directory is None:
        _directory = tempfile.mkdtemp(prefix="trainer-")
        tempfile.tempdir = _directory
        atexit.register(remove)


def remove() -> None:
    if _directory is not None:
        shutil.rmtree(_directory, ignore_errors=True)


def leave(code: int) -> NoReturn:
    """Exit at once with ``code``, without Python's teardown, leaving nothing behind."""
    sys.stdout.flush()
    sys.stderr.flush()
    remove()
    os._exit(code)
