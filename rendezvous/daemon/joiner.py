"""One round's rendezvous from the member's side, as the coordinator's: an event source that
only listens (daemon/memberevents.py's `MemberEvents`: the Join streams this node opens, what
the coordinator says on them, the view's changes, the command's end), the member machine that decides
(core.member.step, in `Joiner`), and one executor that carries out each action
(`MemberActions`).

    start the command's gate (it waits for the release), then
    join the view's target -> events -> machine.step -> Confirm: arm the command, send Ready
                                                     -> Start: fire the armed command
                                                     -> Rejoin: next stream (maybe suspect)
                                                     -> Fail: raise its error
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from contextlib import aclosing
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Protocol, get_args

from ..config.join import JoinConfig
from ..coordinator import JoinSession, SessionLost
from ..core import member as machine
from ..core.advert import Phase
from ..core.manifest import PreviousChief, SyncSummary
from ..core.auth import Keys
from ..core.failure import ERROR_FILE_VARIABLE, Failure
from ..core.member import Member, MemberAction, MemberEvent, RoundEnd
from ..core.peer import Peer
from ..core.preflight import Fingerprint
from ..core.size import Size
from ..core.progress import VARIABLE as PROGRESS_VARIABLE
from ..core.progress import Progress
from ..core.tf_config import Membership, command_environment
from ..core.view import conflicts
from ..coordinator.local import JoinHandler
from ..errors import MembershipError
from ..launch.errorfile import ErrorFile
from ..launch.launcher import Launcher
from ..launch.prewarm import modules_for
from .commandside import describe_failure, log_devices, log_failure
from .memberevents import MemberEvents
from .reach import command_end
from .relay import ProgressRelay
from .resources import Seat
from .syncer import MemberSync
from .viewholder import ViewHolder

log = logging.getLogger(__name__)

# The events the coordinator's own messages become: each proves it (and its round's members) alive.
FROM_COORDINATOR = get_args(machine.CoordinatorEvent)


class SessionFactory(Protocol):
    """Opens a Join stream to a coordinator (`JoinSession`; tests may pass another)."""

    def __call__(
        self, endpoint: str, me: Peer, job: str, round: int, expect: Size, keepalive: Optional[float],
        fingerprint: Optional[Fingerprint] = None,
        keys: Optional[Keys] = None,
        local: Optional[JoinHandler] = None,
    ) -> JoinSession: ...


class Joiner:
    """Joins one round, then watches it until it ends: the events of `MemberEvents` fed to
    the member machine (core.member.step), each action carried out by `MemberActions`."""

    def __init__(
        self,
        config: JoinConfig,
        seat: Seat,
        views: ViewHolder,
        launcher: Launcher,
        connect: SessionFactory,
        enter: Callable[[Phase, Optional[Membership]], None],
        round: int = 1,
        previous: Optional[PreviousChief] = None,
        on_progress: Callable[[Progress], None] = lambda progress: None,
        expect_source: str = "--expect",
    ) -> None:
        self._config = config
        self._seat = seat
        self._views = views
        self._launcher = launcher
        self._connect = connect
        self._round = round
        self._expect_source = expect_source  # where config.expect came from, for the conflict it names
        self.state = Member(seat.me(), config.timings.suspect_after, liveness_timeout=config.liveness_timeout,
                            syncs=seat.sync is not None)
        self._events = MemberEvents(views, launcher, lambda: self.state, expect_source)
        self._actions = MemberActions(config, seat, views, launcher, enter, lambda: self.state, round, previous,
                                      on_progress)

    @property
    def session(self) -> Optional[JoinSession]:
        return self._actions.session

    @property
    def failure(self) -> Optional[Failure]:
        return self._actions.failure

    @property
    def progress(self) -> Optional[Progress]:
        return self._actions.progress.latest

    async def rendezvous(self) -> Optional[RoundEnd]:
        """Join until the command starts (None), or the round ends before (its end).
        Stays visible a moment after a conflict, so that the peer this node disagrees with
        sees it too and fails alike."""
        command = self._config.command
        await self._launcher.prepare(command, *modules_for(self._config.prewarm, command))
        try:
            return await self._join_until_released()
        except MembershipError:
            if conflicts(self._views.view, time.monotonic(), self._expect_source):
                await asyncio.sleep(self._config.timings.conflict_linger)
            raise

    async def supervise(self) -> RoundEnd:
        """While the command runs: report its end, wait for the round's."""
        assert self.session is not None and self.state.membership is not None
        exited = asyncio.ensure_future(command_end(self._launcher.wait, self._seat.me(), self.state.membership,
                                                   self._config.timings.tf_port_silence))
        try:
            action = await self._follow(self._events.listen(self.session, exited))
        finally:
            exited.cancel()
        assert isinstance(action, RoundEnd)
        return action

    async def close(self) -> None:
        await self._actions.close()

    async def _join_until_released(self) -> Optional[RoundEnd]:
        timings = self._config.timings
        while True:
            self._views.changed.clear()  # the target is computed now: older changes are seen
            target, me = self._views.view.target(time.monotonic()), self._seat.me()
            self.state = self.state.joining(target.endpoint, target.peer, me)
            session = self._actions.session = self._connect(
                target.endpoint, me, self._config.job, self._round, self._config.expect,
                timings.keepalive, fingerprint=self._seat.fingerprint, keys=self._seat.keys,
                # this node's own member reaches its servicer inside the process (coordinator.local)
                local=self._seat.local if self.state.joined_to_self else None,
            )
            action = await self._follow(self._events.joined(session))
            if not isinstance(action, machine.Rejoin):
                return action if isinstance(action, RoundEnd) else None  # None: the command starts
            await self.close()
            await self._view_change_or(timings.retry_interval)

    async def _follow(self, events: AsyncIterator[MemberEvent]) -> MemberAction:
        """Feed events to the member machine and carry out its actions until one that ends
        this stream's part (Start, Rejoin, RoundEnd: returned) or the round (Fail: raised)."""
        async with aclosing(events):
            async for event in events:
                if isinstance(event, machine.Lost):  # a failed try to reach the coordinator
                    self._views.miss(*vouched(self.state))
                step = machine.step(self.state, event, time.monotonic())
                self.state, action = step.state, step.action
                if await self._actions.carry_out(action, event):
                    return action
                if isinstance(event, FROM_COORDINATOR):
                    self._views.hear(*vouched(self.state))
        raise AssertionError("the event stream ended without an end")  # pragma: no cover

    async def _view_change_or(self, seconds: float) -> None:
        # Not wait_for: on Python < 3.12 it can swallow a cancellation that arrives as the
        # event is set, and a stopped node would then go on joining.
        changed = asyncio.ensure_future(self._views.changed.wait())
        try:
            await asyncio.wait({changed}, timeout=seconds)
        finally:
            changed.cancel()


class MemberActions:
    """Carries out the member machine's actions (core.member), one method per kind of
    action, in `carry_out`; holds what they leave open: the Join stream (`session`, kept
    after the release: heartbeats, the command's exit code and the round's end travel on
    it; the node closes it at shutdown), the heartbeats, the error file, the progress relay
    and the --sync-dir pull."""

    def __init__(
        self, config: JoinConfig, seat: Seat, views: ViewHolder, launcher: Launcher,
        enter: Callable[[Phase, Optional[Membership]], None], state: Callable[[], Member], round: int,
        previous: Optional[PreviousChief], on_progress: Callable[[Progress], None],
    ) -> None:
        self._config = config
        self._seat = seat
        self._views = views
        self._launcher = launcher
        self._enter = enter
        self._state = state
        self._round = round
        self.session: Optional[JoinSession] = None
        self.failure: Optional[Failure] = None  # this node's command failed: why
        self._errors: Optional[ErrorFile] = None  # $RENDEZVOUS_ERROR_FILE, made at the freeze
        self._beats: Optional[asyncio.Task] = None
        timings = config.timings
        self.progress = ProgressRelay(seat.progress_dir, timings.progress_poll, timings.progress_send, on_progress)
        self._sync = MemberSync(seat.sync, previous)  # previous: the chief of the last round that ran
        # What each kind of action runs; True: the action ends this stream's part.
        self._carry_out: dict[type, Callable[[Any, MemberEvent], Awaitable[bool]]] = {
            machine.Wait: self._nothing, machine.Confirm: self._confirm_list, machine.Report: self._report_exit,
            machine.Sync: self._pull, machine.Start: self._release, machine.Rejoin: self._rejoin,
            RoundEnd: self._end, machine.Fail: self._fail,
        }

    @property
    def state(self) -> Member:
        return self._state()

    async def carry_out(self, action: MemberAction, event: MemberEvent) -> bool:
        """Carry out `action`, which `event` led to; whether it ends this stream's part
        (Start, Rejoin, RoundEnd). Fail raises its error."""
        return await self._carry_out[type(action)](action, event)

    async def close(self) -> None:
        if self._beats is not None:
            self._beats.cancel()
        self._beats = None
        self.progress.stop_sending()
        await self._sync.cancel()
        await self.progress.close()
        if self._errors is not None:
            self._errors.close()
        if self.session is not None:
            await self.session.close()
            self.session = None

    async def _nothing(self, action: machine.Wait, event: MemberEvent) -> bool:
        return False

    async def _confirm_list(self, action: machine.Confirm, event: MemberEvent) -> bool:
        for warning in action.warnings:
            log.warning("%s", warning)
        await self._confirm(action.membership)
        return False

    async def _pull(self, action: machine.Sync, event: MemberEvent) -> bool:
        """Pulled while the coordinator is still read."""
        assert self.session is not None
        self._sync.pull(action.order, self.session, self._seat.me(), self._config.job,
                        self.state.round or self._round, self._seat.keys)
        return False

    async def _release(self, action: machine.Start, event: MemberEvent) -> bool:
        self._start(action.delay, self.state.membership)
        return True

    async def _rejoin(self, action: machine.Rejoin, event: MemberEvent) -> bool:
        if action.suspect is not None:
            self._suspect(action.suspect)
        if action.distrust is not None:
            self._views.distrust(action.distrust, getattr(event, "reason", ""))
        return True

    async def _end(self, action: RoundEnd, event: MemberEvent) -> bool:
        return True

    async def _fail(self, action: machine.Fail, event: MemberEvent) -> bool:
        raise action.error

    async def _heartbeats(self, session: JoinSession) -> None:
        """Proves this node alive to the coordinator from the freeze on (before, a silent
        peer is HTTP/2 keepalive's to drop); a failure shows up on the read side."""
        try:
            while True:
                await asyncio.sleep(self.state.heartbeat_interval)
                await session.heartbeat()
        except SessionLost:
            pass

    async def _confirm(self, membership: Membership) -> None:
        """Arm the command with its environment, then confirm the list by its digest."""
        node_id = self._seat.me().node_id
        env = self.environment(membership)
        log.info(
            "round %d frozen: worker %d of %d, coordinator %s, TF_CONFIG=%s",
            membership.round, membership.rank_of(node_id), membership.world_size,
            membership.coordinator.describe(), env["TF_CONFIG"],
        )
        log_devices(membership, env, self._seat.fingerprint, self._config.gpus, self._seat.data_interface)
        if self.state.liveness_timeout != self._config.liveness_timeout:
            log.info("the coordinator's liveness timeout of %g s rules this round (this node's: %g s)",
                     self.state.liveness_timeout, self._config.liveness_timeout)
        assert self.session is not None
        # The coordinator watches every member from the freeze on: a scan of a big
        # --sync-dir (seconds per GB the first time) must not look like a frozen node.
        if self._beats is None and not self.state.joined_to_self:
            self._beats = asyncio.create_task(self._heartbeats(self.session), name="heartbeats")
        await self._launcher.arm(self._config.command, env)
        self._launcher.record_output(membership.round, membership.rank_of(node_id))
        self._enter(Phase.FROZEN, membership)
        summary = await self._scan()
        try:
            await self.session.ready(membership.digest, summary)
        except SessionLost:
            pass  # the read side reports the lost coordinator

    def environment(self, membership: Membership) -> dict[str, str]:
        """The variables this node's command gets for the round of `membership`, on top of
        the daemon's environment: computed here only, however the command is started."""
        node_id, fingerprint = self._seat.me().node_id, self._seat.fingerprint
        return command_environment(
            membership, node_id, os.environ, fingerprint.gpu_ids if fingerprint else (), self._seat.data_interface,
            {PROGRESS_VARIABLE: str(self.progress.path(node_id)), ERROR_FILE_VARIABLE: str(self._error_file(node_id).path)},
        )

    def _error_file(self, node_id: str) -> ErrorFile:
        if self._errors is None:
            self._errors = ErrorFile(self._seat.progress_dir, node_id)
        return self._errors

    async def _report_exit(self, report: machine.Report, event: MemberEvent) -> bool:
        await self._report(report)
        return False

    async def _report(self, report: machine.Report) -> None:
        failed = report.exit_code != 0 or bool(report.reason)
        if failed:
            error = self._errors.read() if self._errors is not None else None
            self.failure = describe_failure(self._seat.me(), self.state.membership, report, self._launcher, error)
            log_failure(self.failure)
        else:
            log.info("command exited with code 0")
        self._enter(Phase.FINISHED, self.state.membership)
        summary = None if failed else await self._scan()
        assert self.session is not None
        try:
            await self.session.finished(report.exit_code, report.reason, summary, self.failure)
        except SessionLost:
            pass  # the read side reports the lost coordinator

    async def _scan(self) -> Optional[SyncSummary]:
        """--sync-dir: this node's copy, for the coordinator to compare."""
        return await self._sync.scan()

    def _start(self, delay: float, membership: Optional[Membership]) -> None:
        log.debug("released: starting in %.1f ms", delay * 1e3)
        self._seat.release_tf_port()  # the command binds the TF port next
        # The gate process waits until then on its own: this daemon stays out of the way
        # of the start instant.
        self._launcher.fire(time.time() + delay, self.state.liveness_timeout)
        self._enter(Phase.RUNNING, membership)
        assert self.session is not None
        self.progress.start(self.session)

    def _suspect(self, peer: Peer) -> None:
        """The confirmer then asks its Status again, as for any unconfirmed advert, and its
        answer is what makes it a candidate again (`PeerView.confirm`). A suspicion
        never lapses by itself, since a node killed without a goodbye stays in mDNS caches
        for many minutes and each try of it costs every waiting peer seconds."""
        log.warning(
            "cannot reach the coordinator %s for %.0f s: it may have stopped without a goodbye; "
            "electing without it until it answers", peer.describe(), self._config.timings.suspect_after,
        )
        self._views.update(self._views.view.suspect(peer.node_id, math.inf))


def vouched(state: Member) -> list[str]:
    """Whom the coordinator's traffic proves alive (`core.heard`): the coordinator, and the
    members of its round, as it ends the round when one of them is silent."""
    found = [state.target.node_id] if state.target else []
    return found + [p.node_id for p in state.membership.members] if state.membership else found
