"""Where a running daemon leaves a note so that `rendezvous status` on the same machine can
find it: `<node-id>.json` with its pid, job, gRPC endpoint and network namespace, written
when it listens and removed when it stops.

The directory: $RENDEZVOUS_RUNTIME_DIR if set; else $RUNTIME_DIRECTORY (systemd's
RuntimeDirectory=, /run/rendezvous for the unit), /run/rendezvous for root,
$XDG_RUNTIME_DIR/rendezvous, /tmp/rendezvous-<uid>. `status` looks in all of them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Optional

from ..core.record import asdict, record

log = logging.getLogger(__name__)

DIRECTORY_VARIABLE = "RENDEZVOUS_RUNTIME_DIR"
SYSTEM_DIRECTORY = Path("/run/rendezvous")


@record
class Registration:
    node_id: str
    pid: int
    job: str
    endpoint: str  # host:port of the daemon's gRPC server
    # Inode of the daemon's network namespace: the endpoint is reachable only from the same one.
    netns: int


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


def parse_registration(text: "str | bytes") -> Optional[Registration]:
    """A registration file's content, or None if it is not one (junk, not UTF-8: ignored)."""
    try:
        data = json.loads(text)
        registration = Registration(
            node_id=str(data["node_id"]), pid=int(data["pid"]), job=str(data["job"]),
            endpoint=str(data["endpoint"]), netns=int(data["netns"]),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return registration if registration.pid > 0 else None


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


def register(registration: Registration, directories: Iterable[Path]) -> Optional[Path]:
    """Write the note into the first directory that takes it. Best effort: without it only
    `rendezvous status` is lost, so a failure is a warning."""
    problems = []
    for directory in directories:
        path = directory / f"{registration.node_id}.json"
        try:
            directory.mkdir(mode=0o755, parents=True, exist_ok=True)
            if directory.stat().st_uid not in (os.getuid(), 0):
                problems.append(f"{directory}: owned by another user")
                continue
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(asdict(registration)) + "\n")
            temporary.chmod(0o644)
            temporary.replace(path)
            log.debug("registered for `rendezvous status` in %s", path)
            return path
        except OSError as exc:
            problems.append(f"{directory}: {exc.strerror or exc}")
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


def _read_registrations(directories: Iterable[Path]) -> Iterator[tuple[Path, Registration]]:
    for directory in directories:
        try:
            paths = sorted(directory.glob("*.json"))
        except OSError:
            continue
        for path in paths:
            try:
                if not path.is_file():  # a FIFO would block the read
                    continue
                with path.open("rb") as file:
                    data = file.read(MAX_REGISTRATION_BYTES + 1)
            except OSError:
                continue
            registration = parse_registration(data) if len(data) <= MAX_REGISTRATION_BYTES else None
            if registration is not None:
                yield path, registration


def find_registrations(directories: Iterable[Path]) -> list[Registration]:
    """Every registration in the directories, dead daemons and other namespaces included."""
    return [registration for _, registration in _read_registrations(directories)]


def remove_stale(directories: Iterable[Path], netns: int, alive: Callable[[int], bool]) -> None:
    """Remove the notes of daemons of this namespace that died without removing theirs
    (killed with SIGKILL), and their commands' progress files (`progress.create_progress_file`);
    best effort, e.g. another user's stay."""
    for path, registration in _read_registrations(directories):
        if registration.netns == netns and not alive(registration.pid):
            for leftover in (path, *path.parent.glob(f"{registration.node_id}-progress-*.jsonl")):
                try:
                    leftover.unlink()
                    log.debug("removed %s: its daemon (pid %d) is gone", leftover, registration.pid)
                except OSError:
                    pass
