"""--sync-dir on disk and over gRPC on loopback: one member serves its directory, another
makes its own a copy of it, all or nothing."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import secrets
import threading
import time
from pathlib import Path

import pytest
from grpc_health.v1 import health

from corrupt_chunks import corrupting
from rendezvous.config.timings import Timings
from rendezvous.coordinator import CoordinatorService, bind_server, serve
from rendezvous.coordinator import transfer
from rendezvous.core.auth import derive_keys
from rendezvous.core.manifest import FileEntry, Manifest, PreviousChief, SyncSummary
from rendezvous.core.member import SyncFrom
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy
from rendezvous.errors import ConfigError, SyncError
from rendezvous.host import syncdir as sync_module
from rendezvous.host.syncdir import CHUNK, SyncDir, check_sync_dir

JOB = "sync-test"


def peer(port: int = 1) -> Peer:
    return Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.1"), port, 9)


def write(root: Path, files: dict[str, bytes], mtime_ns: int = 1_700_000_000 * 10**9) -> None:
    for path, data in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.utime(target, ns=(mtime_ns, mtime_ns))


def contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


CHECKPOINT = {
    "chief/checkpoint": b"model_checkpoint_path: ckpt-3\n",
    "chief/ckpt-3.index": os.urandom(3000),
    "chief/ckpt-3.data-00000-of-00001": os.urandom(2 * CHUNK + 17),  # three chunks
    "chief/empty": b"",
}


async def serving(root: Path, files: bool = True, keys=None):
    """A Rendezvous server on loopback serving `root` (unless not `files`: a node without
    --sync-dir); (source peer, its SyncDir, server)."""
    server, port = bind_server("127.0.0.1", 0)
    source = peer(port)
    sync = SyncDir(root, 1 << 30)
    service = CoordinatorService(
        source, JOB, 2, lambda: None, lambda: None, Timings(), liveness_timeout=5.0, policy=Policy(), settle=0.0,
        keys=keys, files=transfer.FileSource(sync) if files else None,
    )
    await serve(server, service, health.aio.HealthServicer())
    await sync.scan()
    return source, sync, server


async def pull_from(
    source_root: Path, dest_root: Path, dest_limit: int = 1 << 30, job: str = JOB, files=True, keys=(None, None)
):
    """Make `dest_root` a copy of `source_root`, served on loopback: (its manifest after, the
    source's). `keys`: the source's and the fetcher's, from the job's token."""
    source, sync, server = await serving(source_root, files, keys[0])
    try:
        order = SyncFrom(source, sync.manifest.digest, sync.manifest.total_bytes)
        manifest = await transfer.pull(SyncDir(dest_root, dest_limit), order, peer(), job, 1, keys[1])
        return manifest, sync.manifest
    finally:
        await server.stop(None)


def run(coro):
    return asyncio.run(coro)


def test_an_empty_directory_gets_every_file(tmp_path):
    write(tmp_path / "src", CHECKPOINT)
    got, wanted = run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert got.digest == wanted.digest
    assert contents(tmp_path / "dest") == CHECKPOINT
    assert sorted(os.listdir(tmp_path)) == ["dest", "src"]  # no staging directory left


def test_a_stale_directory_becomes_the_source_copy(tmp_path):
    write(tmp_path / "src", CHECKPOINT)
    write(tmp_path / "dest", {"chief/checkpoint": b"model_checkpoint_path: ckpt-1\n", "workertemp_1/x": b"old"})
    same = tmp_path / "dest" / "chief" / "ckpt-3.index"
    write(tmp_path / "dest", {"chief/ckpt-3.index": CHECKPOINT["chief/ckpt-3.index"]})
    inode = same.stat().st_ino
    got, wanted = run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert got.digest == wanted.digest
    assert contents(tmp_path / "dest") == CHECKPOINT
    assert same.stat().st_ino == inode  # an unchanged file is linked, not fetched again


def test_a_directory_alike_already_is_left_alone(tmp_path):
    write(tmp_path / "src", CHECKPOINT)
    write(tmp_path / "dest", CHECKPOINT)
    inode = (tmp_path / "dest").stat().st_ino
    got, wanted = run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert got.digest == wanted.digest and (tmp_path / "dest").stat().st_ino == inode


def test_an_empty_source_empties_the_directory(tmp_path):
    (tmp_path / "src").mkdir()
    write(tmp_path / "dest", {"workertemp_1/x": b"old"})
    run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert contents(tmp_path / "dest") == {}


def test_a_corrupted_chunk_is_refused_and_the_directory_left_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setattr(transfer.FileSource, "_chunks", corrupting(transfer.FileSource._chunks, 1))
    write(tmp_path / "src", CHECKPOINT)
    stale = {"chief/checkpoint": b"model_checkpoint_path: ckpt-1\n"}
    write(tmp_path / "dest", stale)
    with pytest.raises(SyncError, match=r"SHA-256 .* \(corrupted in transit\?\): refused"):
        run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert contents(tmp_path / "dest") == stale
    assert sorted(os.listdir(tmp_path)) == ["dest", "src"]


def test_a_source_over_the_limit_is_refused_naming_its_size(tmp_path):
    write(tmp_path / "src", CHECKPOINT)
    total = sum(map(len, CHECKPOINT.values()))
    with pytest.raises(SyncError, match=rf"holds 2.1 MB \({total} bytes\), more than --sync-max-bytes 1000"):
        run(pull_from(tmp_path / "src", tmp_path / "dest", dest_limit=1000))
    assert not (tmp_path / "dest").exists()


def test_a_directory_over_the_limit_cannot_be_scanned(tmp_path):
    write(tmp_path / "d", {"big": b"x" * 2000})
    with pytest.raises(SyncError, match=r"holds 2.0 kB \(2000 bytes\), more than --sync-max-bytes 1000"):
        run(SyncDir(tmp_path / "d", 1000).scan())


def test_a_symlink_out_of_the_directory_is_refused(tmp_path):
    write(tmp_path / "d", {"a": b"a"})
    (tmp_path / "secret").write_text("no")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(SyncError, match="is a symlink to .*secret, out of --sync-dir"):
        run(SyncDir(tmp_path / "d", 1 << 20).scan())


def test_a_symlink_to_a_directory_out_of_it_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "etc").symlink_to("/etc")
    with pytest.raises(SyncError, match="out of --sync-dir"):
        run(SyncDir(tmp_path / "d", 1 << 20).scan())


def test_a_symlink_inside_counts_as_the_file(tmp_path):
    write(tmp_path / "d", {"a": b"content"})
    (tmp_path / "d" / "b").symlink_to("a")
    manifest = run(SyncDir(tmp_path / "d", 1 << 20).scan())
    assert [(f.path, f.size) for f in manifest.files] == [("a", 7), ("b", 7)]


def test_a_missing_directory_is_an_empty_copy(tmp_path):
    assert run(SyncDir(tmp_path / "none", 1).scan()).files == ()


def test_a_directory_replaced_by_a_file_is_refused_not_taken_for_an_empty_one(tmp_path):
    """An empty copy of the chief's would empty every other node's directory."""
    (tmp_path / "ckpt").write_text("a file where the directory was")
    with pytest.raises(SyncError, match="ckpt is not a directory"):
        run(SyncDir(tmp_path / "ckpt", 1).scan())


def test_a_sync_dir_not_there_yet_is_usable_and_nothing_is_made_at_the_start(tmp_path):
    assert check_sync_dir(str(tmp_path / "a" / "b" / "ckpt")) == tmp_path / "a" / "b" / "ckpt"
    assert os.listdir(tmp_path) == []


def test_a_sync_dir_under_home_is_found_from_a_tilde(tmp_path, monkeypatch):
    """As a config file gives it: no shell expands the ~ there."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert check_sync_dir("~/ckpt") == tmp_path / "ckpt"


def test_a_symlinked_sync_dir_fills_the_directory_it_points_to_and_stays_a_link(tmp_path):
    """A link to a bigger disk must not become a real directory on the small one."""
    write(tmp_path / "src", CHECKPOINT)
    (tmp_path / "big").mkdir()
    (tmp_path / "ckpt").symlink_to(tmp_path / "big")
    root = check_sync_dir(str(tmp_path / "ckpt"))
    assert root == tmp_path / "big"
    run(pull_from(tmp_path / "src", root))
    assert (tmp_path / "ckpt").is_symlink()
    assert contents(tmp_path / "ckpt") == contents(tmp_path / "big") == CHECKPOINT
    assert sorted(os.listdir(tmp_path)) == ["big", "ckpt", "src"]


@pytest.mark.parametrize("make, needle", [
    (lambda d: (d / "f").write_text("x") and d / "f", "not a directory"),
    (lambda d: (d / "f").write_text("x") and d / "f" / "ckpt", "/f is not a directory"),
    (lambda d: "/proc/rendezvous-test/ckpt", "cannot write in /proc, where the copy is staged"),
    (lambda d: "/proc", "a mount point, which cannot be renamed"),
], ids=["a-file", "under-a-file", "unwritable", "mount-point"])
def test_a_sync_dir_that_can_never_hold_a_copy_is_refused_naming_it(tmp_path, make, needle):
    """Taken for an empty directory, a node's unusable --sync-dir would, if that node is the
    chief, empty every other node's copy after the job."""
    path = str(make(tmp_path))
    with pytest.raises(ConfigError, match=f"^--sync-dir {re.escape(path)}: .*{re.escape(needle)}"):
        check_sync_dir(path)


def test_a_source_that_changed_since_the_freeze_is_refused(tmp_path):
    async def changed():
        source, sync, server = await serving(tmp_path / "src")
        try:
            order = SyncFrom(source, "0" * 64, 0)
            await transfer.pull(SyncDir(tmp_path / "dest", 1 << 20), order, peer(), JOB, 1)
        finally:
            await server.stop(None)

    write(tmp_path / "src", {"a": b"a"})
    with pytest.raises(SyncError, match="changed since the freeze"):
        run(changed())


def test_a_source_of_another_job_or_without_sync_dir_serves_nothing(tmp_path):
    write(tmp_path / "src", {"a": b"a"})
    with pytest.raises(SyncError, match="PERMISSION_DENIED job 'other' asked a node of job"):
        run(pull_from(tmp_path / "src", tmp_path / "dest", job="other"))
    with pytest.raises(SyncError, match="FAILED_PRECONDITION this node runs without --sync-dir"):
        run(pull_from(tmp_path / "src", tmp_path / "dest", files=False))
    assert not (tmp_path / "dest").exists()


def test_the_chief_is_remembered_beside_the_directory(tmp_path):
    chief = PreviousChief("abcdef012345", "10.0.0.9", 3, 1_700_000_000_000_000_000)
    SyncDir(tmp_path / "ckpt", 1).remember_chief(chief)
    assert SyncDir(tmp_path / "ckpt", 1).load_chief() == chief
    assert os.listdir(tmp_path) == [".ckpt.rendezvous-chief"]  # not inside: DIR is the user's
    assert SyncDir(tmp_path / "other", 1).load_chief() is None
    (tmp_path / ".ckpt.tmp").write_text("the user's")  # the temporary file is named as ours
    SyncDir(tmp_path / "ckpt", 1).remember_chief(chief)
    assert (tmp_path / ".ckpt.tmp").read_text() == "the user's"
    (tmp_path / ".ckpt.rendezvous-chief").write_text("{not json")
    assert SyncDir(tmp_path / "ckpt", 1).load_chief() is None


@pytest.mark.parametrize("summary", [
    None,
    SyncSummary("d" * 64, 3, 300, 7),
    SyncSummary("d" * 64, 3, 300, 7, PreviousChief("abcdef012345", "10.0.0.9", 2, 99)),
    SyncSummary.failed("holds 30 GB"),
])
def test_a_copys_summary_survives_the_wire(summary):
    from rendezvous.coordinator import _wire_sync
    from rendezvous.v1 import rendezvous_pb2 as pb

    sent = _wire_sync.sync_to_pb(summary)
    assert _wire_sync.sync_from_pb(sent if sent is not None else pb.SyncState()) == summary


def test_a_manifest_survives_the_wire_and_an_escaping_path_does_not():
    from rendezvous.coordinator import _wire_sync
    from rendezvous.v1 import rendezvous_pb2 as pb

    manifest = Manifest.of([FileEntry("a/b", 3, 5, "x" * 64), FileEntry("c", 0, 6, "y" * 64)])
    assert _wire_sync.manifest_from_pb(_wire_sync.manifest_to_pb(manifest)) == manifest
    with pytest.raises(SyncError, match="could escape"):
        _wire_sync.manifest_from_pb([pb.FileEntry(path="../../etc/passwd", size=1, sha256="z")])


def test_a_swap_that_fails_half_way_puts_the_old_directory_back(tmp_path, monkeypatch):
    write(tmp_path / "src", CHECKPOINT)
    stale = {"chief/checkpoint": b"model_checkpoint_path: ckpt-1\n"}
    write(tmp_path / "dest", stale)
    rename = os.rename

    def failing(src, dst):
        if ".rendezvous-" in str(src) and "-old-" not in str(src):
            raise OSError(28, "No space left on device")
        rename(src, dst)

    monkeypatch.setattr("rendezvous.host.syncdir.os.rename", failing)
    with pytest.raises(OSError, match="No space left"):
        run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert contents(tmp_path / "dest") == stale
    assert sorted(os.listdir(tmp_path)) == ["dest", "src"]


def test_a_pull_cancelled_while_a_thread_writes_leaves_nothing_behind(tmp_path, monkeypatch):
    """The round ended (an abort read while this node pulls) while a chunk was being
    written in a thread: the staging directory is removed only once that write is done,
    so nothing of it is left beside DIR, which is as it was."""
    write(tmp_path / "src", CHECKPOINT)
    write(tmp_path / "dest", {"old": b"kept"})
    writing = threading.Event()
    original = sync_module._Receiver.write

    def slow_write(self, path, offset, data):
        writing.set()
        time.sleep(0.3)  # still writing when the pull is cancelled
        original(self, path, offset, data)

    monkeypatch.setattr(sync_module._Receiver, "write", slow_write)

    async def cancelled():
        task = asyncio.ensure_future(pull_from(tmp_path / "src", tmp_path / "dest"))
        while not writing.is_set():
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(cancelled())  # returns once every thread it started is done
    assert sorted(os.listdir(tmp_path)) == ["dest", "src"]
    assert contents(tmp_path / "dest") == {"old": b"kept"}


DEAD, LIVING = 999_999, os.getpid()


def test_what_a_daemon_killed_during_a_pull_left_is_removed_at_the_next_start(tmp_path):
    """Its staging copy (as big as the directory) and an old DIR it had moved away; what a
    running daemon, a user or another directory has there stays."""
    write(tmp_path / "dest", {"a": b"new"})
    left = {f".dest.rendezvous-staging-{DEAD}-0000aaaa": {"big": b"x" * 5000},
            f".dest.rendezvous-old-{DEAD}-0000bbbb": {"a": b"old"}}
    kept = {f".dest.rendezvous-staging-{LIVING}-0000cccc": {"big": b"pulling"},
            f".other.rendezvous-staging-{DEAD}-0000dddd": {"b": b"another directory's"},
            ".dest.rendezvous-staging-mine": {"c": b"a user's"}}
    for name, files in {**left, **kept}.items():
        write(tmp_path / name, files)
    sync_module.remove_leftovers(tmp_path / "dest", alive=lambda pid: pid == LIVING)
    assert sorted(os.listdir(tmp_path)) == sorted(["dest", *kept])
    assert contents(tmp_path / "dest") == {"a": b"new"}


def test_a_directory_moved_away_by_a_daemon_killed_in_its_swap_is_put_back(tmp_path):
    """Killed between the swap's two renames: DIR is missing, the old one and the finished
    staging copy beside it. The old DIR goes back into place; the staging copy goes."""
    write(tmp_path / f".dest.rendezvous-old-{DEAD}-0000aaaa", {"a": b"old"})
    write(tmp_path / f".dest.rendezvous-staging-{DEAD}-0000bbbb", {"a": b"new"})
    sync_module.remove_leftovers(tmp_path / "dest", alive=lambda pid: False)
    assert sorted(os.listdir(tmp_path)) == ["dest"]
    assert contents(tmp_path / "dest") == {"a": b"old"}


def test_a_directory_that_cannot_be_put_back_is_said_not_raised(tmp_path, monkeypatch, caplog):
    write(tmp_path / f".dest.rendezvous-old-{DEAD}-0000aaaa", {"a": b"old"})

    def refused(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("rendezvous.host.syncdir.os.rename", refused)
    sync_module.remove_leftovers(tmp_path / "dest", alive=lambda pid: False)
    assert "--sync-dir" in caplog.text and "putting it back" in caplog.text and "Permission denied" in caplog.text
    assert os.listdir(tmp_path) == [f".dest.rendezvous-old-{DEAD}-0000aaaa"]  # kept, not removed


def test_a_pull_stages_beside_the_directory_under_its_own_pid(tmp_path, monkeypatch):
    """The names `remove_leftovers` goes by: a pull's staging and old directories carry the
    pid of the daemon that made them."""
    write(tmp_path / "src", CHECKPOINT)
    write(tmp_path / "dest", {"old": b"x"})
    made = []
    rename = os.rename
    monkeypatch.setattr("rendezvous.host.syncdir.os.rename", lambda a, b: (made.append((Path(a).name, Path(b).name)), rename(a, b)))
    run(pull_from(tmp_path / "src", tmp_path / "dest"))
    assert [tuple(re.sub(r"-[0-9a-f]{8}$", "", n) for n in pair) for pair in made] == [
        ("dest", f".dest.rendezvous-old-{LIVING}"), (f".dest.rendezvous-staging-{LIVING}", "dest")]
    assert sorted(os.listdir(tmp_path)) == ["dest", "src"]


def test_a_fifo_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "pipe")
    with pytest.raises(SyncError, match="not a regular file"):
        run(SyncDir(tmp_path / "d", 1 << 20).scan())


def test_a_second_scan_reads_only_the_files_that_changed(tmp_path, monkeypatch):
    write(tmp_path / "d", {"a": b"a", "b": b"b"})
    sync = SyncDir(tmp_path / "d", 1 << 20)
    first = run(sync.scan())
    read = []
    hash_file = sync_module._hash_file
    monkeypatch.setattr(sync_module, "_hash_file", lambda path: read.append(path) or hash_file(path))
    assert run(sync.scan()) == first and read == []
    write(tmp_path / "d", {"b": b"changed"}, mtime_ns=1_800_000_000 * 10**9)
    assert run(sync.scan()) != first and read == [str(tmp_path / "d" / "b")]


def test_with_a_token_only_a_fetcher_that_holds_it_gets_the_files(tmp_path):
    keys = derive_keys(secrets.token_bytes(32), JOB)
    write(tmp_path / "src", CHECKPOINT)
    manifest, source = run(pull_from(tmp_path / "src", tmp_path / "dst", keys=(keys, keys)))
    assert manifest.digest == source.digest and contents(tmp_path / "dst") == CHECKPOINT
    for wrong in (None, derive_keys(secrets.token_bytes(32), JOB)):
        with pytest.raises(SyncError, match="UNAUTHENTICATED"):
            run(pull_from(tmp_path / "src", tmp_path / f"other-{wrong is None}", keys=(keys, wrong)))
        assert not (tmp_path / f"other-{wrong is None}").exists() or not contents(tmp_path / f"other-{wrong is None}")
