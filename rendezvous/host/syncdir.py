"""`--sync-dir` on disk: scan the directory into a manifest, and make it a copy of another
member's, all or nothing.

    scan    os.walk -> FileEntry per regular file (SHA-256, cached by path, size, mtime
            and inode: a second scan of an unchanged directory reads nothing)
    pull    staging directory beside DIR <- hard links of unchanged files, local copies,
            fetched files (checked by SHA-256) -> rename DIR away, staging -> DIR, remove
            the old one

A failure before the renames leaves DIR as it was; what a daemon killed meanwhile leaves
beside DIR, the next one clears at its start (`remove_leftovers`). Blocking work runs in a thread
(asyncio.to_thread), never on the event loop: heartbeats go on while big files are hashed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import stat
import time
from pathlib import Path
from typing import AsyncIterator, Awaitable, BinaryIO, Callable, Optional, TypeVar

from ..core.manifest import (
    FileEntry,
    Manifest,
    PreviousChief,
    check_path,
    check_size,
    diff,
    format_bytes,
    link_inside,
)
from ..core.digest import sha256
from ..core.record import asdict
from ..errors import ConfigError, SyncError

log = logging.getLogger(__name__)

# What one read, one write and one message carry.
CHUNK = 1 << 20

Chunks = AsyncIterator[tuple[str, int, bytes]]
T = TypeVar("T")


async def _in_thread(work: Callable[..., T], *args: object) -> T:
    """`work(*args)` in a thread, as asyncio.to_thread; but cancelled, it waits for the
    thread to return before it raises: the cleanup that follows a cancelled pull must not
    race a thread still writing into the staging directory, or part of it is left behind."""
    job = asyncio.ensure_future(asyncio.to_thread(work, *args))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        await asyncio.wait({job})
        if not job.cancelled():
            job.exception()  # retrieved: the cancellation is what goes on
        raise


def _hash_file(path: str) -> str:
    h = sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def check_sync_dir(path: str) -> Path:
    """The directory `--sync-dir PATH` names, checked at startup, before the node joins
    anything: its real path (a symlink's target is synced, and stays where it is), which is
    a directory (not a mount point) or not there yet, in a directory where this process can
    write: the copy is staged beside it and renamed into place, and the chief is remembered
    there. ConfigError otherwise: a node whose copy could never be written must not become
    the chief whose copy every other node takes."""
    root = Path(os.path.realpath(os.path.expanduser(path)))  # ~ as --token-file has it
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--sync-dir {path}: not a directory")
    if os.path.ismount(root):
        raise ConfigError(f"--sync-dir {path}: a mount point, which cannot be renamed: the copy is "
                          f"staged beside DIR and renamed into its place; give a directory inside it")
    parent = root.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"--sync-dir {path}: {parent} is not a directory")
    probe = parent / f".{root.name}.rendezvous-check-{os.urandom(4).hex()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise ConfigError(f"--sync-dir {path}: cannot write in {parent}, where the copy is staged "
                          f"beside the directory: {exc.strerror or exc}") from None
    return root


def _beside(root: Path, what: str) -> Path:
    """`.ROOT.rendezvous-WHAT` beside the synced directory `root`: on its filesystem (what is
    renamed into its place must be), hidden, and not a name a user's file would have."""
    return root.parent / f".{root.name}.rendezvous-{what}"


def _own(root: Path, kind: str) -> Path:
    """A new `staging` or `old` directory beside `root`, named with this process's pid so
    that `remove_leftovers` knows when its writer is gone."""
    return _beside(root, f"{kind}-{os.getpid()}-{os.urandom(4).hex()}")


def remove_leftovers(root: Path, alive: Callable[[int], bool]) -> None:
    """Clear what a daemon killed during a pull (kill -9, a power cut) left beside `root`: its
    staging copy, which can be as big as the directory, and the old DIR if it was stopped
    between the two renames of the swap, when DIR is missing: that one is put back. Only
    what processes that are gone (not `alive`) left is touched."""
    prefix = f".{root.name}.rendezvous-"
    try:
        names = sorted(n for n in os.listdir(root.parent) if n.startswith(prefix))
    except OSError:
        return  # no parent yet: nothing left there
    for name in names:  # "old-..." before "staging-...": DIR is back before a staging copy goes
        kind, _, rest = name[len(prefix):].partition("-")
        pid = rest.split("-")[0]
        if kind not in ("old", "staging") or not pid.isdigit() or alive(int(pid)):
            continue
        path = root.parent / name
        if kind == "old" and not os.path.lexists(root):
            try:
                os.rename(path, root)
            except OSError as exc:
                log.warning("--sync-dir %s is missing, and putting it back from %s failed: %s",
                            root, path, exc.strerror or exc)
            else:
                log.warning("--sync-dir %s was missing: put back from %s, where a daemon (pid %s) "
                            "stopped during a copy had moved it", root, path, pid)
            continue
        shutil.rmtree(path, ignore_errors=True)
        log.info("removed %s, left by a daemon (pid %s) stopped during a copy", path, pid)


class SyncDir:
    """One node's synced directory. `manifest` is the last scan's."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = Path(root).absolute()
        self.max_bytes = max_bytes
        self.manifest = Manifest()
        self._hashes: dict[tuple[str, int, int, int], str] = {}

    # -- scanning ------------------------------------------------------------------------

    async def scan(self) -> Manifest:
        self.manifest = await asyncio.to_thread(self._scan)
        return self.manifest

    def _scan(self) -> Manifest:
        """Every regular file under the root (a missing root is an empty one); SyncError for
        a root that is not a directory (any more: it was at the start), a symlink out of it,
        a symlinked directory, or a total over the limit (before any file is read)."""
        if not self.root.exists():
            return Manifest()
        if not self.root.is_dir():
            raise SyncError(f"--sync-dir {self.root} is not a directory")
        real_root = os.path.realpath(self.root)
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                if os.path.islink(full):
                    self._check_link(full, real_root, name in dirnames)
            for name in filenames:
                full = os.path.join(dirpath, name)
                rel = check_path(os.path.relpath(full, self.root).replace(os.sep, "/"))
                found.append((full, rel, _regular(full)))
        check_size(sum(st.st_size for _, _, st in found), self.max_bytes, f"--sync-dir {self.root}")
        hashes: dict[tuple[str, int, int, int], str] = {}  # only the files there now
        entries = [self._entry(full, rel, st, hashes) for full, rel, st in found]
        self._hashes = hashes
        return Manifest.of(entries)

    def _check_link(self, full: str, real_root: str, is_dir: bool) -> None:
        target = os.path.realpath(full)
        if not link_inside(real_root, target):
            raise SyncError(f"{full} is a symlink to {target}, out of --sync-dir {self.root}: refused")
        if is_dir:
            raise SyncError(f"{full} is a symlink to a directory: only files and real directories are synced")

    def _entry(self, full: str, rel: str, st: os.stat_result, hashes: dict) -> FileEntry:
        key = (rel, st.st_size, st.st_mtime_ns, st.st_ino)
        hashes[key] = self._hashes.get(key) or _hash_file(full)
        return FileEntry(rel, st.st_size, st.st_mtime_ns, hashes[key])

    # -- becoming a copy of another member's ------------------------------------------------

    async def pull(self, source: Manifest, fetch: Callable[[list[str]], Chunks], progress: "Progress") -> Manifest:
        """Make the root a copy of `source`, fetching the files that differ through `fetch`
        (the paths asked -> their chunks, in that order). All or nothing."""
        check_size(source.total_bytes, self.max_bytes, f"the copy of {progress.source}")
        local = await self.scan()
        plan = diff(local, source)
        if plan.empty:
            return local
        progress.start(plan.fetch_bytes)
        staging = _own(self.root, "staging")
        try:
            await _in_thread(self._stage, staging, plan.keep, plan.copy)
            receiver = _Receiver(staging, plan.fetch)
            try:
                async for path, offset, data in fetch([f.path for f in plan.fetch]):
                    await _in_thread(receiver.write, path, offset, data)
                    progress.add(len(data))
                await _in_thread(receiver.close)
            finally:
                receiver.abandon()
            await _in_thread(self._swap, staging)
        except BaseException:
            await _in_thread(shutil.rmtree, staging, True)
            raise
        progress.done()
        self._remember(source)
        return await self.scan()

    def _stage(self, staging: Path, keep: tuple[FileEntry, ...], copy: tuple[FileEntry, ...]) -> None:
        """The files this node has already: hard links where they are alike, copies with the
        source's time where only the time differs."""
        staging.mkdir(parents=True)
        for entry in keep:
            target = _target(staging, entry.path)
            try:
                os.link(self.root / entry.path, target)
            except OSError:
                shutil.copy2(self.root / entry.path, target)
        for entry in copy:
            target = _target(staging, entry.path)
            shutil.copyfile(self.root / entry.path, target)
            os.utime(target, ns=(entry.mtime_ns, entry.mtime_ns))

    def _swap(self, staging: Path) -> None:
        """The staged copy becomes the root; the old root is put back if it cannot."""
        old = None
        if self.root.exists():
            os.chmod(staging, stat.S_IMODE(self.root.stat().st_mode))
            old = _own(self.root, "old")
            os.rename(self.root, old)
        try:
            os.rename(staging, self.root)
        except OSError:
            if old is not None:
                os.rename(old, self.root)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def _remember(self, source: Manifest) -> None:
        """Every file is now as the source's manifest says (checked when fetched): the next
        scan need not read them again."""
        for entry in source.files:
            try:
                st = os.stat(self.root / entry.path)
            except OSError:
                continue
            self._hashes[(entry.path, st.st_size, st.st_mtime_ns, st.st_ino)] = entry.sha256

    # -- who wrote the real copy, across restarts of the daemon ----------------------------

    @property
    def _chief_file(self) -> Path:
        return _beside(self.root, "chief")

    def remember_chief(self, chief: PreviousChief) -> None:
        """Kept beside the directory, so that a daemon started again (all of them, after a
        power cut) still knows whose copy is the real one."""
        try:
            self._chief_file.parent.mkdir(parents=True, exist_ok=True)
            temporary = self._chief_file.with_name(f"{self._chief_file.name}.tmp")
            temporary.write_text(json.dumps(asdict(chief)))
            os.replace(temporary, self._chief_file)
        except OSError as exc:
            log.warning("cannot remember the chief in %s: %s", self._chief_file, exc)

    def load_chief(self) -> Optional[PreviousChief]:
        try:
            return PreviousChief(**json.loads(self._chief_file.read_text()))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            log.warning("ignoring %s: %s", self._chief_file, exc)
            return None

    async def attempt(self, work: Awaitable[Manifest]) -> tuple[Optional[Manifest], str]:
        """The manifest `work` gives, or why it failed: the reason the coordinator passes on
        to every node."""
        try:
            return await work, ""
        except SyncError as exc:
            error = str(exc)
        except OSError as exc:
            error = f"--sync-dir {self.root}: {exc}"
        log.error("%s", error)
        return None, error

    def open(self, path: str) -> BinaryIO:
        """A file of the last scan, for a member that fetches it."""
        return open(self.root / check_path(path), "rb")


def _regular(full: str) -> os.stat_result:
    st = os.stat(full)
    if not stat.S_ISREG(st.st_mode):
        raise SyncError(f"{full} is not a regular file: only files and directories are synced")
    return st


def _target(staging: Path, path: str) -> Path:
    target = staging / check_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


class _Receiver:
    """Writes fetched files in the order they were asked, each checked against the
    source's manifest entry (size, SHA-256) before the next one starts."""

    def __init__(self, staging: Path, expected: tuple[FileEntry, ...]) -> None:
        self._staging = staging
        self._pending = list(expected)
        self._entry: Optional[FileEntry] = None
        self._file: Optional[BinaryIO] = None
        self._hash = sha256()
        self._written = 0

    def write(self, path: str, offset: int, data: bytes) -> None:
        if self._entry is None or path != self._entry.path:
            self._finish()
            if not self._pending or self._pending[0].path != path:
                raise SyncError(f"the source sent {path!r}, which was not asked for next")
            self._entry = self._pending.pop(0)
            self._file = open(_target(self._staging, path), "wb")
            self._hash, self._written = sha256(), 0
        if offset != self._written or self._written + len(data) > self._entry.size:
            raise SyncError(f"{path}: the source sent bytes {offset}..{offset + len(data)} of {self._entry.size}, out of order")
        assert self._file is not None
        self._file.write(data)
        self._hash.update(data)
        self._written += len(data)

    def _finish(self) -> None:
        entry, f = self._entry, self._file
        if entry is None or f is None:
            return
        f.close()
        self._file = None
        got = self._hash.hexdigest()
        if self._written != entry.size or got != entry.sha256:
            raise SyncError(
                f"{entry.path}: received {self._written} bytes with SHA-256 {got[:12]}, the source's manifest "
                f"says {entry.size} bytes with {entry.sha256[:12]} (corrupted in transit?): refused"
            )
        os.utime(self._staging / entry.path, ns=(entry.mtime_ns, entry.mtime_ns))

    def close(self) -> None:
        self._finish()
        self._entry = None
        if self._pending:
            raise SyncError(f"the source stopped before {self._pending[0].path} ({len(self._pending)} files missing)")

    def abandon(self) -> None:
        if self._file is not None:
            self._file.close()


class Progress:
    """`syncing 412 MB from 10.0.0.9: 37%`, at most once a second and at the end."""

    def __init__(self, source: str, every: float = 1.0) -> None:
        self.source = source
        self._every = every
        self._total = 0
        self._done = 0
        self._said = 0.0

    def start(self, total: int) -> None:
        self._total = total
        self._said = time.monotonic()
        log.info("syncing %s from %s: 0%%", format_bytes(total), self.source)

    def add(self, n: int) -> None:
        self._done += n
        now = time.monotonic()
        if now - self._said >= self._every:
            self._said = now
            self._say()

    def done(self) -> None:
        self._done = self._total
        self._say()

    def _say(self) -> None:
        percent = 100 * self._done // self._total if self._total else 100
        log.info("syncing %s from %s: %d%%", format_bytes(self._total), self.source, percent)
