"""What a node binds once at startup and closes once at shutdown, its endpoint:

    bind   address -> TF port reservation -> gRPC server port
    start  serve (+ the health service) -> advert + discovery -> runtime file for `status`
    close  TF port, [the round's command and stream], confirmer, runtime file, gRPC server,
           mDNS goodbye

Rounds come and go in between; these stay. The view of the job lives in a `ViewHolder`
beside the endpoint; a round's Joiner gets a `Seat`, only what a member needs of both.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

import grpc
from grpc_health.v1 import health

from ..host import runtime
from ..host.allowed import choose_allowed_address, resolve_hosts
from ..host.datanet import choose_data_address
from ..config.join import JoinConfig
from ..config.timings import Timings
from .commandside import warn_inherited_tf_config, warn_script_tf_config
from .confirmer import Confirmer
from .viewholder import ViewHolder
from ..coordinator import CoordinatorService, bind_server, serve
from ..coordinator.local import JoinHandler
from ..coordinator.transfer import FileSource
from ..core.advert import Advert
from ..core.auth import Keys
from ..core.gpus import GpuPolicy
from ..core.peer import IPAddress, Peer
from ..core.preflight import Fingerprint, Mismatch
from ..core.record import replace
from ..core.seeds import DEFAULT_PORT
from ..core.round import Policy
from ..core.status import NodeStatus
from ..core.view import PeerView, Target
from ..discovery import Discovery, DiscoveryEvent, DiscoveryFactory, Hinted, deliver
from ..errors import AddressError
from ..launch.launcher import check_command
from ..host.ports import PortReservation, reserve_again
from ..host.syncdir import SyncDir, check_sync_dir, remove_leftovers
from ..host.token import load_keys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Seat:
    """What one round's member (the Joiner) takes from its node's endpoint."""

    me: Callable[[], Peer]  # this node now: it may switch to its address of the job's IP family
    release_tf_port: Callable[[], None]  # before the command binds it
    local: JoinHandler  # this node's coordinator service, reached in-process when it joins itself
    fingerprint: Optional[Fingerprint] = None  # what the command runs with, taken at startup
    keys: Optional[Keys] = None  # the job's MAC keys, from --token-file
    sync: Optional[SyncDir] = None  # --sync-dir
    progress_dir: Optional[Path] = None  # where the command's progress file goes
    data_interface: Optional[str] = None  # --data-interface: NCCL's and Gloo's


@dataclass
class Endpoint:
    """This node on the network, from startup to shutdown: `me` changes only by `switch`,
    the TF port's reservation at every round."""

    me: Peer
    reservation: PortReservation
    ipv6: bool  # the TF port is held on both families
    server: grpc.aio.Server
    health: health.aio.HealthServicer
    service: CoordinatorService
    discovery: Discovery
    confirmer: Confirmer
    timings: Timings
    fingerprint: Optional[Fingerprint] = None
    sync: Optional[SyncDir] = None
    keys: Optional[Keys] = None
    registration: Optional[Path] = None
    data_interface: Optional[str] = None
    allowed: Optional[frozenset[IPAddress]] = None  # --allow-host's addresses; None: any host
    interface: Optional[str] = None  # the one that holds `me.address` (host.arp watches it)

    def seat(self) -> Seat:
        progress_dir = self.registration.parent if self.registration else None
        return Seat(lambda: self.me, self.release_tf_port, self.service, self.fingerprint, self.keys, self.sync,
                    progress_dir, self.data_interface)

    def release_tf_port(self) -> None:
        self.reservation.release()

    def hold_tf_port(self) -> None:
        """Hold this node's TF port again for the next round (the last command bound it)."""
        self.reservation.release()
        self.reservation = reserve_again(self.me.tf_port, ipv6=self.ipv6)

    def switch(self, me: Peer) -> None:
        """This node uses its address of the job's IP family now (core.family): the server
        already listens there; the Join and the coordinator service take it from here."""
        self.me = me
        self.service.moved(me)

    async def start(self, config: JoinConfig) -> None:
        """Serve, advertise, and register for `rendezvous status`."""
        await serve(self.server, self.service, self.health)
        await self.discovery.start()
        self.registration = runtime.register(
            runtime.Registration(self.me.node_id, os.getpid(), config.job, self.me.endpoint, runtime.current_netns(),
                                 os.path.abspath(os.path.expanduser(config.token_file)) if config.token_file else ""),
            runtime.candidate_directories(os.environ, os.getuid()),
        )

    async def close(self, *first: tuple[str, Optional[Callable[[], object]]]) -> None:
        """Close everything in order, after the `first` steps (the current round's)."""
        await run_all(
            ("release the TF port", self.reservation.release),
            *first,
            ("stop confirming adverts", self.confirmer.close),
            ("remove the runtime file", lambda: runtime.unregister(self.registration)),
            ("stop the health service", self.health.enter_graceful_shutdown),
            ("stop the gRPC server", lambda: self.server.stop(grace=self.timings.server_stop_grace)),
            ("say goodbye", self.discovery.close),
        )


class Binder(Protocol):
    """Builds a node's endpoint and view holder (`bind_resources`; tests may pass another)."""

    def __call__(
        self, config: JoinConfig, node_id: str, make_discovery: DiscoveryFactory,
        on_discovery: Callable[[DiscoveryEvent], None], status: Callable[[], NodeStatus],
        on_view: Callable[[], None], fingerprint: Optional[Fingerprint] = None,
    ) -> tuple[Endpoint, ViewHolder]: ...


def job_policy(config: JoinConfig) -> Policy:
    """When a failed round is the last, which differences the preflight allows, and how
    many GPUs each command uses."""
    allowed = frozenset(Mismatch(kind) for kind in config.allow_mismatch)
    return Policy(config.max_restarts, frozenset(config.no_restart_on), allowed, GpuPolicy.parse(config.gpus))


def bind_resources(
    config: JoinConfig,
    node_id: str,
    make_discovery: DiscoveryFactory,
    on_discovery: Callable[[DiscoveryEvent], None],
    status: Callable[[], NodeStatus],
    on_view: Callable[[], None],
    fingerprint: Optional[Fingerprint] = None,
) -> tuple[Endpoint, ViewHolder]:
    """Choose the address, take the ports and build everything else, started by
    `Endpoint.start`. Fails before the network hears of this node, releasing the ports.
    The advert shows the `fingerprint`'s TensorFlow version and GPUs; `on_view` follows
    every change of the view."""
    keys = load_keys(config.token_file, config.job)
    if keys is None:
        log.warning(
            "job %r has no --token-file: any host on this network can join it, or stop it from "
            "forming", config.job,
        )
    allowed = resolve_hosts(config.allow_hosts) if config.allow_hosts else None
    choice = choose_allowed_address(config.address, config.interface, allowed)
    address = choice.address
    also = f"; also {choice.alternate} if its job uses IPv{choice.alternate.version}" if choice.alternate else ""
    log.info("node %s uses %s: %s%s", node_id, address, choice.reason, also)
    data = choose_data_address(config.data_address, config.data_interface)
    if data is not None:
        log.info("training traffic on the data network: %s (%s)", data.address, data.reason)
        fingerprint = replace(fingerprint, data_interface=data.interface or "") if fingerprint else None
    check_command(config.command)
    warn_inherited_tf_config(os.environ)
    warn_script_tf_config(config.command)
    sync_root = check_sync_dir(config.sync_dir) if config.sync_dir else None
    if sync_root:
        remove_leftovers(sync_root, runtime.pid_alive)
    addresses = [address, *([choice.alternate] if choice.alternate else [])]
    # TensorFlow listens on every interface: held on the wildcard, the TF port is free on
    # the data network too (of its family)
    ipv6 = any(a.version == 6 for a in [*addresses, *([data.address] if data else [])])
    reservation = PortReservation(config.tf_port, ipv6=ipv6)
    try:
        server, port = _bind(addresses, config)
    except OSError as exc:
        reservation.release()
        raise AddressError(f"--port {config.port}: {exc}") from None
    me = Peer(node_id=node_id, address=address, port=port, tf_port=reservation.port,
              data_address=data.address if data else None)
    shown = {"tensorflow": fingerprint.tensorflow, "gpus": fingerprint.describe_gpus()} if fingerprint else {}
    views = ViewHolder(PeerView(Advert(
        peer=me, job=config.job, expect=config.expect, auth=keys is not None, alternate=choice.alternate, **shown,
    )), config.timings.view_settle, silent_after=max(config.liveness_timeout, config.timings.suspect_after))

    def target() -> Target:
        return views.view.target(time.monotonic())

    sync = SyncDir(sync_root, config.sync_max_bytes) if sync_root else None
    discovery = make_discovery(address, views.view.me, on_discovery)
    discovery.use_keys(keys)
    service = coordinator_service(config, me, target, status, keys, sync, discovery, on_discovery, views, allowed)
    timings = config.timings
    confirmer = Confirmer(views, keys, timings.resolve_timeout, timings.suspect_after, timings.confirm_hedge)
    for listener in (lambda: service.follow(target()), on_view, confirmer.kick):
        views.listen(listener)
    endpoint = Endpoint(
        me, reservation, ipv6, server, health.aio.HealthServicer(), service, discovery, confirmer, timings,
        fingerprint, sync, keys, data_interface=data.interface if data else None, interface=choice.interface,
        allowed=allowed,
    )
    return endpoint, views


def coordinator_service(
    config: JoinConfig, me: Peer, target: Callable[[], Target], status: Callable[[], NodeStatus],
    keys: Optional[Keys], sync: Optional[SyncDir], discovery: Discovery,
    on_discovery: Callable[[DiscoveryEvent], None], views: ViewHolder,
    allowed: Optional[frozenset[IPAddress]] = None,
) -> CoordinatorService:
    """This node's coordinator service, with its collaborators. A Join may ask for one
    round past the latest this node knows its job in: its own, or one its confirmed peers
    advertise (a restarted coordinator's job has moved on without it)."""
    return CoordinatorService(
        me, config.job, config.expect, target, status, config.timings, liveness_timeout=config.liveness_timeout,
        policy=job_policy(config), settle=config.settle, keys=keys, files=FileSource(sync) if sync else None,
        exchange=discovery.exchange, hint=lambda advert, vouched: deliver(on_discovery, Hinted(advert, vouched)),
        job_round=lambda: max(status().round, views.view.latest_round), allowed=allowed,
    )


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
