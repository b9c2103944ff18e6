"""DIR/<job> of --output-dir, reached without following a link, and refused when another
user can write to it.

The daemon (root, as a service) writes the command's output to DIR/<job>/round-<N>.<rank>.log.
Whoever could put a symbolic link on that path would make it write elsewhere (a link to
/etc as `<job>`); whoever can write to the directory could read, replace or remove the
files. So:
- every component of DIR/<job> is opened from the one before it (`openat`) with
  O_NOFOLLOW | O_DIRECTORY, and made (0755) where it is missing: a symbolic link at any
  level is refused, naming it, and nothing can swap a component between the check and its
  use; the round files are then opened, rotated and removed by name in the descriptor of
  `<job>` (output.RoundFile), never through a link either;
- DIR and DIR/<job> must belong to this user or root and be writable by their owner alone
  (DIR may be a sticky directory such as /tmp, where nobody removes what is not theirs):
  another is refused, naming its owner and mode.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def writable_by_others(info: os.stat_result, uid: int, sticky_ok: bool) -> bool:
    """Whether a user other than `uid` (and root) can write to the directory of `info`."""
    if info.st_uid not in (uid, 0):
        return True
    if stat.S_IMODE(info.st_mode) & 0o022 == 0:
        return False
    return not (sticky_ok and info.st_mode & stat.S_ISVTX)


def _check(fd: int, path: Path, sticky_ok: bool) -> None:
    info = os.fstat(fd)
    if writable_by_others(info, os.geteuid(), sticky_ok):
        raise PermissionError(
            errno.EACCES,
            f"{path} is owned by {_owner(info.st_uid)} with mode {stat.S_IMODE(info.st_mode):04o}: another user "
            "can write to it; make it yours and writable by you alone (chmod go-w), or choose another --output-dir",
            str(path),
        )


def _open_part(parent: int, name: str, path: Path) -> int:
    """The directory `name` in `parent`, made if missing, never a symbolic link."""
    for _ in range(2):  # made by another process between the open and the mkdir: open it
        try:
            return os.open(name, _FLAGS, dir_fd=parent)
        except FileNotFoundError:
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                try:
                    is_link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
                except OSError:
                    is_link = False
                if is_link:
                    raise OSError(errno.ELOOP, f"{path} is a symbolic link, and --output-dir follows none: "
                                               "give the directory's real path", str(path)) from None
            raise
    return os.open(name, _FLAGS, dir_fd=parent)


def open_job_dir(directory: Path, job: str) -> int:
    """A descriptor of DIR/<job> (the caller closes it), every missing directory made; OSError
    for a symbolic link at any level (ELOOP, naming it), for DIR or DIR/<job> writable by
    another user (EACCES, naming its owner and mode), or as the system says."""
    target = Path(os.path.abspath(directory))
    fd = os.open(target.anchor, _FLAGS)
    walked = Path(target.anchor)
    try:
        for name in (*target.parts[1:], job):
            walked = walked / name
            child = _open_part(fd, name, walked)
            os.close(fd)
            fd = child
            if walked == target:
                _check(fd, walked, sticky_ok=True)
        _check(fd, walked, sticky_ok=False)
    except BaseException:
        os.close(fd)
        raise
    return fd
