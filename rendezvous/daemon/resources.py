"""What a node opens once at startup and closes once at shutdown:

    bind   address -> TF port reservation -> gRPC server port
    start  serve (+ the health service) -> advert + discovery -> runtime file for `status`
    close  TF port, [the round's command and stream], runtime file, gRPC server, mDNS goodbye

Rounds come and go in between; these stay.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Protocol

import grpc
from grpc_health.v1 import health

from ..host import runtime
from ..host.address import choose_address
from ..config.options import JoinConfig
from .confirmer import Confirmer
from ..coordinator import CoordinatorService, JoinSession, bind_server, serve
from ..coordinator.local import JoinHandler
from ..coordinator.transfer import FileSource
from ..core.advert import Advert
from ..core.auth import Keys
from ..core.peer import IPAddress, Peer
from ..core.preflight import Fingerprint, Mismatch
from ..core.seeds import DEFAULT_PORT
from ..core.round import Policy
from ..core.size import Size
from ..core.status import NodeStatus
from ..core.view import PeerView, Target
from ..discovery import Discovery, DiscoveryEvent, DiscoveryFactory, Hinted, deliver
from ..errors import AddressError
from ..launch.launcher import check_command
from ..host.ports import PortReservation
from ..host.syncdir import SyncDir, check_sync_dir, remove_leftovers
from ..host.token import load_keys

log = logging.getLogger(__name__)

# What follows from a change of the view is done at once for the first VIEW_BURST changes
# after a quiet VIEW_SETTLE window, then at most once per window while changes keep coming:
# a node of a job of N nodes that starts at once hears N adverts within a moment, and each
# telling (the coordinator service, the progress, the confirmer, the joiner) costs O(N). A
# node that just started sees itself, then its coordinator, then confirms it: none of that
# waits.
VIEW_SETTLE = 0.02
VIEW_BURST = 3


class SessionFactory(Protocol):
    def __call__(
        self, endpoint: str, me: Peer, job: str, round: int, expect: Size, keepalive: Optional[float],
        fingerprint: Optional[Fingerprint] = None,
        keys: Optional[Keys] = None,
        local: Optional[JoinHandler] = None,
    ) -> JoinSession: ...


@dataclass
class Resources:
    me: Peer
    view: PeerView  # replaced, never changed, by `update_view`
    reservation: PortReservation
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    service: CoordinatorService
    discovery: Discovery
    on_view: Callable[[], None]  # after every change of the view
    policy: Policy  # when a failed round is the last
    fingerprint: Optional[Fingerprint] = None  # what the command runs with, taken at startup
    sync: Optional[SyncDir] = None  # --sync-dir
    keys: Optional[Keys] = None  # the job's MAC keys, from --token-file
    confirmer: Optional[Confirmer] = None
    registration: Optional[Path] = None
    view_changed: asyncio.Event = field(default_factory=asyncio.Event)
    _telling: Optional[asyncio.TimerHandle] = field(default=None, init=False, repr=False)
    _untold: bool = field(default=False, init=False, repr=False)
    _told: int = field(default=0, init=False, repr=False)  # tellings in this VIEW_SETTLE window

    def hold_tf_port(self) -> None:
        """Hold this node's TF port again for the next round (the last command bound it)."""
        self.reservation.release()
        self.reservation = PortReservation(self.me.tf_port, ipv6=6 in self.view.me.versions)

    def switch(self, me: Peer) -> None:
        """This node uses its address of the job's IP family now (core.family): the server
        already listens there; the Join and the coordinator service take it from here."""
        self.me = me
        self.service.moved(me)

    def update_view(self, view: PeerView) -> None:
        """Take the new view, and tell the rest about it (see VIEW_SETTLE)."""
        self.view = view
        if self._told < VIEW_BURST:
            self._tell()
        else:
            self._untold = True

    def _settled(self) -> None:
        self._telling = None
        if self._untold:  # changes keep coming: once a window from now on
            self._told = VIEW_BURST
            self._tell()
        else:  # a quiet window: the next changes are told at once again
            self._told = 0

    def _tell(self) -> None:
        self._untold = False
        self._told += 1
        if self._telling is None:
            self._telling = asyncio.get_running_loop().call_later(VIEW_SETTLE, self._settled)
        self.service.follow(self.view.target(time.monotonic()))
        self.view_changed.set()
        self.on_view()
        if self.confirmer is not None:
            self.confirmer.kick()

    def distrust(self, peer: Peer, why: str) -> None:
        """Leave a peer that failed authentication out for good; said once per peer."""
        if peer.node_id in self.view.distrusted:
            return
        log.error(
            "authentication with peer %s at %s failed, leaving it out: %s. It does not hold the "
            "job's token, or this node's --token-file is not the job's", peer.node_id, peer.address, why,
        )
        self.update_view(self.view.distrust(peer.node_id))

    async def start(self, config: JoinConfig) -> None:
        """Serve, advertise, and register for `rendezvous status`."""
        await serve(self.server, self.service, self.health)
        await self.discovery.start()
        self.registration = runtime.register(
            runtime.Registration(self.me.node_id, os.getpid(), config.job, self.me.endpoint, runtime.current_netns()),
            runtime.candidate_directories(os.environ, os.getuid()),
        )

    async def close(self, *first: tuple[str, Optional[Callable[[], object]]]) -> None:
        """Close everything in order, after the `first` steps (the current round's)."""
        if self._telling is not None:
            self._telling.cancel()
        await run_all(
            ("release the TF port", self.reservation.release),
            *first,
            ("stop confirming adverts", self.confirmer.close if self.confirmer else None),
            ("remove the runtime file", lambda: runtime.unregister(self.registration)),
            ("stop the health service", self.health.enter_graceful_shutdown),
            ("stop the gRPC server", lambda: self.server.stop(grace=0.5)),
            ("say goodbye", self.discovery.close),
        )


def bind_resources(
    config: JoinConfig,
    node_id: str,
    make_discovery: DiscoveryFactory,
    on_discovery: Callable[[DiscoveryEvent], None],
    status: Callable[[], NodeStatus],
    on_view: Callable[[], None],
    fingerprint: Optional[Fingerprint] = None,
) -> Resources:
    """Choose the address, take the ports and build everything else, started by
    `Resources.start`. Fails before the network hears of this node, releasing the ports.
    The advert shows the `fingerprint`'s TensorFlow version and GPUs."""
    keys = load_keys(config.token_file, config.job)
    if keys is None:
        log.warning(
            "job %r has no --token-file: any host on this network can join it, or stop it from "
            "forming", config.job,
        )
    choice = choose_address(config.address, config.interface)
    address = choice.address
    also = f"; also {choice.alternate} if its job uses IPv{choice.alternate.version}" if choice.alternate else ""
    log.info("node %s uses %s: %s%s", node_id, address, choice.reason, also)
    check_command(config.command)
    sync_root = check_sync_dir(config.sync_dir) if config.sync_dir else None
    if sync_root:
        remove_leftovers(sync_root, runtime.pid_alive)
    addresses = [address, *([choice.alternate] if choice.alternate else [])]
    reservation = PortReservation(config.tf_port, ipv6=any(a.version == 6 for a in addresses))
    try:
        server, port = _bind(addresses, config)
    except OSError as exc:
        reservation.release()
        raise AddressError(f"--port {config.port}: {exc}") from None
    me = Peer(node_id=node_id, address=address, port=port, tf_port=reservation.port)
    shown = {"tensorflow": fingerprint.tensorflow, "gpus": fingerprint.describe_gpus()} if fingerprint else {}
    view = PeerView(Advert(
        peer=me, job=config.job, expect=config.expect, auth=keys is not None, alternate=choice.alternate, **shown,
    ))

    def target() -> Target:
        return resources.view.target(time.monotonic())

    allowed = frozenset(Mismatch(kind) for kind in config.allow_mismatch)
    policy = Policy(config.max_restarts, frozenset(config.no_restart_on), allowed)
    service = CoordinatorService(
        me, config.job, config.expect, target, status, config.timings, config.liveness_timeout, policy,
        config.settle, keys,
    )
    sync = SyncDir(sync_root, config.sync_max_bytes) if sync_root else None
    service.files = FileSource(sync) if sync else None
    discovery = make_discovery(address, view.me, on_discovery)
    discovery.use_keys(keys)
    service.exchange = discovery.exchange
    service.hint = lambda advert: deliver(on_discovery, Hinted(advert))
    resources = Resources(
        me, view, reservation, server, health.aio.HealthServicer(), service, discovery, on_view, policy,
        fingerprint, sync, keys,
    )
    resources.confirmer = Confirmer(
        resources, config.timings.resolve_timeout, config.timings.suspect_after, config.timings.confirm_hedge,
    )
    return resources


def _bind(addresses: list[IPAddress], config: JoinConfig) -> tuple[grpc.aio.Server, int]:
    """The gRPC server on --port, on every address of this node (both of a dual-stack
    one); without --port on DEFAULT_PORT, where seeds are asked, or on any free port when
    another daemon of this host (another job) holds that one."""
    host, *also = (f"[{a}]" if a.version == 6 else str(a) for a in addresses)
    if config.port is not None:
        return bind_server(host, config.port, config.timings.keepalive, also, config.timings.handshake)
    try:
        return bind_server(host, DEFAULT_PORT, config.timings.keepalive, also, config.timings.handshake)
    except OSError as exc:
        log.warning("port %d is taken (%s): listening on a free port instead; seeds naming this "
                    "host must give it", DEFAULT_PORT, exc)
        return bind_server(host, 0, config.timings.keepalive, also, config.timings.handshake)


async def run_all(*steps: tuple[str, Optional[Callable[[], object]]]) -> None:
    """Run every step in order, even after one fails: whatever broke before, the command
    must be stopped and the goodbye must go out."""
    for name, step in steps:
        if step is None:
            continue
        try:
            result = step()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.warning("could not %s", name, exc_info=True)
