"""The pure side of --sync-dir: manifests, their digest and diff, path safety, the source."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.manifest import (
    Diff,
    FileEntry,
    Manifest,
    PreviousChief,
    SyncSummary,
    check_path,
    check_size,
    choose_source,
    diff,
    format_bytes,
    link_inside,
    out_of_sync,
)
from rendezvous.core.peer import Peer
from rendezvous.core.tf_config import Membership
from rendezvous.errors import SyncError


def entry(path, content="x", mtime=1):
    return FileEntry(path, len(content), mtime, f"sha-{content}")


def peer(n, node_id=None):
    return Peer(node_id or f"{n:012x}", ipaddress.ip_address(f"10.0.0.{n}"), 7000, 8000)


# -- paths -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["a", "a/b", "chief/ckpt-1.index", "..a", "a..b/c", "a b"])
def test_paths_inside_are_kept(path):
    assert check_path(path) == path


@pytest.mark.parametrize("path", ["", "/etc/passwd", "..", "../x", "a/../../x", "a/..", "./a", "a/./b",
                                  "a//b", "a/", "a\\..\\b", "a\0b"])
def test_paths_that_could_escape_are_refused(path):
    with pytest.raises(SyncError, match="could escape"):
        check_path(path)


@pytest.mark.parametrize("target, inside", [
    ("/data/ckpt/a", True), ("/data/ckpt/sub/a", True), ("/data/ckpt", False),
    ("/data/ckpt2/a", False), ("/data/other", False), ("/etc/passwd", False), ("/data/ckpt/../x", False),
])
def test_link_inside(target, inside):
    assert link_inside("/data/ckpt", target) is inside


# -- manifests ---------------------------------------------------------------------------------


def test_a_manifest_is_sorted_and_sums_up():
    m = Manifest.of([entry("b", "bb", 5), entry("a", "a", 9)])
    assert [f.path for f in m.files] == ["a", "b"]
    assert (m.total_bytes, m.newest_mtime_ns) == (3, 9)
    assert m.summary() == SyncSummary(m.digest, 2, 3, 9, None)


def test_an_empty_manifest():
    m = Manifest()
    assert (m.total_bytes, m.newest_mtime_ns, m.files) == (0, 0, ())
    assert m.digest == Manifest.of([]).digest


def test_a_manifest_refuses_duplicates_disorder_and_escaping_paths():
    with pytest.raises(SyncError):
        Manifest((entry("a"), entry("a")))
    with pytest.raises(SyncError):
        Manifest((entry("b"), entry("a")))
    with pytest.raises(SyncError, match="could escape"):
        Manifest.of([entry("../a")])


@pytest.mark.parametrize("change", [
    lambda e: FileEntry("b", e.size, e.mtime_ns, e.sha256),
    lambda e: FileEntry(e.path, e.size + 1, e.mtime_ns, e.sha256),
    lambda e: FileEntry(e.path, e.size, e.mtime_ns + 1, e.sha256),
    lambda e: FileEntry(e.path, e.size, e.mtime_ns, "other"),
])
def test_the_digest_changes_with_every_field(change):
    e = entry("a")
    assert Manifest.of([e]).digest != Manifest.of([change(e)]).digest


def test_the_digest_does_not_depend_on_the_order_given():
    a, b = entry("a"), entry("b/c")
    assert Manifest.of([a, b]).digest == Manifest.of([b, a]).digest


def test_the_digest_cannot_be_forged_by_moving_separators():
    assert Manifest.of([FileEntry("a", 11, 1, "x")]).digest != Manifest.of([FileEntry("a1", 1, 1, "x")]).digest


# -- size --------------------------------------------------------------------------------------


def test_check_size_names_the_size_and_the_limit():
    check_size(100, 100, "DIR")
    with pytest.raises(SyncError, match=r"DIR holds 412 MB \(412000000 bytes\), more than --sync-max-bytes 1000"):
        check_size(412_000_000, 1000, "DIR")


@pytest.mark.parametrize("n, text", [(0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (412_000_000, "412 MB"),
                                     (1_500_000_000, "1.5 GB"), (21_474_836_480, "21 GB")])
def test_format_bytes(n, text):
    assert format_bytes(n) == text


# -- diff --------------------------------------------------------------------------------------


def test_diff_of_equal_copies_is_empty():
    m = Manifest.of([entry("a"), entry("b")])
    d = diff(m, m)
    assert d.empty and d.keep == m.files and d.fetch_bytes == 0


def test_diff_into_an_empty_copy_fetches_everything():
    source = Manifest.of([entry("a", "aaa"), entry("b/c", "cc")])
    assert diff(Manifest(), source) == Diff(fetch=source.files)
    assert diff(Manifest(), source).fetch_bytes == 5


def test_diff_keeps_copies_fetches_and_deletes():
    local = Manifest.of([entry("same"), entry("touched", "t", 1), entry("changed", "old"), entry("stale")])
    source = Manifest.of([entry("same"), entry("touched", "t", 2), entry("changed", "new"), entry("new")])
    d = diff(local, source)
    assert [f.path for f in d.keep] == ["same"]
    assert d.copy == (entry("touched", "t", 2),)
    assert [f.path for f in d.fetch] == ["changed", "new"]
    assert d.delete == ("stale",)
    assert not d.empty


def test_diff_to_an_empty_source_deletes_everything():
    d = diff(Manifest.of([entry("a"), entry("b")]), Manifest())
    assert d.delete == ("a", "b") and not d.empty and not d.fetch


# -- the source --------------------------------------------------------------------------------


def summaries(*items):
    return {p.node_id: s for p, s in items}


def summary(newest, files=1, digest=None, previous=None):
    return SyncSummary(digest or f"d{newest}-{files}", files, files * 10, newest, previous)


def test_the_previous_chief_wins_over_newer_content():
    a, b, c = peer(1), peer(2), peer(3)
    chief = PreviousChief(b.node_id, str(b.address), 1)
    s = summaries((a, summary(9)), (b, summary(5, previous=chief)), (c, summary(7)))
    choice = choose_source([a, b, c], s)
    assert (choice.source, choice.why) == (b, "chief of the previous round")


def test_the_previous_chief_is_found_by_address_after_its_daemon_restarted():
    a, b = peer(1), peer(2, "bbbbbbbbbbbb")
    chief = PreviousChief("gone00000000", str(b.address), 1)
    s = summaries((a, summary(9, previous=chief)), (b, summary(5)))
    assert choose_source([a, b], s).source == b


def test_an_address_shared_by_two_members_finds_no_previous_chief():
    a = peer(1)
    b = Peer("bbbbbbbbbbbb", a.address, 7001, 8001)
    chief = PreviousChief("gone00000000", str(a.address), 1)
    s = summaries((a, summary(5, previous=chief)), (b, summary(9)))
    assert choose_source([a, b], s).why == "newest content"


def test_the_latest_round_remembered_names_the_chief():
    a, b = peer(1), peer(2)
    old, new = PreviousChief(a.node_id, str(a.address), 1), PreviousChief(b.node_id, str(b.address), 2)
    s = summaries((a, summary(9, previous=new)), (b, summary(5, previous=old)))
    assert choose_source([a, b], s).source == b


def test_a_later_run_counts_over_a_higher_round_of_an_earlier_one():
    """A node that missed the last run remembers round 5 of the one before: the round 1
    the others ran since, started later, names the chief."""
    a, b = peer(1), peer(2)
    stale = PreviousChief(a.node_id, str(a.address), 5, started_ns=1_000)
    recent = PreviousChief(b.node_id, str(b.address), 1, started_ns=2_000)
    s = summaries((a, summary(9, previous=stale)), (b, summary(5, previous=recent)))
    assert choose_source([a, b], s).source == b


def test_a_previous_chief_with_an_empty_copy_or_gone_gives_the_newest_content():
    a, b, c = peer(1), peer(2), peer(3)
    empty_chief = PreviousChief(a.node_id, str(a.address), 1)
    s = summaries((a, summary(0, files=0, previous=empty_chief)), (b, summary(5)), (c, summary(7)))
    assert choose_source([a, b, c], s).source == c
    gone = PreviousChief("gone00000000", "10.0.0.99", 1)
    s = summaries((a, summary(3, previous=gone)), (b, summary(5)), (c, summary(4)))
    assert choose_source([a, b, c], s).source == b


def test_newest_content_ties_go_to_the_lowest_address():
    a, b, c = peer(1), peer(2), peer(3)
    s = summaries((a, summary(0, files=0)), (b, summary(7, digest="x")), (c, summary(7, digest="y")))
    assert choose_source([a, b, c], s).source == b


def test_every_copy_empty_gives_the_lowest_address():
    a, b = peer(1), peer(2)
    s = summaries((a, summary(0, files=0, digest="e")), (b, summary(0, files=0, digest="e")))
    choice = choose_source([a, b], s)
    assert (choice.source, choice.why) == (a, "every copy is empty")
    assert out_of_sync([a, b], s, "e") == ()


def test_out_of_sync_lists_the_members_to_update():
    a, b, c = peer(1), peer(2), peer(3)
    s = summaries((a, summary(1, digest="x")), (b, summary(1, digest="y")), (c, summary(1, digest="x")))
    assert out_of_sync([a, b, c], s, "x") == (b,)


def test_previous_chief_of_a_membership_is_worker_0():
    a, b = peer(1), peer(2)
    assert PreviousChief.of(Membership("j", 3, (a, b)), 42) == PreviousChief(a.node_id, "10.0.0.1", 3, 42)


def test_a_failed_summary_carries_only_its_reason():
    failed = SyncSummary.failed("over the limit")
    assert (failed.digest, failed.files, failed.error) == ("", 0, "over the limit")


entries = st.dictionaries(
    st.sampled_from(["a", "b", "c/d", "c/e", "f"]),
    st.tuples(st.sampled_from(["x", "yy"]), st.integers(1, 3)),
)


@given(entries, entries)
def test_diff_turns_any_copy_into_the_source(local_files, source_files):
    local = Manifest.of(entry(p, c, m) for p, (c, m) in local_files.items())
    source = Manifest.of(entry(p, c, m) for p, (c, m) in source_files.items())
    d = diff(local, source)
    mine = local.by_path()
    assert sorted(f.path for f in d.keep + d.copy + d.fetch) == sorted(source_files)
    assert set(d.delete) == set(local_files) - set(source_files)
    assert all(mine[f.path] == f for f in d.keep)
    assert all(mine[f.path].same_content(f) and mine[f.path] != f for f in d.copy)
    assert all(f.path not in mine or not mine[f.path].same_content(f) for f in d.fetch)
    assert d.empty == (local.digest == source.digest)
