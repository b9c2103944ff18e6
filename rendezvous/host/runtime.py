"""Where a running daemon leaves a note so that `rendezvous status` on the same machine can
find it: `<node-id>.json` with its pid, job, gRPC endpoint and network namespace, written
when it listens and removed when it stops.

The directory: $RENDEZVOUS_RUNTIME_DIR if set; else $RUNTIME_DIRECTORY (systemd's
RuntimeDirectory=, /run/rendezvous for the unit), /run/rendezvous for root,
$XDG_RUNTIME_DIR/rendezvous, /tmp/rendezvous-<uid>. `status` looks in all of them.

Everything found there is untrusted input: another user may have made /tmp/rendezvous-<uid>
first, or put files in it. So, as ssh refuses a loose key:
- a directory of this user's own must have mode 0700 (a daemon tightens one that only others
  could read, as earlier versions made them); the service's directories (/run/rendezvous,
  systemd's $RUNTIME_DIRECTORY, mode 0755 so that every user's `status` can read them) must
  be writable by their owner alone; any other directory is refused with a warning naming it,
  its owner, its mode and the fix;
- a note is read only from a regular file of at most MAX_REGISTRATION_BYTES, never through a
  link, and every field is checked (a node id is 12 hex digits before it names any file);
  a bad note is skipped with one warning naming it;
- only the exact files of a dead daemon are removed: `<node-id>.json`, the progress files
  `<node-id>-progress-<random>.jsonl` and its rounds' error file directories
  `<node-id>-error-<random>`, by name in that directory. A daemon is dead when its pid
  runs no more, or runs a process that started after the note was written (the pid was
  taken again).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import pwd
import re
import shutil
import socket
import stat
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Optional

from ..core.advert import validate_job
from ..core.peer import parse_endpoint
from ..core.record import asdict, record

log = logging.getLogger(__name__)

DIRECTORY_VARIABLE = "RENDEZVOUS_RUNTIME_DIR"
SYSTEM_DIRECTORY = Path("/run/rendezvous")

# os.urandom(6).hex(): anything else is not a node id, and never becomes part of a path.
NODE_ID = re.compile(r"[0-9a-f]{12}")
# What create_progress_file's mkstemp adds between the prefix and the suffix.
_PROGRESS_SUFFIX = re.compile(r"-progress-[A-Za-z0-9_]{1,32}\.jsonl")
# What launch.errorfile's mkdtemp adds after the node id: a round's error file directory.
_ERROR_SUFFIX = re.compile(r"-error-[A-Za-z0-9_]{1,32}")
# /proc/stat's boot time is in whole seconds: a process counts as started after a note only
# when it started this much later.
_START_SLACK = 2.0
MAX_PID = 2**31 - 1  # a pid_t: os.kill raises OverflowError beyond it
MAX_NETNS = 2**64 - 1  # an inode number


@record
class Registration:
    node_id: str
    pid: int
    job: str
    endpoint: str  # host:port of the daemon's gRPC server
    # Inode of the daemon's network namespace: the endpoint is reachable only from the same one.
    netns: int
    # The daemon's --token-file (a path, never the secret): its owner's `status` signs with it.
    token_file: str = ""


def candidate_directories(environ: Mapping[str, str], uid: int) -> list[Path]:
    """Where daemons may register, the one a daemon of `uid` writes to first."""
    if environ.get(DIRECTORY_VARIABLE):
        return [Path(environ[DIRECTORY_VARIABLE])]
    found: list[Path] = []
    if environ.get("RUNTIME_DIRECTORY"):
        found.append(Path(environ["RUNTIME_DIRECTORY"].split(":")[0]))
    if uid == 0:
        found.append(SYSTEM_DIRECTORY)
    if environ.get("XDG_RUNTIME_DIR"):
        found.append(Path(environ["XDG_RUNTIME_DIR"]) / "rendezvous")
    found.append(Path(f"/tmp/rendezvous-{uid}"))
    if SYSTEM_DIRECTORY not in found:
        found.append(SYSTEM_DIRECTORY)  # read only: where the systemd unit's daemon registers
    return list(dict.fromkeys(found))


def current_netns() -> int:
    try:
        return os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return 0


# A registration is a line of JSON; anything longer is not one.
MAX_REGISTRATION_BYTES = 4096


def _whole(data: dict, key: str, low: int, high: int) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{key} must be a whole number from {low} to {high}, got {str(value)[:40]}")
    return value


def _text(data: dict, key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {type(value).__name__}")
    return value


def read_registration(text: "str | bytes") -> Registration:
    """A registration file's content; ValueError saying what is wrong with it."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ValueError(f"not JSON: {str(exc)[:80]}") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    node_id = _text(data, "node_id")
    if not NODE_ID.fullmatch(node_id):
        raise ValueError(f"node_id must be 12 hexadecimal digits, got {node_id[:40]!r}")
    endpoint = _text(data, "endpoint")
    parse_endpoint(endpoint)  # an address and a port, nothing gRPC would read as a socket path
    return Registration(
        node_id=node_id, pid=_whole(data, "pid", 1, MAX_PID), job=validate_job(_text(data, "job")),
        endpoint=endpoint, netns=_whole(data, "netns", 0, MAX_NETNS),
        token_file=_text(data, "token_file") if "token_file" in data else "",
    )


def parse_registration(text: "str | bytes") -> Optional[Registration]:
    """A registration file's content, or None if it is not one."""
    try:
        return read_registration(text)
    except ValueError:
        return None


def live_registrations(
    found: Iterable[Registration], netns: int, alive: Callable[[int], bool]
) -> list[Registration]:
    """The daemons that still run and can be reached from network namespace `netns`."""
    return sorted(
        (r for r in found if r.netns == netns and alive(r.pid)),
        key=lambda r: (r.job, r.endpoint, r.node_id),
    )


def process_state(pid: int) -> Optional[bytes]:
    """The state letter of `pid` in /proc (b"R", b"S", b"T" stopped, b"Z" zombie...), or
    None when it cannot be read (gone, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs. A daemon killed a moment ago can still be a zombie, until its
    parent (an init that reaps slowly, in some containers) collects it: that one is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's daemon (the service's)
    return process_state(pid) != b"Z"  # without /proc to tell, the signal's word


def process_started(pid: int) -> Optional[float]:
    """When `pid` started (seconds since the epoch, within a second), or None when it cannot
    be read (gone, no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def started_after(pid: int, written_at: float) -> bool:
    """Whether the process `pid` started after a note naming it was written: the note's
    daemon is gone and its pid taken by another process."""
    started = process_started(pid)
    if started is None or started <= written_at + _START_SLACK:
        return False
    # A /proc whose boot time is not the one its processes count from (some containers) would
    # make every process look young: this one cannot have started after now.
    own = process_started(os.getpid())
    return own is not None and own <= time.time() + _START_SLACK


def _service_directories() -> set[Path]:
    """The systemd unit's directories: readable by every user, written by the service."""
    found = {SYSTEM_DIRECTORY}
    if os.environ.get("RUNTIME_DIRECTORY"):
        found.add(Path(os.environ["RUNTIME_DIRECTORY"].split(":")[0]))
    return found


def _owner(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def directory_problem(directory: Path, uid: int, tighten: bool = False) -> Optional[str]:
    """Why the notes in `directory` cannot be trusted, or None (None too when it does not
    exist). With `tighten`, a directory of `uid`'s own that others may only read is made
    0700 instead of refused."""
    try:
        link = os.lstat(directory)
        if stat.S_ISLNK(link.st_mode) and link.st_uid not in (uid, 0):
            return f"refusing runtime directory {directory}: a symbolic link of {_owner(link.st_uid)}; remove it"
        info = os.stat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{directory}: {exc.strerror or exc}"
    mode = stat.S_IMODE(info.st_mode)
    if not stat.S_ISDIR(info.st_mode):
        return f"refusing runtime directory {directory}: not a directory; remove it"
    shared = directory in _service_directories()
    if info.st_uid == uid:
        if mode & 0o022 == 0 and (shared or mode & 0o077 == 0):
            return None
        if tighten and mode & 0o022 == 0:
            os.chmod(directory, 0o700)
            return None
    elif shared and mode & 0o022 == 0:
        return None  # the service's, written by it alone
    needed = "0755 or tighter" if shared else "0700"
    fix = f"run: chmod 700 {directory}" if info.st_uid == uid else (
        f"remove it, or set {DIRECTORY_VARIABLE} to a directory of your own"
    )
    return (
        f"refusing runtime directory {directory}: owned by {_owner(info.st_uid)} with mode {mode:04o}, "
        f"where it must be yours with mode {needed}; {fix}"
    )


def register(
    registration: Registration, directories: Iterable[Path], alive: Callable[[int], bool] = pid_alive
) -> Optional[Path]:
    """Write the note into the first directory that takes it, then remove the notes that
    daemons killed with SIGKILL left there (`remove_stale`). Best effort: without it only
    `rendezvous status` is lost, so a failure is a warning."""
    directories = list(directories)
    problems = []
    uid = os.getuid()
    for directory in directories:
        path = directory / f"{registration.node_id}.json"
        try:
            shared = directory in _service_directories()
            directory.mkdir(mode=0o755 if shared else 0o700, parents=True, exist_ok=True)
            problem = directory_problem(directory, uid, tighten=True)
            if problem is not None:
                log.warning("%s", problem)
                problems.append(problem)
                continue
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(asdict(registration)) + "\n")
            temporary.chmod(0o644)
            temporary.replace(path)
            log.debug("registered for `rendezvous status` in %s", path)
        except OSError as exc:
            problems.append(f"{directory}: {exc.strerror or exc}")
            continue
        remove_stale([directory], registration.netns, alive)
        return path
    log.warning("`rendezvous status` will not find this daemon: %s", "; ".join(problems))
    return None


def unregister(path: Optional[Path]) -> None:
    if path is None:
        return
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove %s: %s", path, exc.strerror or exc)


def _read_note(path: Path) -> bytes:
    """At most MAX_REGISTRATION_BYTES + 1 of a regular file; never through a link, and never
    blocking (a FIFO would)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError("a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        return os.read(fd, MAX_REGISTRATION_BYTES + 1)
    finally:
        os.close(fd)


def _written_at(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return float("inf")  # gone meanwhile: nothing to judge by


def _scan(directories: Iterable[Path]) -> Iterator[tuple[Path, Registration]]:
    """Every note in the trusted ones of `directories`; one warning per refused directory
    and per bad note."""
    uid = os.getuid()
    for directory in directories:
        problem = directory_problem(directory, uid)
        if problem is not None:
            log.warning("%s", problem)
            continue
        try:
            names = sorted(n for n in os.listdir(directory) if n.endswith(".json"))
        except OSError:
            continue
        for name in names:
            path = directory / name
            try:
                data = _read_note(path)
                if len(data) > MAX_REGISTRATION_BYTES:
                    raise ValueError(f"longer than {MAX_REGISTRATION_BYTES} bytes")
                registration = read_registration(data)
                if name != f"{registration.node_id}.json":
                    raise ValueError(f"the note of node {registration.node_id} under another name")
            except FileNotFoundError:
                continue  # removed by its daemon in the meantime
            except ValueError as exc:
                log.warning("ignoring %s: not a rendezvous daemon's note (%s)", path, exc)
                continue
            yield path, registration


def find_registrations(directories: Iterable[Path]) -> list[Registration]:
    """Every registration in the directories, dead daemons and other namespaces included."""
    return [registration for _, registration in _scan(directories)]


def remove_stale(
    directories: Iterable[Path], netns: int, alive: Callable[[int], bool]
) -> list[Registration]:
    """Remove the notes of daemons of this namespace that died without removing theirs
    (killed with SIGKILL; a note whose pid a process started after it has), their commands'
    progress files (`progress.create_progress_file`) and their rounds' error file
    directories (`launch.errorfile`); best effort, e.g. another user's stay. Every other
    registration found, in one reading."""
    kept = []
    for path, registration in _scan(directories):
        if registration.netns != netns or (alive(registration.pid) and
                                           not started_after(registration.pid, _written_at(path))):
            kept.append(registration)
            continue
        forget(path, registration)
    return kept


def nothing_listens(endpoint: str, timeout: float) -> bool:
    """Whether a TCP connection to `endpoint` is refused: no socket listens there (a gRPC
    call fails alike for a server that closes connections, which is still there)."""
    address, port = parse_endpoint(endpoint)
    try:
        with socket.create_connection((str(address), port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def discard(directories: Iterable[Path], registration: Registration) -> None:
    """Remove `registration`'s note (and what its rounds left) from the trusted one of
    `directories` that holds it unchanged: `rendezvous status` found nothing listening
    at its endpoint, or another node there. A daemon writes its note once it listens and
    removes it before it stops listening: such a note has outlived its daemon, whatever
    process holds its pid now."""
    for path, found in _scan(directories):
        if found == registration:
            forget(path, registration)


def forget(path: Path, registration: Registration) -> None:
    """Remove the note at `path` of a daemon that is gone, and what its rounds left beside it
    (progress files, error file directories), by name in that directory; best effort."""
    directory = path.parent
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    node = registration.node_id
    mine = [n for n in names if n.startswith(node) and len(n) > len(node)]
    progress = [n for n in mine if _PROGRESS_SUFFIX.fullmatch(n, len(node))]
    for name in (n for n in mine if _ERROR_SUFFIX.fullmatch(n, len(node))):
        _remove_tree(directory, name)
    for name in (*progress, path.name):
        try:
            os.unlink(directory / name)
            log.debug("removed %s: its daemon (pid %d) is gone", directory / name, registration.pid)
        except OSError:
            pass


def _remove_tree(directory: Path, name: str) -> None:
    """The directory `name` in `directory` and what is in it, never following a link:
    shutil.rmtree refuses one in its place and walks the tree by descriptors."""
    try:
        shutil.rmtree(directory / name)
        log.debug("removed %s: its daemon is gone", directory / name)
    except OSError:
        pass
