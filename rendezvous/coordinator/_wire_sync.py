"""Conversions of --sync-dir's messages: a member's copy (SyncState), the manifest of its
files and the coordinator's order to make the copies equal (SyncFrom)."""

from __future__ import annotations

from typing import Iterable, Optional

from ..core.manifest import FileEntry, Manifest, PreviousChief, SyncSummary
from ..core.round import Round, RoundPhase
from ..v1 import rendezvous_pb2 as pb
from ._wire import peer_to_pb


def sync_to_pb(summary: Optional[SyncSummary]) -> Optional[pb.SyncState]:
    if summary is None:
        return None
    state = pb.SyncState(
        digest=summary.digest, files=summary.files, total_bytes=summary.total_bytes,
        newest_mtime_ns=summary.newest_mtime_ns, error=summary.error,
    )
    if summary.previous is not None:
        p = summary.previous
        state.previous.CopyFrom(
            pb.PreviousChief(node_id=p.node_id, address=p.address, round=p.round, started_unix_ns=p.started_ns)
        )
    return state


def sync_from_pb(message: pb.SyncState) -> Optional[SyncSummary]:
    """None when the member sent none: it does not sync."""
    if not message.digest:
        return SyncSummary.failed(message.error) if message.error else None
    p = message.previous
    previous = PreviousChief(p.node_id, p.address, p.round, p.started_unix_ns) if p.node_id else None
    return SyncSummary(message.digest, message.files, message.total_bytes, message.newest_mtime_ns, previous)


def manifest_to_pb(manifest: Manifest) -> list[pb.FileEntry]:
    return [pb.FileEntry(path=f.path, size=f.size, mtime_ns=f.mtime_ns, sha256=f.sha256) for f in manifest.files]


def manifest_from_pb(files: Iterable[pb.FileEntry]) -> Manifest:
    """Raises SyncError for a path that could escape the directory."""
    return Manifest.of(FileEntry(f.path, f.size, f.mtime_ns, f.sha256) for f in files)


def sync_order_to_pb(state: Round) -> pb.SyncFrom:
    """What the coordinator tells every member to make its copy."""
    assert state.source is not None
    summary = state.sync[state.source.node_id]
    return pb.SyncFrom(
        source=peer_to_pb(state.source), digest=state.source_digest, total_bytes=summary.total_bytes,
        final=state.phase is RoundPhase.FINAL_SYNC, reason=state.source_reason,
    )
