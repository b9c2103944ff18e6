"""What `--sync-dir` compares: a manifest of a directory, its digest, the difference between
two manifests, and which member's copy every member gets.

TensorFlow's BackupAndRestore and CheckpointManager assume a directory every worker sees:
only the chief writes the real checkpoint. Without shared storage, `rendezvous` makes the
directory identical on every member before each launch. The copy that wins is the one the
previous round's chief wrote (the only real one); without it, the newest content.

Nothing here reads a file: the adapter (rendezvous.host.syncdir) scans and hashes, and passes the
results in.
"""

from __future__ import annotations

import posixpath
from typing import Iterable, Mapping, Optional, Sequence

from ..errors import SyncError
from .digest import sha256
from .peer import Peer
from .record import record
from .tf_config import Membership


@record(order=True)
class FileEntry:
    """One regular file, by its path relative to the synced directory (always '/')."""

    path: str
    size: int
    mtime_ns: int
    sha256: str

    def same_content(self, other: "FileEntry") -> bool:
        return self.size == other.size and self.sha256 == other.sha256


def check_path(path: str) -> str:
    """`path` if it names a file inside the directory; SyncError if it could escape it
    (absolute, `..`, empty or `.` parts, a NUL or a backslash)."""
    parts = path.split("/")
    if (
        not path
        or path.startswith("/")
        or "\0" in path
        or "\\" in path
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise SyncError(f"refused path {path!r}: it could escape the synced directory")
    return path


def link_inside(root: str, target: str) -> bool:
    """Whether the resolved `target` of a symlink lies inside the resolved `root`
    (both absolute, as os.path.realpath gives them)."""
    root, target = posixpath.normpath(root), posixpath.normpath(target)
    return target != root and posixpath.commonpath([root, target]) == root


@record
class Manifest:
    """Every regular file under the directory, sorted by path."""

    files: tuple[FileEntry, ...] = ()

    def __post_init__(self) -> None:
        paths = [f.path for f in self.files]
        for path in paths:
            check_path(path)
        if paths != sorted(set(paths)):
            raise SyncError("a manifest lists each path once, in order")

    @classmethod
    def of(cls, entries: Iterable[FileEntry]) -> "Manifest":
        return cls(tuple(sorted(entries)))

    @property
    def digest(self) -> str:
        """SHA-256 over every entry: equal digests mean identical directories."""
        h = sha256()
        for f in self.files:
            h.update(f"{f.path}\0{f.size}\0{f.mtime_ns}\0{f.sha256}\n".encode())
        return h.hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def newest_mtime_ns(self) -> int:
        return max((f.mtime_ns for f in self.files), default=0)

    def by_path(self) -> dict[str, FileEntry]:
        return {f.path: f for f in self.files}

    def summary(self, previous: Optional["PreviousChief"] = None) -> "SyncSummary":
        return SyncSummary(self.digest, len(self.files), self.total_bytes, self.newest_mtime_ns, previous)


def check_size(total_bytes: int, limit: int, where: str) -> None:
    """SyncError naming the size when `total_bytes` is over `limit`."""
    if total_bytes > limit:
        raise SyncError(
            f"{where} holds {format_bytes(total_bytes)} ({total_bytes} bytes), more than "
            f"--sync-max-bytes {limit}: raise the limit or keep less in the synced directory"
        )


def format_bytes(n: int) -> str:
    """412 MB, 1.5 GB: decimal units, as in the progress line."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{n} B"


# -- turning one copy into another ----------------------------------------------------------


@record
class Diff:
    """How a member's copy becomes the source's: files kept as they are (`keep`), copied
    from the local copy with the source's time (`copy`: same content), fetched from the
    source (`fetch`), and local files the source does not have (`delete`)."""

    keep: tuple[FileEntry, ...] = ()
    copy: tuple[FileEntry, ...] = ()
    fetch: tuple[FileEntry, ...] = ()
    delete: tuple[str, ...] = ()

    @property
    def fetch_bytes(self) -> int:
        return sum(f.size for f in self.fetch)

    @property
    def empty(self) -> bool:
        return not (self.copy or self.fetch or self.delete)


def diff(local: Manifest, source: Manifest) -> Diff:
    mine = local.by_path()
    keep, copy, fetch = [], [], []
    for entry in source.files:
        have = mine.get(entry.path)
        if have == entry:
            keep.append(entry)
        elif have is not None and have.same_content(entry):
            copy.append(entry)
        else:
            fetch.append(entry)
    wanted = {f.path for f in source.files}
    delete = tuple(p for p in mine if p not in wanted)
    return Diff(tuple(keep), tuple(copy), tuple(fetch), delete)


# -- choosing the source ----------------------------------------------------------------------


@record
class PreviousChief:
    """Who was worker 0 of the last round this node ran a command in, and when it started
    (unix ns, by this node's clock: rounds of different runs compare by it). The address is
    what finds it again after its daemon restarted (a new node id, the same files)."""

    node_id: str
    address: str
    round: int
    started_ns: int = 0

    @classmethod
    def of(cls, membership: Membership, started_ns: int) -> "PreviousChief":
        chief = membership.members[0]
        return cls(chief.node_id, str(chief.address), membership.round, started_ns)


@record
class SyncSummary:
    """What a member says about its copy during the freeze."""

    digest: str
    files: int
    total_bytes: int
    newest_mtime_ns: int
    previous: Optional[PreviousChief] = None
    error: str = ""  # why this member has no usable copy (a symlink out, over the limit)

    @classmethod
    def failed(cls, error: str) -> "SyncSummary":
        return cls("", 0, 0, 0, error=error)


def _previous_chief(members: Sequence[Peer], summaries: Mapping[str, SyncSummary]) -> Optional[Peer]:
    """The member that was chief of the latest round any member remembers, by node id or
    else by its address (when one member has it)."""
    reports = [s.previous for s in summaries.values() if s.previous is not None]
    if not reports:
        return None
    latest = max(reports, key=lambda p: (p.started_ns, p.round))
    by_id = [m for m in members if m.node_id == latest.node_id]
    by_address = [m for m in members if str(m.address) == latest.address]
    found = by_id or (by_address if len(by_address) == 1 else [])
    return found[0] if found else None


@record
class SourceChoice:
    source: Peer
    why: str


def choose_source(members: Sequence[Peer], summaries: Mapping[str, SyncSummary]) -> SourceChoice:
    """Whose copy every member gets: the previous round's chief when it is a member and
    holds files; else the newest content (ties to the lowest address). `members` are
    sorted by address; `summaries` are by node id, one per member."""
    chief = _previous_chief(members, summaries)
    if chief is not None and summaries[chief.node_id].files:
        return SourceChoice(chief, "chief of the previous round")
    holding = [m for m in members if summaries[m.node_id].files]
    if not holding:
        return SourceChoice(members[0], "every copy is empty")
    newest = max(summaries[m.node_id].newest_mtime_ns for m in holding)
    source = next(m for m in holding if summaries[m.node_id].newest_mtime_ns == newest)
    return SourceChoice(source, "newest content")


def out_of_sync(members: Sequence[Peer], summaries: Mapping[str, SyncSummary], digest: str) -> tuple[Peer, ...]:
    """Members whose copy is not the one with `digest`."""
    return tuple(m for m in members if summaries[m.node_id].digest != digest)
