"""Reading the job's secret from `--token-file`, refusing a file others could read or change.

The secret is turned into keys at once (rendezvous.core.auth) and never kept, logged or
passed on: only the path appears in messages.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

from ..core.auth import MAX_SECRET_BYTES, Keys, check_secret, derive_keys
from ..errors import ConfigError


def read_secret(path: str) -> bytes:
    """The secret in `path`; ConfigError naming the path (and its mode) if the file is not
    a regular file of this user that nobody else can read or write."""
    try:
        # O_NONBLOCK: a FIFO must not hang the daemon; it is refused as not regular below.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"--token-file {path}: cannot open it: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        mode = stat.S_IMODE(info.st_mode)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"--token-file {path}: not a regular file (mode {oct(info.st_mode)})")
        if info.st_uid != os.geteuid():
            raise ConfigError(
                f"--token-file {path}: owned by uid {info.st_uid}, not by this user (uid {os.geteuid()})"
            )
        if mode & 0o077:
            raise ConfigError(
                f"--token-file {path}: mode {mode:04o} lets group or others read or change it; "
                f"run: chmod 600 {path}"
            )
        data = os.read(fd, MAX_SECRET_BYTES + 2)
    finally:
        os.close(fd)
    try:
        return check_secret(data)
    except ValueError as exc:
        raise ConfigError(f"--token-file {path}: {exc}") from None


def load_keys(path: Optional[str], job: str) -> Optional[Keys]:
    """The job's keys, or None when no token file is set."""
    if path is None:
        return None
    return derive_keys(read_secret(str(Path(path).expanduser())), job)
