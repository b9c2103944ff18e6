"""Wiring: one node's discovery, coordinator service, Join sessions and launcher on one loop.

    startup    address -> TF port reservation -> gRPC server -> advert + discovery -> ready
               (rendezvous.daemon.resources)
    rendezvous join the coordinator the view names until released (rendezvous.daemon.joiner)
    run        the command, until it exits or a stop signal comes
    shutdown   in order: command, Join stream, runtime file, gRPC server, mDNS goodbye

Every change of phase or of the peers seen goes to one `Reporter` as a `NodeStatus`; the
same snapshot answers the Status RPC. Discovery, the Join session and the launcher are
passed in, so tests can replace any of them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Any, Awaitable, Callable, Coroutine, Optional, TypeVar, Union

from ..config.options import JoinConfig, discovery_mode
from ..coordinator import JoinSession
from ..core.advert import Phase
from ..core.manifest import PreviousChief
from ..core.record import replace
from ..core.status import NodeStatus
from ..core.tf_config import Membership
from ..core.family import Family, left_out_message, switch_message, switched
from ..core.view import PeerView
from ..core.member import RoundEnd, is_last_round
from ..core.seeds import lonely_hint, parse_seeds
from ..discovery import DiscoveryEvent, DiscoveryFactory, Gone, Seen
from ..discovery.combined import discovery_factory
from ..errors import JobFailed, RendezvousTimeout
from ..host.fingerprint import take_fingerprint
from .joiner import Joiner
from ..launch.launcher import Launcher
from ..observe.metrics import start_metrics
from ..observe.report import Reporter
from .resources import Resources, SessionFactory, bind_resources

log = logging.getLogger(__name__)

T = TypeVar("T")

# SIGHUP too: a closed terminal or ssh session must not orphan the command, which runs in
# a process group of its own and so gets no SIGHUP from the terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stopped(Exception):
    """A stop signal arrived while waiting."""


def new_node_id() -> str:
    """Random per process: never the host name, which cloned disk images share."""
    return os.urandom(6).hex()


class Node:
    def __init__(
        self,
        config: JoinConfig,
        node_id: Optional[str] = None,
        reporter: Optional[Reporter] = None,
        discovery: Optional[DiscoveryFactory] = None,
        connect: SessionFactory = JoinSession,
        launcher: Callable[[], Launcher] = Launcher,
    ) -> None:
        self.config = config
        self.node_id = node_id or new_node_id()
        self.reporter = reporter or Reporter()
        self._make_discovery = discovery or discovery_factory(
            discovery_mode(config), parse_seeds(config.peers), config.timings
        )
        self._connect = connect
        self._make_launcher = launcher
        self.launcher = launcher()
        self._phase = Phase.WAITING
        self._membership: Optional[Membership] = None
        self._joiner: Optional[Joiner] = None
        self._stopping = asyncio.Event()
        self._stop_signal: Optional[int] = None
        self._stopping_reported = False
        self._tasks: set[asyncio.Task] = set()
        self._hint: Optional[str] = None
        self._left_out: set[str] = set()  # nodes of the job that cannot use its IP family, named once
        self._res: Resources
        self._rendezvous_seconds: Optional[float] = None
        # The chief of the last round whose commands started: its --sync-dir is the real one.
        self._previous_chief: Optional[PreviousChief] = None

    @property
    def view(self) -> PeerView:
        return self._res.view

    def status(self) -> NodeStatus:
        """What this node is doing now, for the reporters and the Status RPC."""
        now = time.monotonic()
        return NodeStatus(
            node=self.view.me.peer,
            job=self.config.job,
            expect=self.config.expect,
            phase=self._phase,
            seen=tuple(self.view.present(now)),
            unreachable=tuple(self.view.suspected(now)),
            following=self.view.target(now).peer if self._membership is None else None,
            membership=self._membership,
            round=self._membership.round if self._membership else self.view.me.round,
            trainer_pid=self.launcher.pid,
            trainer_uptime=self.launcher.uptime(now),
            exit_code=self._joiner.state.exit_code if self._joiner else None,
            fingerprint=self._res.fingerprint,
            preflight=self._joiner.state.preflight if self._joiner else (),
            tensorflow={a.node_id: a.tensorflow for a in self.view.adverts if a.tensorflow},
            gpus={a.node_id: a.gpus for a in self.view.adverts if a.gpus},
            progress=self._joiner.progress if self._joiner else None,
            rendezvous_seconds=self._rendezvous_seconds,
            hint=self._hint if self._phase is Phase.WAITING and not self.view.others else None,
        )

    def _enter(self, phase: Phase, membership: Optional[Membership] = None) -> None:
        self._phase = phase
        self._membership = membership or self._membership
        self.reporter.update(self.status())

    # -- lifecycle -----------------------------------------------------------------

    async def run(self) -> int:
        """Rendezvous, run the command, and return its exit code."""
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            fingerprint = await asyncio.to_thread(take_fingerprint, self.config)
            self._res = bind_resources(
                self.config, self.node_id, self._make_discovery, self._on_discovery, self.status,
                lambda: self.reporter.update(self.status()), fingerprint,
            )
            metrics = None
            try:
                metrics = start_metrics(self.config.metrics_port, str(self._res.me.address), self.status)
                await self._res.start(self.config)
                self._spawn(self._hint_when_alone(), "lonely-hint")
                self._spawn(self._ask_while_incomplete(), "ask-again")
                self.reporter.ready()
                self.reporter.update(self.status())
                self._previous_chief = self._res.sync.load_chief() if self._res.sync else None
                return await self._rounds()
            finally:
                await self._shutdown()
                if metrics is not None:
                    metrics.close()
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self._stop_signal is not None:
            if signum == signal.SIGINT:
                log.warning("second %s: killing the command now", name)
                self.launcher.kill()
            return
        log.info("received %s: stopping", name)
        self._stop_signal = signum
        self._stopping.set()
        self._report_stopping()  # now: stopping the command can take its whole grace period

    def _report_stopping(self) -> None:
        if not self._stopping_reported:
            self._stopping_reported = True
            self.reporter.stopping()

    async def _rounds(self) -> int:
        """Round after round until one completes, a stop signal comes, or a failed round
        is the last; the exit code."""
        number = 1
        while True:
            end = await self._round(number)
            if isinstance(end, int):
                return end
            self.reporter.update(self.status())  # the preflight may have refused the round
            await self.launcher.stop(self.config.stop_grace if end.completed else self.config.abort_grace)
            await self._joiner.close()  # type: ignore[union-attr]  # set by _round
            played = self._joiner.state.round or number  # type: ignore[union-attr]
            if end.completed:
                log.info("job %r completed in round %d: %s", self.config.job, played, end.reason)
                self._enter(Phase.FINISHED)
                return 0
            self._refused_by_preflight(end)
            if is_last_round(end, played, self._res.policy):
                limit = self.config.max_restarts + 1
                why = f"failed in round {played} of at most {limit}, no restart follows: {end.reason}"
                raise JobFailed(f"job {self.config.job!r} {why}", end.exit_code)
            log.warning("round %d ended: %s; round %d starts", played, end.reason, played + 1)
            number = played + 1
            self._next_round(number)

    def _refused_by_preflight(self, end: RoundEnd) -> None:
        """A round the preflight refused ends the job, saying why first of all."""
        state = self._joiner.state  # type: ignore[union-attr]  # set by _round
        if state.preflight and not state.frozen:
            raise JobFailed(f"job {self.config.job!r} was refused before the start: {state.preflight[0]}", end.exit_code)

    async def _round(self, number: int) -> Union[int, RoundEnd]:
        """One round: rendezvous, run the command until the round ends; that end, or the
        exit code when a stop signal came."""
        self._joiner = Joiner(
            self.config, self._res, self.launcher, self._connect, self._enter, number, self._previous_chief,
            on_progress=lambda progress: self.reporter.update(self.status()),
        )
        began = time.monotonic()
        try:
            # --timeout is for the peers to come: a round frozen before it passes goes on to
            # its start (a --sync-dir copy may take minutes), watched by the liveness timeout.
            joiner = self._joiner
            end = await self._until_stopped(joiner.rendezvous(), self.config.timeout, lambda: not joiner.state.frozen)
            if end is not None:
                return end
            self._rendezvous_seconds = time.monotonic() - began
            self._started(self._joiner.state.membership)  # type: ignore[arg-type]
            self._advertise(Phase.RUNNING)
            end = await self._until_stopped(self._joiner.supervise())
        except _Stopped:
            code = await self.launcher.stop(self.config.stop_grace)
            return code if self.launcher.pid else 128 + (self._stop_signal or signal.SIGTERM)
        return end

    def _started(self, membership: Membership) -> None:
        """Remember the chief of this round: its --sync-dir is the real one next round."""
        self._previous_chief = PreviousChief.of(membership, time.time_ns())
        if self._res.sync is not None:
            self._res.sync.remember_chief(self._previous_chief)

    def _next_round(self, number: int) -> None:
        """A fresh launcher and the TF port held again, for the same advert."""
        self.launcher = self._make_launcher()
        self._membership = None
        self._res.hold_tf_port()
        self._enter(Phase.WAITING)
        self._advertise(Phase.WAITING, number)

    async def _shutdown(self) -> None:
        self._report_stopping()
        for task in self._tasks:
            task.cancel()
        await self._res.close(
            ("stop the command", lambda: self.launcher.stop(self.config.stop_grace)),
            ("close the Join stream", self._joiner.close if self._joiner else None),
        )

    async def _until_stopped(
        self, awaitable: Awaitable[T], timeout: Optional[float] = None, waiting: Callable[[], bool] = lambda: True,
    ) -> T:
        """Await `awaitable` unless a stop signal comes first, or the timeout while
        `waiting()` still holds at its end."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done and not waiting():
                done, _ = await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if work in done:
            return work.result()
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        if stop in done:
            raise _Stopped()
        raise RendezvousTimeout(
            f"no rendezvous within --timeout {timeout:g}s: {self.view.missing_summary()}. "
            "Check that every node runs the same --job, --expect and --token-file and that "
            "multicast (UDP 5353) passes between them, or give seeds with --peer"
        )

    # -- discovery -----------------------------------------------------------------

    def _on_discovery(self, event: DiscoveryEvent) -> None:
        if isinstance(event, Gone):
            view = self.view.gone(event.node_id)
        elif isinstance(event, Seen):
            view = self.view.seen(event.advert)
        else:
            view = self.view.hinted(event.advert)
            if view is self.view:
                return  # every Status request of a known peer carries one: nothing new
        self._name_left_out(view.family)
        self._res.update_view(self._switch_family(view))

    def _name_left_out(self, family: Family) -> None:
        """Say once of each member of the job that cannot use its IP family that it is out."""
        for member in family.left_out:
            if member.node_id not in self._left_out:
                self._left_out.add(member.node_id)
                log.warning("%s", left_out_message(member, self.config.job, family.version))

    def _switch_family(self, view: PeerView) -> PeerView:
        """The view with this node on its address of the job's IP family, when it advertises
        the other one; only before the freeze: a frozen round keeps its addresses."""
        frozen = self._phase is not Phase.WAITING or (self._joiner is not None and self._joiner.state.frozen)
        moved = None if frozen else switched(view.me, view.family)
        if moved is None:
            return view
        log.warning("%s", switch_message(moved, self.config.job, view.adverts))
        self._res.switch(moved.peer)
        self._spawn(self._update_advert(), "advertise-family")
        return view.with_me(moved)

    def _advertise(self, phase: Phase, round: Optional[int] = None) -> None:
        coordinator = self._membership.coordinator.endpoint if self._membership else None
        round = round or (self._membership.round if self._membership else self.view.me.round)
        advert = replace(self.view.me.with_phase(phase, coordinator), round=round)
        self._res.view = self.view.with_me(advert)
        self._spawn(self._update_advert(), f"advertise-{phase.value}")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """A task of this node, cancelled at shutdown."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _hint_when_alone(self) -> None:
        """Nobody seen for a while: say why that may be, once, in the log and the progress."""
        seconds = self.config.timings.lonely_hint
        await asyncio.sleep(seconds)
        if self.view.others or self._phase is not Phase.WAITING:
            return
        mode = discovery_mode(self.config)
        seeds = parse_seeds(self.config.peers) if mode != "mdns" else ()
        self._hint = lonely_hint(seconds, seeds, multicast=mode != "unicast")
        log.warning("%s", self._hint)
        self.reporter.update(self.status())

    async def _ask_while_incomplete(self) -> None:
        """While this node waits without having seen its whole job, have discovery ask
        again, twice as seldom each time: what was lost is not left to the caches' expiry."""
        first = interval = self.config.timings.ask_again
        while interval > 0:
            await asyncio.sleep(interval)
            if self._phase is Phase.WAITING and not self.view.complete:
                self._res.discovery.ask_again()
            interval = min(2 * interval, 16 * first)

    async def _update_advert(self) -> None:
        """Announce this node's advert as it is after the delay: changes made meanwhile
        (a phase, a switch of IP family and back) go out as one, never in the wrong order."""
        await asyncio.sleep(self.config.timings.advertise_delay)
        await self._res.discovery.update(self.view.me)


async def run_node(config: JoinConfig, reporter: Optional[Reporter] = None) -> int:
    return await Node(config, reporter=reporter).run()
