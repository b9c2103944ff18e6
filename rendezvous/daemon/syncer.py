"""One round's member side of --sync-dir: the summary of this node's copy that goes with its
confirmation of the frozen list and with its report of the command's end, and the copy it
pulls when the coordinator orders one (core.member's `Sync`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from ..coordinator import JoinSession, SessionLost, transfer
from ..core.auth import Keys
from ..core.manifest import PreviousChief, SyncSummary
from ..core.member import SyncFrom
from ..core.peer import Peer
from ..host.syncdir import SyncDir

log = logging.getLogger(__name__)


class MemberSync:
    """What this member has of the synced directory, and the pull the coordinator ordered.
    Without --sync-dir (`sync` None) it has nothing to say and never pulls."""

    def __init__(self, sync: Optional[SyncDir], previous: Optional[PreviousChief]) -> None:
        self._sync = sync
        self._previous = previous  # the chief of the last round that ran
        self._pulling: Optional[asyncio.Task] = None

    async def scan(self) -> Optional[SyncSummary]:
        """--sync-dir: this node's copy, for the coordinator to compare."""
        sync = self._sync
        if sync is None:
            return None
        manifest, error = await sync.attempt(sync.scan())
        return manifest.summary(self._previous) if manifest else SyncSummary.failed(error)

    def pull(self, order: SyncFrom, session: JoinSession, me: Peer, job: str, round: int,
             keys: Optional[Keys]) -> None:
        """Starts making the synced directory the copy `order` names. In a task of its own,
        the coordinator still read meanwhile: an abort (a member lost, the source frozen)
        ends the round at once, not when the transfer ends or fails; `cancel` then stops
        the pull."""
        self._pulling = asyncio.create_task(self._pull(order, session, me, job, round, keys), name="sync")

    async def cancel(self) -> None:
        if self._pulling is not None:  # the round ended while this node pulled a copy
            self._pulling.cancel()
            await asyncio.gather(self._pulling, return_exceptions=True)  # DIR as it was
            self._pulling = None

    async def _pull(self, order: SyncFrom, session: JoinSession, me: Peer, job: str, round: int,
                    keys: Optional[Keys]) -> None:
        """Make the synced directory the copy `order` names, then say what this node has."""
        sync = self._sync
        assert sync is not None
        try:
            manifest, error = await sync.attempt(transfer.pull(sync, order, me, job, round, keys))
        except Exception as exc:  # a bug: fail the round with it rather than never report
            log.exception("--sync-dir: the copy failed")
            manifest, error = None, f"--sync-dir: the copy failed: {exc!r}"
        try:
            await session.synced(manifest.digest if manifest else "", error)
        except SessionLost:
            pass  # the read side reports the lost coordinator
