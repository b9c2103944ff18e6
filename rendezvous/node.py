"""Wiring: one node's discovery, coordinator service, Join client and launcher on one loop.

    address -> TF port reservation -> gRPC server -> mDNS advert + browser -> ready
            -> rendezvous (join the lowest peer until released) -> command
    shutdown, in order: command, Join stream, gRPC server, mDNS goodbye, zeroconf close.

Every change of phase or of the peers seen goes to one `Reporter` as a `NodeStatus`; the
same snapshot answers the Status RPC.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import secrets
import signal
import time
from typing import Awaitable, Callable, Optional, TypeVar

from . import runtime
from .address import choose_address
from .config import JoinConfig
from .coordinator import (
    Aborted,
    CoordinatorService,
    Frozen,
    JoinSession,
    Redirected,
    Rejected,
    Released,
    SessionLost,
    Waiting,
    bind_server,
    serve,
)
from .core import round as rounds
from .core.advert import Advert, Phase
from .core.peer import Peer, describe_peers
from .core.status import NodeStatus
from .core.tf_config import Membership, launch_environment
from .core.view import PeerView, Target
from .discovery import Discovery, DiscoveryEvent, Gone, Seen
from .errors import AddressError, CoordinatorError, MembershipError, RendezvousTimeout
from .launcher import Launcher, PortReservation, check_command
from .report import Reporter

log = logging.getLogger(__name__)

T = TypeVar("T")

ADVERTISE_RUNNING_DELAY = 0.5

# SIGHUP too: a closed terminal or ssh session must not orphan the command, which runs in
# a process group of its own and so gets no SIGHUP from the terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Failing to reach the coordinator this long makes it a suspect, left out of the election
# for SUSPECT_FOR seconds.
SUSPECT_AFTER = 3.0
SUSPECT_FOR = 30.0


class _Stopped(Exception):
    """A stop signal arrived while waiting."""


def new_node_id() -> str:
    """Random per process: never the host name, which cloned disk images share."""
    return secrets.token_hex(6)


class Node:
    def __init__(self, config: JoinConfig, node_id: Optional[str] = None, reporter: Optional[Reporter] = None) -> None:
        self.config = config
        self.node_id = node_id or new_node_id()
        self.launcher = Launcher()
        self.reporter = reporter or Reporter()
        self._phase = Phase.WAITING
        self._membership: Optional[Membership] = None
        self._exit_code: Optional[int] = None
        self._stopping_reported = False
        self._view: Optional[PeerView] = None
        self._service: Optional[CoordinatorService] = None
        self._discovery: Optional[Discovery] = None
        self._view_changed = asyncio.Event()
        self._stopping = asyncio.Event()
        self._stop_signal: Optional[int] = None
        self._tasks: set[asyncio.Task] = set()
        self._reservation: Optional[PortReservation] = None

    @property
    def view(self) -> PeerView:
        assert self._view is not None
        return self._view

    def status(self) -> NodeStatus:
        """What this node is doing now, for the reporters and the Status RPC."""
        return NodeStatus(
            node=self.view.me.peer,
            job=self.config.job,
            expect=self.config.expect,
            phase=self._phase,
            seen=tuple(self.view.peers),
            membership=self._membership,
            trainer_pid=self.launcher.pid,
            trainer_uptime=self.launcher.uptime(time.monotonic()),
            exit_code=self._exit_code,
        )

    def _report(self) -> None:
        self.reporter.update(self.status())

    def _enter(self, phase: Phase) -> None:
        self._phase = phase
        self._report()

    # -- lifecycle -----------------------------------------------------------------

    async def run(self) -> int:
        """Rendezvous, run the command, and return its exit code."""
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)
        try:
            return await self._run()
        finally:
            self.reporter.close()
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

    async def _run(self) -> int:
        config = self.config
        choice = choose_address(config.address, config.interface)
        address = choice.address
        log.info("node %s uses %s: %s", self.node_id, address, choice.reason)
        check_command(config.command)
        self._reservation = reservation = PortReservation(config.tf_port, ipv6=address.version == 6)
        host = f"[{address}]" if address.version == 6 else str(address)
        try:
            server, port = bind_server(host, config.port)
        except OSError as exc:
            reservation.release()
            raise AddressError(f"--port {config.port}: {exc}") from None
        me = Peer(node_id=self.node_id, address=address, port=port, tf_port=reservation.port)
        self._view = PeerView(Advert(peer=me, job=config.job, expect=config.expect))
        self._service = CoordinatorService(
            me, config.job, config.expect, target=lambda: self.view.target(), status=self.status
        )
        session: Optional[JoinSession] = None
        health = None
        registered = None
        try:
            health = await serve(server, self._service)
            self._discovery = Discovery(address, self.view.me, on_event=self._on_discovery)
            await self._discovery.start()
            registered = runtime.register(
                runtime.Registration(self.node_id, os.getpid(), config.job, me.endpoint, runtime.current_netns()),
                runtime.candidate_directories(os.environ, os.getuid()),
            )
            self.reporter.ready()
            self._report()
            try:
                membership, session = await self._until_stopped(self._rendezvous(me), config.timeout)
            except _Stopped:
                return 128 + (self._stop_signal or signal.SIGTERM)
            # Not at the very start: N nodes re-announcing at once would delay each other.
            self._advertise(Phase.RUNNING, membership, delay=ADVERTISE_RUNNING_DELAY)
            try:
                code = await self._until_stopped(self.launcher.wait())
            except _Stopped:
                code = await self.launcher.stop(config.stop_grace)
            log.info("command exited with code %d", code)
            self._exit_code = code
            self._enter(Phase.FINISHED)
            await self._say_finished(session, code)
            return code
        finally:
            self._report_stopping()
            for task in self._tasks:
                task.cancel()
            discovery = self._discovery
            await _run_all(
                ("release the TF port", reservation.release),
                ("stop the command", lambda: self.launcher.stop(config.stop_grace)),
                ("close the Join stream", session.close if session else None),
                ("remove the runtime file", lambda: runtime.unregister(registered)),
                ("stop the health service", health.enter_graceful_shutdown if health else None),
                ("stop the gRPC server", lambda: server.stop(grace=0.5)),
                ("say goodbye over mDNS", discovery.close if discovery else None),
            )

    async def _until_stopped(self, awaitable: Awaitable[T], timeout: Optional[float] = None) -> T:
        """Await `awaitable` unless a stop signal or the timeout comes first."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
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
            "Check that every node runs the same --job and --expect and that multicast "
            "(UDP 5353) passes between them"
        )

    async def _say_finished(self, session: JoinSession, code: int) -> None:
        try:
            await asyncio.wait_for(session.finished(code), timeout=1.0)
        except Exception:  # the coordinator may already be gone: nothing depends on it
            log.debug("could not report the exit code to the coordinator", exc_info=True)

    # -- discovery -----------------------------------------------------------------

    def _on_discovery(self, event: DiscoveryEvent) -> None:
        if isinstance(event, Seen):
            self._update_view(self.view.seen(event.advert))
        elif isinstance(event, Gone):
            self._update_view(self.view.gone(event.node_id))

    def _update_view(self, view: PeerView) -> None:
        self._view = view
        assert self._service is not None
        self._service.follow(view.target())
        self._report()
        self._view_changed.set()

    def _advertise(self, phase: Phase, membership: Membership, delay: float = 0.0) -> None:
        advert = self.view.me.with_phase(phase, membership.coordinator.endpoint)
        self._view = self.view.with_me(advert)
        if self._discovery is not None:
            task = asyncio.create_task(self._update_advert(advert, delay), name=f"advertise-{phase.value}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _update_advert(self, advert: Advert, delay: float) -> None:
        assert self._discovery is not None
        await asyncio.sleep(delay)
        await self._discovery.update(advert)

    # -- rendezvous ----------------------------------------------------------------

    def _raise_on_conflicts(self) -> None:
        conflicts = self.view.conflicts()
        if conflicts:
            raise MembershipError("; ".join(conflicts))

    async def _rendezvous(self, me: Peer) -> tuple[Membership, JoinSession]:
        """Rendezvous and start the command; return the membership and the open session."""
        try:
            return await self._join_until_released(me)
        except MembershipError:
            if self.view.conflicts():
                # Stay visible a moment, so that the peer we disagree with sees us too
                # and fails with the same message instead of waiting.
                await asyncio.sleep(self.config.conflict_linger)
            raise

    async def _join_until_released(self, me: Peer) -> tuple[Membership, JoinSession]:
        """Join the coordinator this node believes in, following the view, until released."""
        unreachable: Optional[tuple[str, float]] = None  # endpoint, failing since when
        while True:
            self._view_changed.clear()  # the target is recomputed now: older changes are seen
            self._raise_on_conflicts()
            target = self.view.target()
            session = JoinSession(target.endpoint, me, self.config.job, 1, self.config.expect)
            try:
                membership = await self._follow(session, target, me)
            except SessionLost as exc:
                log.debug("lost the coordinator %s: %s", target.endpoint, exc)
                unreachable = self._note_unreachable(unreachable, target, time.monotonic())
                membership = None
            except BaseException:
                await session.close()
                raise
            if membership is not None:
                return membership, session
            await session.close()
            await self._view_change_or(self.config.retry_interval)

    def _note_unreachable(
        self, unreachable: Optional[tuple[str, float]], target: Target, now: float
    ) -> Optional[tuple[str, float]]:
        """After SUSPECT_AFTER seconds of failing to reach the coordinator, elect without it.

        A node killed without a goodbye stays in everyone's mDNS cache for many minutes;
        electing it all that time would block the job, and its restarted self too. The
        suspicion lapses after SUSPECT_FOR seconds, or when the peer announces itself again.
        """
        if unreachable is None or unreachable[0] != target.endpoint:
            return (target.endpoint, now)
        endpoint, since = unreachable
        peer = target.peer
        if now - since < SUSPECT_AFTER or peer is None or peer.node_id == self.node_id:
            return unreachable
        log.warning(
            "cannot reach the coordinator %s at %s for %.0f s: it may have stopped without a "
            "goodbye; electing without it for %.0f s", peer.describe(), endpoint, now - since, SUSPECT_FOR,
        )
        self._update_view(self.view.suspect(peer.node_id))
        asyncio.get_running_loop().call_later(SUSPECT_FOR, self._trust, peer.node_id)
        return None

    def _trust(self, node_id: str) -> None:
        self._update_view(self.view.trust(node_id))

    async def _view_change_or(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._view_changed.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _follow(self, session: JoinSession, target: Target, me: Peer) -> Optional[Membership]:
        """One Join stream. Returns the membership once released, None to try again."""
        await session.join()
        membership: Optional[Membership] = None
        receive = asyncio.ensure_future(session.receive())
        try:
            while True:
                if membership is None:
                    self._raise_on_conflicts()
                    if self.view.target().endpoint != target.endpoint:
                        return None
                self._view_changed.clear()
                changed = asyncio.ensure_future(self._view_changed.wait())
                done, _ = await asyncio.wait({receive, changed}, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                if receive not in done:
                    continue
                try:
                    event = receive.result()
                except SessionLost as exc:
                    if membership is not None:
                        raise CoordinatorError(f"lost the coordinator after the freeze: {exc}") from None
                    raise
                if isinstance(event, Waiting):
                    log.debug(
                        "%d/%d joined at %s: %s",
                        len(event.joined), event.expect, target.endpoint, describe_peers(event.joined),
                    )
                elif isinstance(event, Frozen):
                    membership = event.membership
                    await self._confirm(session, event, me)
                elif isinstance(event, Released):
                    if membership is None:
                        raise CoordinatorError(f"coordinator {target.endpoint} released before freezing")
                    wait = rounds.start_delay(event.start_at, event.delay, time.time())
                    log.debug("released by %s: starting in %.1f ms", target.endpoint, wait * 1e3)
                    assert self._reservation is not None
                    self._reservation.release()  # the command binds the TF port next
                    # The gate process waits until then on its own: this daemon stays out of
                    # the way of the start instant.
                    self.launcher.fire(time.time() + wait)
                    self._enter(Phase.RUNNING)
                    return membership
                elif isinstance(event, Redirected):
                    if membership is not None:
                        raise CoordinatorError(f"coordinator {target.endpoint} redirected after the freeze")
                    log.debug("redirected by %s: %s", target.endpoint, event.reason)
                    return None
                elif isinstance(event, Rejected):
                    raise MembershipError(event.message)
                elif isinstance(event, Aborted):
                    raise CoordinatorError(f"the coordinator {target.endpoint} aborted the round: {event.reason}")
                receive = asyncio.ensure_future(session.receive())
        finally:
            receive.cancel()

    async def _confirm(self, session: JoinSession, frozen: Frozen, me: Peer) -> None:
        """Check the frozen list and confirm it by its digest; the coordinator compares."""
        membership = frozen.membership
        try:
            rank = membership.rank_of(me.node_id)
        except KeyError:
            raise CoordinatorError(
                f"the coordinator froze a membership without this node: {describe_peers(membership.members)}"
            ) from None
        if membership.members[rank] != me:
            raise CoordinatorError(f"the coordinator froze this node as {membership.members[rank]}, not {me}")
        env = launch_environment(membership, me.node_id)
        log.info(
            "membership frozen: worker %d of %d, coordinator %s, TF_CONFIG=%s",
            rank, membership.world_size, membership.coordinator.describe(), env["TF_CONFIG"],
        )
        await self.launcher.arm(self.config.command, env)
        self._membership = membership
        self._enter(Phase.FROZEN)
        await session.ready(membership.digest)


async def _run_all(*steps: tuple[str, Optional[Callable[[], object]]]) -> None:
    """Run every shutdown step in order, even after one fails: whatever broke before, the
    command must be stopped and the goodbye must go out."""
    for name, step in steps:
        if step is None:
            continue
        try:
            result = step()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.warning("could not %s", name, exc_info=True)


async def run_node(config: JoinConfig, reporter: Optional[Reporter] = None) -> int:
    return await Node(config, reporter=reporter).run()

