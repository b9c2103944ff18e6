"""One round's rendezvous from the member's side: the Join streams this node opens, what the
coordinator says on them fed to the member machine (core.member), each action carried out.

    join the view's target -> events -> machine.step -> Confirm: arm the command, send Ready
                                                     -> Start: fire the armed command
                                                     -> Rejoin: next stream (maybe suspect)
                                                     -> Fail: raise its error
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import aclosing
from typing import AsyncIterator, Callable, Optional

from .config import JoinConfig
from .coordinator import JoinSession, SessionLost
from .core import member as machine
from .core.advert import Phase
from .core.member import Member, MemberEvent
from .core.peer import Peer
from .core.tf_config import Membership, launch_environment
from .errors import MembershipError
from .launcher import Launcher
from .resources import Resources, SessionFactory

log = logging.getLogger(__name__)


class Joiner:
    """Joins one round. `session` is the open Join stream, kept after the release: the
    coordinator hears the command's exit code on it, and the node closes it at shutdown."""

    def __init__(
        self,
        config: JoinConfig,
        res: Resources,
        launcher: Launcher,
        connect: SessionFactory,
        enter: Callable[[Phase, Optional[Membership]], None],
        round: int = 1,
    ) -> None:
        self._config = config
        self._res = res
        self._launcher = launcher
        self._connect = connect
        self._enter = enter
        self._round = round
        self.session: Optional[JoinSession] = None

    async def rendezvous(self) -> Membership:
        """Join until released; the frozen membership. Stays visible a moment after a
        conflict, so that the peer this node disagrees with sees it too and fails alike."""
        try:
            return await self._join_until_released()
        except MembershipError:
            if self._res.view.conflicts():
                await asyncio.sleep(self._config.timings.conflict_linger)
            raise

    async def _join_until_released(self) -> Membership:
        timings = self._config.timings
        state = Member(self._res.me, timings.suspect_after, timings.suspect_for)
        while True:
            self._res.view_changed.clear()  # the target is computed now: older changes are seen
            target = self._res.view.target(time.monotonic())
            state = state.joining(target.endpoint, target.peer)
            self.session = self._connect(
                target.endpoint, self._res.me, self._config.job, self._round, self._config.expect,
                timings.keepalive,
            )
            state = await self._follow(self.session, state)
            if state.phase is machine.MemberPhase.RELEASED and state.membership is not None:
                return state.membership
            await self.session.close()
            self.session = None
            await self._view_change_or(timings.retry_interval)

    async def _follow(self, session: JoinSession, state: Member) -> Member:
        """Feed one Join stream's events to the member machine and carry out its actions,
        until it rejoins or starts the command (both returned) or fails (raised)."""
        async with aclosing(self._events(session)) as events:
            async for event in events:
                step = machine.step(state, event, time.monotonic())
                state, action = step.state, step.action
                if isinstance(action, machine.Confirm):
                    await self._confirm(session, action.membership)
                elif isinstance(action, machine.Start):
                    self._start(action.delay, state.membership)
                    return state
                elif isinstance(action, machine.Rejoin):
                    if action.suspect is not None:
                        self._suspect(action.suspect, action.until)
                    return state
                elif isinstance(action, machine.Fail):
                    raise action.error
        return state

    async def _events(self, session: JoinSession) -> AsyncIterator[MemberEvent]:
        """What the coordinator says, and changes of whom to join, as they come."""
        try:
            await session.join()
        except SessionLost as exc:
            yield machine.Lost(str(exc))
            return
        receive = asyncio.ensure_future(session.receive())
        try:
            while True:
                view = self._res.view
                yield machine.TargetChanged(view.target(time.monotonic()).endpoint, tuple(view.conflicts()))
                self._res.view_changed.clear()
                changed = asyncio.ensure_future(self._res.view_changed.wait())
                await asyncio.wait({receive, changed}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                while receive.done():
                    try:
                        yield receive.result()
                    except SessionLost as exc:
                        yield machine.Lost(str(exc))
                        return
                    receive = asyncio.ensure_future(session.receive())
        finally:
            receive.cancel()

    async def _confirm(self, session: JoinSession, membership: Membership) -> None:
        """Arm the command with its environment, then confirm the list by its digest."""
        node_id = self._res.me.node_id
        env = launch_environment(membership, node_id)
        log.info(
            "membership frozen: worker %d of %d, coordinator %s, TF_CONFIG=%s",
            membership.rank_of(node_id), membership.world_size,
            membership.coordinator.describe(), env["TF_CONFIG"],
        )
        await self._launcher.arm(self._config.command, env)
        self._enter(Phase.FROZEN, membership)
        await session.ready(membership.digest)

    def _start(self, delay: float, membership: Optional[Membership]) -> None:
        log.debug("released: starting in %.1f ms", delay * 1e3)
        self._res.reservation.release()  # the command binds the TF port next
        # The gate process waits until then on its own: this daemon stays out of the way
        # of the start instant.
        self._launcher.fire(time.time() + delay)
        self._enter(Phase.RUNNING, membership)

    def _suspect(self, peer: Peer, until: float) -> None:
        timings = self._config.timings
        log.warning(
            "cannot reach the coordinator %s for %.0f s: it may have stopped without a goodbye; "
            "electing without it for %.0f s", peer.describe(), timings.suspect_after, timings.suspect_for,
        )
        self._res.update_view(self._res.view.suspect(peer.node_id, until))

    async def _view_change_or(self, seconds: float) -> None:
        # Not wait_for: on Python < 3.12 it can swallow a cancellation that arrives as the
        # event is set, and a stopped node would then go on joining.
        changed = asyncio.ensure_future(self._res.view_changed.wait())
        try:
            await asyncio.wait({changed}, timeout=seconds)
        finally:
            changed.cancel()
