"""The coordinator's watch over a running round: members that went silent end it
(core.round.check_liveness), and members whose progress lags are named stragglers."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Mapping, Optional, Protocol

from ..config.timings import Timings
from ..core import job as jobs
from ..core import round as rounds
from ..core.peer import Peer

log = logging.getLogger(__name__)


class Watched(Protocol):
    """What the watchdog reads of the round it watches, and the one way it changes it."""

    me: Peer
    board: jobs.Board
    timings: Timings

    @property
    def round(self) -> rounds.Round: ...

    @property
    def outboxes(self) -> Mapping[str, object]: ...

    @property
    def liveness(self) -> float: ...

    @property
    def heartbeat_interval(self) -> float: ...

    def apply(self, step: rounds.Step) -> None: ...


class Watchdog:
    def __init__(self, coordination: Watched) -> None:
        self._c = coordination
        self._task: Optional[asyncio.Task] = None
        self._looked = time.monotonic()  # the watch's last look at the round

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._watch(), name="liveness")

    async def _watch(self) -> None:
        """Ends the round when a member goes silent; runs from the freeze to the round's
        end, while anyone is joined."""
        c = self._c
        self._looked = time.monotonic()
        while c.outboxes and c.round.running:
            await asyncio.sleep(c.heartbeat_interval)
            now = time.monotonic()
            self.notice_pause(now)
            c.apply(rounds.check_liveness(c.round, now, c.liveness, c.me.node_id))
            self._check_stragglers(now)

    def notice_pause(self, now: float) -> None:
        """Whether this node did not run since the last look (core.round.paused): counted
        from the last look, not from a sleep's start, as a stop between the two is this
        node's too. The Join streams ask too before a member's leaving counts: the streams
        members closed while this node did not run may be read before the watch wakes."""
        c, interval = self._c, self._c.heartbeat_interval
        if self._task is not None and not self._task.done() and rounds.paused(self._looked + interval, now, interval):
            paused_for = now - self._looked - interval
            log.warning("this node did not run for %.1f s (starved of CPU or stopped): "
                        "the members count as heard now", paused_for)
            c.apply(rounds.Step(rounds.resumed(c.round, now, paused_for), rounds.Action.NOTHING))
        self._looked = now

    def _check_stragglers(self, now: float) -> None:
        c = self._c
        after = c.timings.straggler_after
        c.board, marked = jobs.check_stragglers(jobs.for_round(c.board, c.round.number), now, after)
        for node_id in marked:
            peer = c.round.member(node_id)
            log.warning(
                "%s is a straggler: its progress has lagged the others' median by more than %d%% for %.0f s",
                peer.describe() if peer else node_id, jobs.STRAGGLER_LAG * 100, after,
            )
