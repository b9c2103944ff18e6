"""One node: startup, a loop over rounds, shutdown.

    startup    address -> TF port reservation -> gRPC server -> advert + discovery -> ready
               (rendezvous.daemon.resources: the endpoint, and the view holder beside it)
    rounds     join the coordinator the view names until released, run the command until
               the round ends (rendezvous.daemon.joiner); again after a failed round, if allowed
    shutdown   in order: command, Join stream, runtime file, gRPC server, mDNS goodbye

Every change of phase or of the peers seen goes to one `Reporter` as a `NodeStatus`, which
also answers the Status RPC. Discovery, the Join session, the launcher and the endpoint's
builder are passed in, so tests can replace any of them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path
from typing import Callable, NoReturn, Optional, Union

from ..config.join import JoinConfig, discovery_mode
from ..coordinator import JoinSession, SessionLost
from ..core.advert import Phase
from ..core.failure import Failure
from ..core.manifest import PreviousChief
from ..core.preflight import Fingerprint
from ..core.after_round import Next, after_round
from ..core.member import MemberPhase, RoundEnd
from ..core.round_state import ROUND_FAILED
from ..core.seeds import parse_seeds
from ..core.status import NodeStatus
from ..core.stopping import StopOrder
from ..core.tf_config import Membership
from ..core.view import PeerView
from ..discovery import DiscoveryFactory
from ..discovery.combined import discovery_factory
from ..errors import JobFailed, JobStopped, RendezvousTimeout
from ..host.fingerprint import take_fingerprint
from ..launch import firstgate
from ..launch.launcher import Launcher
from ..launch.output import OutputSettings
from ..observe.metrics import start_metrics
from ..observe.report import Reporter
from .commandside import log_failure
from .joiner import Joiner, SessionFactory
from .presence import Presence
from .resources import Binder, Endpoint, bind_resources, job_policy
from .spare import Spare
from .signals import StopSignals, Stopped, TimedOut
from .viewholder import ViewHolder

log = logging.getLogger(__name__)


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
        launcher: Optional[Callable[[], Launcher]] = None,
        bind: Binder = bind_resources,
        expect_source: str = "--expect",  # where config.expect came from, for the messages that name it
        first_launcher: Optional[Launcher] = None,
    ) -> None:
        self.config = config
        self._expect_source = expect_source
        self.node_id = node_id or new_node_id()
        self.reporter = reporter or Reporter()
        self._make_discovery = discovery or discovery_factory(discovery_mode(config), parse_seeds(config.peers),
                                                              config.timings)
        self._connect = connect
        self._make_launcher = launcher or (lambda: Launcher(config.stop_grace, config.abort_grace,
                                                            output=output_settings(config)))
        self._bind = bind
        self.launcher = first_launcher or self._make_launcher()  # the first round's
        self._spare = Spare(self._make_launcher, config.prewarm, config.command)  # the next round's, warm
        self.signals = StopSignals(self._report_stopping, lambda: self.launcher.kill())
        self._policy = job_policy(config)
        self._phase = Phase.WAITING
        self._membership: Optional[Membership] = None
        self._joiner: Optional[Joiner] = None
        self._stopping_reported = False
        self._ending: Optional[str] = None  # why the round ended, while its command stops
        self._rendezvous_seconds: Optional[float] = None
        self._failure: Optional[Failure] = None  # the last command failure heard of, of a round before
        # The chief of the last round whose commands started: its --sync-dir is the real one.
        self._previous_chief: Optional[PreviousChief] = None
        self._endpoint: Endpoint  # these three from startup on
        self.views: ViewHolder
        self._presence: Presence

    @property
    def view(self) -> PeerView:
        return self.views.view

    def status(self) -> NodeStatus:
        """What this node is doing now, for the reporters and the Status RPC."""
        now, view, joiner = time.monotonic(), self.view, self._joiner
        ages = self.views.heard.silent(now, self.views.silent_after)
        present, suspected = view.present(now), view.suspected(now)
        return NodeStatus(
            node=view.me.peer,
            job=self.config.job,
            expect=self.config.expect,
            phase=self._phase,
            # silent first: NodeStatus leaves silent peers out of seen and unreachable
            seen=tuple(present),
            silent=tuple((p, ages[p.node_id]) for p in [*present, *suspected] if p.node_id in ages),
            unreachable=tuple(suspected),
            following=view.target(now).peer if self._membership is None else None,
            membership=self._membership,
            round=self._membership.round if self._membership else view.me.round,
            trainer_pid=self.launcher.pid,
            trainer_uptime=self.launcher.uptime(now),
            **self._warm_status(),
            exit_code=joiner.state.exit_code if joiner else None,
            fingerprint=self._endpoint.fingerprint,
            preflight=joiner.state.preflight if joiner else (),
            tensorflow={a.node_id: a.tensorflow for a in view.adverts if a.tensorflow},
            gpus={a.node_id: a.gpus for a in view.adverts if a.gpus},
            progress=joiner.progress if joiner else None,
            rendezvous_seconds=self._rendezvous_seconds,
            hint=self._presence.waiting(view) if self._phase is Phase.WAITING else None,
            failure=(joiner.failure if joiner else None) or self._failure,
            ending=self._ending,
        )

    def _warm_status(self) -> dict:
        """The warm interpreter waiting for a round: the next round's spare, or this round's
        before its release."""
        found = self._spare.memory() or self.launcher.warm_memory()
        return {"warm_pid": found[0], "warm_rss": found[1]} if found else {}

    def _report(self) -> None:
        self.reporter.update(self.status())

    def _enter(self, phase: Phase, membership: Optional[Membership] = None) -> None:
        self._phase = phase
        self._membership = membership or self._membership
        self._report()

    def _report_stopping(self) -> None:
        if not self._stopping_reported:
            self._stopping_reported = True
            self.reporter.stopping()

    # -- startup, the rounds, shutdown ----------------------------------------------------

    async def run(self) -> int:
        """Rendezvous, run the command, and return its exit code."""
        self.signals.install()
        try:
            fingerprint = await asyncio.to_thread(take_fingerprint, self.config)
            self._endpoint, self.views = self._bind(
                self.config, self.node_id, self._make_discovery, lambda event: self._presence.on_discovery(event),
                self.status, self._report, fingerprint,
            )
            self._presence = Presence(self.config, self._endpoint, self.views, lambda: self._phase, self._frozen,
                                      self._report, self._expect_source)
            metrics = None
            try:
                metrics = start_metrics(self.config.metrics_port, str(self._endpoint.me.address), self.status,
                                        self.config.timings.metrics_read_timeout)
                await self._startup()
                return await self._main_loop()
            finally:
                await self._shutdown()
                if metrics is not None:
                    metrics.close()
        finally:
            self.signals.remove()

    async def _startup(self) -> None:
        await self._endpoint.start(self.config)
        self._presence.start()
        self.reporter.ready()
        self._report()
        sync = self._endpoint.sync
        self._previous_chief = sync.load_chief() if sync else None

    async def _main_loop(self) -> int:
        """Round after round until one completes, a stop signal comes, or a failed round
        is the last; the exit code."""
        number = 1
        while True:
            joiner = self._joiner = Joiner(
                self.config, self._endpoint.seat(), self.views, self.launcher, self._connect, self._enter, number,
                self._previous_chief, on_progress=self._on_progress, expect_source=self._expect_source,
            )
            end = await self._round(joiner)
            if isinstance(end, int):
                return end
            if end.failure is not None and end.failure.node_id != self.node_id:  # its own is logged already
                log_failure(end.failure)
            self._failure = joiner.failure or end.failure or self._failure
            self._ending = None if end.completed else end.reason
            self._report()  # the preflight may have refused the round; an abort shows as such
            played = joiner.state.round or number
            refused = bool(joiner.state.preflight) and not joiner.state.frozen
            # A stop is decided before the command ends (it sets the grace), the rest after it.
            if after_round(end, played, self._policy, signalled=False, refused=refused) is Next.STOPPED:
                assert end.stop is not None
                await self._stopped(joiner, end.stop)
            code = await self._end_command(joiner, end)
            await joiner.close()
            step = after_round(end, played, self._policy, signalled=self.signals.signum is not None, refused=refused)
            if step is Next.COMPLETED:
                log.info("job %r completed in round %d: %s", self.config.job, played, end.reason)
                self._enter(Phase.FINISHED)
                return 0
            if step is Next.SIGNALLED:  # stopped while the round ended: no round follows
                log.info("round %d ended: %s; stopping as asked", played, end.reason)
                return code if self.launcher.pid else 128 + (self.signals.signum or signal.SIGTERM)
            if step is Next.REFUSED:  # refused: say why first of all
                raise JobFailed(f"job {self.config.job!r} was refused before the start: {joiner.state.preflight[0]}",
                                end.exit_code)
            if step is Next.FAILED:
                limit = self.config.max_restarts + 1
                why = f"failed in round {played} of at most {limit}, no restart follows: {end.reason}"
                raise JobFailed(f"job {self.config.job!r} {why}", end.exit_code)
            log.warning("round %d ended: %s; round %d starts", played, end.reason, played + 1)
            number = played + 1
            self._next_round(number)

    async def _end_command(self, joiner: Joiner, end: RoundEnd) -> int:
        """SIGTERM to the round's command, SIGKILL after --stop-grace (--abort-grace when the
        round failed); its exit code. A `rendezvous stop` that this node takes as the
        coordinator meanwhile ends the job here too, at once, with the stop's grace: the
        members back for the next round have been told already."""
        if end.completed:
            return await self.launcher.stop(self.config.stop_grace)
        ending = asyncio.ensure_future(self.launcher.stop(self.config.abort_grace))
        taken = asyncio.ensure_future(self._endpoint.service.stop_taken())
        try:
            done, _ = await asyncio.wait((ending, taken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            taken.cancel()
        if taken in done and ending not in done:
            try:
                await self._stopped(joiner, taken.result())
            finally:
                ending.cancel()
        return await ending

    async def _stopped(self, joiner: Joiner, order: StopOrder) -> NoReturn:
        """`rendezvous stop` ended the job: the command gets the stop's grace (or this node's
        --stop-grace) between SIGTERM and SIGKILL, and `join` exits with its own status."""
        grace = self.config.stop_grace if order.grace is None else order.grace
        log.warning("job %r stopped by %s: stopping the command (SIGTERM, SIGKILL after %g s); no restart follows",
                    self.config.job, order.describe(), grace)
        code = await self.launcher.stop(grace)
        await joiner.close()
        self._enter(Phase.FINISHED)
        if self._endpoint.service.stopped_between_rounds:
            linger = self.config.abort_grace + self.config.timings.stop_linger
            log.info("answering the members that come back for the next round with the stop for %g s", linger)
            await asyncio.sleep(linger)
        ended = f"its command ended with {code}" if self.launcher.started_at is not None else "its command had not started"
        raise JobStopped(f"job {self.config.job!r} was stopped by {order.describe()}; {ended}")

    async def _round(self, joiner: Joiner) -> Union[int, RoundEnd]:
        """One round: rendezvous, run the command until the round ends; that end, or the
        exit code when a stop signal came."""
        began = time.monotonic()
        try:
            # --timeout is for the peers to come: a round frozen before it passes goes on to
            # its start (a --sync-dir copy may take minutes), watched by the liveness timeout.
            end = await self.signals.until_stopped(
                joiner.rendezvous(), self.config.timeout, lambda: not joiner.state.frozen)
            if end is not None:
                return end
            self._rendezvous_seconds = time.monotonic() - began
            # The chief of this round: its --sync-dir is the real one next round.
            self._previous_chief = PreviousChief.of(joiner.state.membership, time.time_ns())  # type: ignore[arg-type]
            if self._endpoint.sync is not None:
                self._endpoint.sync.remember_chief(self._previous_chief)
            self._advertise(Phase.RUNNING)
            spare = asyncio.get_running_loop().call_later(self.config.timings.spare_after, self._spare.warm)
            try:
                return await self.signals.until_stopped(joiner.supervise(), first=lambda: self._say_stopped(joiner))
            finally:
                spare.cancel()
        except Stopped:
            code = await self.launcher.stop(self.config.stop_grace)
            return code if self.launcher.pid else 128 + (self.signals.signum or signal.SIGTERM)
        except TimedOut:
            raise RendezvousTimeout(self._presence.unformed(self.config.timeout or 0.0)) from None

    async def _say_stopped(self, joiner: Joiner) -> None:
        """A stop signal while the command ran: the coordinator hears from this node that
        it was stopped (systemctl stop), rather than that its daemon was lost, and tells
        the others so; a coordinator's own node tells its members the same way."""
        session, name = joiner.session, signal.Signals(self.signals.signum or signal.SIGTERM).name
        if session is None or joiner.state.phase is not MemberPhase.RELEASED:
            return
        try:
            await asyncio.wait_for(session.finished(ROUND_FAILED, f"its daemon was stopped ({name})"),
                                   self.config.timings.keepalive)
        except (SessionLost, asyncio.TimeoutError, asyncio.InvalidStateError):
            log.debug("could not tell the coordinator that this node stops")

    def _on_progress(self, _progress: object) -> None:
        self._report()
        if self._phase is Phase.RUNNING:
            self._spare.warm()

    def _next_round(self, number: int) -> None:
        """A fresh launcher (the spare that warmed meanwhile, if any) and the TF port held
        again, for the same advert."""
        self.launcher = self._spare.take() or self._make_launcher()
        self._membership = None
        self._ending = None
        self._endpoint.hold_tf_port()
        self._enter(Phase.WAITING)
        self._advertise(Phase.WAITING, number)

    def _advertise(self, phase: Phase, round: Optional[int] = None) -> None:
        membership = self._membership
        round = round or (membership.round if membership else self.view.me.round)
        self._presence.advertise(phase, round, membership.coordinator.endpoint if membership else None,
                                 gpus_shown(self._endpoint.fingerprint, membership, self._phase))

    def _frozen(self) -> bool:
        """Whether this node's round is frozen, or past that: it keeps its addresses."""
        return self._phase is not Phase.WAITING or (self._joiner is not None and self._joiner.state.frozen)

    async def _shutdown(self) -> None:
        self._report_stopping()
        self._presence.close()
        self.views.close()
        await self._endpoint.close(
            ("stop the command", lambda: self.launcher.stop(self.config.stop_grace)),
            ("end the warm spare", self._spare.stop),
            ("close the Join stream", self._joiner.close if self._joiner else None),
        )


def gpus_shown(fingerprint: Optional[Fingerprint], membership: Optional[Membership], phase: Phase) -> Optional[str]:
    """The advert's GPUs (`rendezvous peers`, `status`): with a count --gpus chose for the
    running round, which of them the command uses."""
    if fingerprint is None:
        return None
    if membership is None or membership.gpus is None or phase is Phase.WAITING:
        return fingerprint.describe_gpus()
    return f"{fingerprint.describe_gpus()}, using {','.join(fingerprint.gpu_ids[:membership.gpus]) or 'none'}"


def output_settings(config: JoinConfig) -> OutputSettings:
    """Where the command's output goes besides the terminal (--output-dir and its limits)."""
    directory = Path(config.output_dir).expanduser() if config.output_dir else None
    return OutputSettings(directory, config.job, config.output_max_bytes, config.output_keep_rounds)


async def run_node(
    config: JoinConfig, reporter: Optional[Reporter] = None, expect_source: str = "--expect",
    spare: Optional[firstgate.Spare] = None,
) -> int:
    """Run a node; `expect_source` says where config.expect came from, `spare` is the first
    round's gate, forked as the process started."""
    first = Launcher(config.stop_grace, config.abort_grace, output=output_settings(config), spare=spare)
    return await Node(config, reporter=reporter, expect_source=expect_source, first_launcher=first).run()
