"""The coordinator side: a grpc.aio servicer that turns each RPC into core decisions.

Every node serves Join; only the node that is the coordinator admits peers. The Join
streams are served by `_join`, the round's decisions carried out by `_coordination`, its
liveness watched by `_watchdog`; callers are kept within bounds by `_guard` (Join streams
per address, rate-limited warnings) and, before any authentication, by `limits`
(connections, calls per source, request sizes, memory).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional, Sequence, TypeVar

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..config.timings import Timings
from ..core import admission
from ..core import job as jobs
from ..core.advert import PROTOCOL_VERSION, Advert
from ..core.adverts import Gossip
from ..core.auth import AuthError, Keys
from ..core.peer import IPAddress, Peer
from ..core.round import Policy, Round
from ..core.size import Size
from ..core.status import NodeStatus
from ..core.stopping import StopOrder
from ..core.unformed import is_twin
from ..core.view import Target
from ..host.ports import check_port_free
from ..v1 import rendezvous_pb2 as pb
from ..v1 import rendezvous_pb2_grpc as pb_grpc
from . import _auth, _wire, limits
from ._coordination import Coordination
from .connections import ConnectionCap
from ._join import JoinStreams, check_header
from ._guard import Guard, abort, source_of
from ._stop import Stops, coordinating, open_signed
from .transfer import FileSource

log = logging.getLogger(__name__)

FilesRequest = TypeVar("FilesRequest", pb.ManifestRequest, pb.FetchRequest)


class CoordinatorService(pb_grpc.RendezvousServicer):
    """Serves Join on every node; only the node that is the coordinator admits peers.

    `target` tells which endpoint this node currently believes is the coordinator: while
    the round gathers, a node that is not it redirects every peer there. `status` gives this
    node's current state for the Status RPC. `files` serves --sync-dir (None: this node
    runs without it); `exchange` answers Exchange with what a node lacks (None: this node
    takes no part in unicast discovery); `hint` takes the advert a peer sent with its
    Status request, as one heard over mDNS.
    """

    def __init__(
        self,
        me: Peer,
        job: str,
        expect: Size,
        target: Callable[[], Target],
        status: Callable[[], NodeStatus],
        timings: Timings,
        *,
        liveness_timeout: float,
        policy: Policy,
        settle: float,
        keys: Optional[Keys] = None,
        files: Optional[FileSource] = None,
        exchange: Optional[Callable[[Gossip], Optional[Gossip]]] = None,
        hint: Optional[Callable[[Advert, bool], None]] = None,
        job_round: Optional[Callable[[], int]] = None,
        allowed: Optional[frozenset[IPAddress]] = None,
    ) -> None:
        self._keys = keys
        self._target = target
        self._status = status
        self._files = files
        self._exchange = exchange
        self._hint = hint
        self._guard = Guard(job, log, timings.warning_interval)
        self._c = Coordination(me, Round(job=job, expect=expect, settle=settle, policy=policy), timings, liveness_timeout)
        # The latest round this node knows its job in bounds the rounds a Join may ask for
        # (core.admission.round_limit): by default its own.
        self._joins = JoinStreams(self._c, self._guard, keys, target, job_round or (lambda: status().round),
                                  allowed)
        self._stops = Stops(self._c, self._guard, keys, target, timings.replay_window)

    @property
    def round(self) -> Round:
        return self._c.round

    @property
    def board(self) -> jobs.Board:
        return self._c.board

    @property
    def stopped_between_rounds(self) -> bool:
        """`rendezvous stop` came while the members were on their way to the next round."""
        return self._c.stopped_between_rounds

    async def stop_taken(self) -> StopOrder:
        """Once this node, as the coordinator, took a `rendezvous stop`: its order."""
        await self._c.stop_taken.wait()
        assert self._c.stopped is not None
        return self._c.stopped

    @property
    def heartbeat_interval(self) -> float:
        return self._c.heartbeat_interval

    def moved(self, me: Peer) -> None:
        """This node now advertises its address of the job's IP family (core.family): the
        peers that joined it on the other one start over, wherever their view says."""
        self._c.me = me
        version = me.address.version
        self._c.redirect_all(f"now on IPv{version}", f"the coordinator uses IPv{version} now")

    def follow(self, target: Target) -> None:
        """The view changed: if someone else is now the coordinator, send everyone there."""
        if target.endpoint != self._c.me.endpoint:
            self._c.redirect_all(f"peer {target.endpoint} is lower", "a peer with a lower address is the coordinator", target.peer)

    async def Join(self, request_iterator, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        """One peer's stream. A bounded number at a time from one address (_guard)."""
        source = source_of(context)
        if self._guard.full(source):
            await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams from this address")
        with self._guard.stream(source):
            await self._joins.serve(context, source)

    async def Status(self, request: pb.StatusRequest, context: grpc.aio.ServicerContext) -> pb.StatusResponse:  # noqa: N802
        """Anyone may ask (`rendezvous status` has no token); a signed request gets a
        signed answer, which a peer can trust."""
        if request is None:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "not a StatusRequest")
        # With a token, an unsigned request learns only that the job needs one.
        signer = await open_signed(self._keys, self.round.job, self._guard, request, context)
        if request.HasField("caller"):
            # As good as its own Status answer: signed with the job's token where the job
            # has one, and from the address it claims (a forged advert's address has nobody
            # behind it to call from).
            self._take_hint(request.caller, context, vouched=signer.active or self._keys is None)
        if request.HasField("about") and (signer.active or self._keys is None):
            self._take_about(request.about)
        return signer.seal(_wire.status_to_pb(self._status()))

    def _take_hint(self, record: pb.AdvertRecord, context: grpc.aio.ServicerContext, vouched: bool) -> None:
        """The advert of a peer that asks this node's Status: passed on if it is of this
        job and comes from the address it claims, `vouched` for when the request proves it
        as a Status answer would (core.view.Hinted)."""
        advert = _wire.advert_from_pb(record)
        if self._hint is None or advert is None or advert.job != self.round.job or advert.node_id == self._c.me.node_id:
            return
        problem = admission.check_source(advert.peer, source_of(context))
        if problem is not None:
            log.debug("ignoring the advert sent with a Status request: %s", problem)
            return
        self._hint(advert, vouched)

    def _take_about(self, record: pb.AdvertRecord) -> None:
        """The advert a peer asks this node about: passed on (not vouched for) when it is
        another node of this job at this node's own endpoint, which the view takes as its
        twin (core.unformed.is_twin); any other says nothing to this node."""
        advert = _wire.advert_from_pb(record)
        if self._hint is not None and advert is not None and is_twin(self._c.me, self.round.job, advert):
            self._hint(advert, False)

    async def JobStatus(self, request: Optional[pb.StatusRequest], context: grpc.aio.ServicerContext) -> pb.JobStatusResponse:  # noqa: N802
        if request is None:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "not a StatusRequest")
        signer = await open_signed(self._keys, self.round.job, self._guard, request, context)
        me, state = self._c.me, self._c.round
        target = self._target()
        if not coordinating(self._c, target):
            view = jobs.JobView(
                job=state.job, round=state.number, phase=state.phase.value,
                expect=state.expect, coordinator=target.peer, coordinating=False,
            )
        else:
            silent_after = 2 * self._c.heartbeat_interval  # two heartbeats missed
            view = jobs.job_view(state, self._c.board, me, time.monotonic(), silent_after)
        return signer.seal(_wire.job_view_to_pb(view, me.node_id))

    async def Stop(self, request: Optional[pb.StopRequest], context: grpc.aio.ServicerContext) -> pb.StopResponse:  # noqa: N802
        """`rendezvous stop --job` (coordinator._stop)."""
        return await self._stops.serve(request, context)

    async def GetManifest(self, request: Optional[pb.ManifestRequest], context: grpc.aio.ServicerContext) -> pb.ManifestResponse:  # noqa: N802
        files, request = await self._check_files(request, context)
        return await files.manifest(request, context)

    async def FetchFiles(self, request: Optional[pb.FetchRequest], context: grpc.aio.ServicerContext):  # noqa: N802
        files, request = await self._check_files(request, context)
        async for chunk in files.files(request, context):
            yield chunk

    async def _check_files(
        self, request: Optional[FilesRequest], context: grpc.aio.ServicerContext
    ) -> tuple[FileSource, FilesRequest]:
        """Files go only to a node of this job (one that holds its token, if it has one),
        and only from a node that syncs. What they hold is checked by the fetcher against
        the digest the coordinator named, over the signed Join stream."""
        if request is None:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "not a request of files")
        if self._files is None:
            await abort(context, grpc.StatusCode.FAILED_PRECONDITION, "this node runs without --sync-dir")
        refusal = check_header(self._c, request.header)
        if refusal is not None:
            await abort(context, grpc.StatusCode.PERMISSION_DENIED, refusal.message)
        if self._keys is not None:
            try:
                _auth.open_request(self._keys, request)
            except AuthError as exc:
                await self._guard.refuse(context, source_of(context), str(exc))
        return self._files, request

    async def Exchange(self, request: Optional[pb.Adverts], context: grpc.aio.ServicerContext) -> pb.Adverts:  # noqa: N802
        if request is None:
            await abort(context, grpc.StatusCode.INVALID_ARGUMENT, "not a list of adverts")
        if request.header.protocol_version != PROTOCOL_VERSION:
            await abort(context, grpc.StatusCode.FAILED_PRECONDITION, f"this node speaks protocol {PROTOCOL_VERSION}")
        signer, gossip = _wire.exchange_in(request, self._keys, source_of(context))
        answer = self._exchange(gossip) if self._exchange is not None else None
        if answer is None:
            await abort(context, grpc.StatusCode.UNIMPLEMENTED, "this node does not use unicast discovery (--discovery mdns)")
        return signer.seal(_wire.gossip_to_pb(answer, self._c.me.node_id))


def bind_server(
    host: str, port: int, keepalive: float = Timings.keepalive, also: Sequence[str] = (),
    handshake: float = Timings.handshake,
) -> tuple[grpc.aio.Server, int]:
    """Create a server bound to host:port (0 = any free port), and to the same port on the
    hosts `also` names (a dual-stack node's other address); return it and the bound port."""
    for name in (host, *also):
        check_port_free(name, port)
    server = limits.new_server(keepalive, handshake)
    for name in (host, *also):
        port = _add_port(server, name, port)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return server, port  # no loop yet: connections are capped in total only
    ConnectionCap(port, handshake / 5).watch()
    return server, port


def _add_port(server: grpc.aio.Server, host: str, port: int) -> int:
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError as exc:  # grpc raises RuntimeError when it cannot bind
        raise OSError(f"cannot listen on {host}:{port}: {exc}") from None
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port}")
    return bound


class _Handlers:
    """Stands in for a server to catch what the generated code registers."""

    def __init__(self) -> None:
        self.service = ""
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict) -> None:
        self.service, self.handlers = service, handlers


def _lenient(parse: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def parse_or_none(data: bytes) -> object:
        try:
            return parse(data)
        except DecodeError:
            return None

    return parse_or_none


def add_lenient_servicer(service: pb_grpc.RendezvousServicer, server: grpc.aio.Server) -> None:
    """Register every RPC of the Rendezvous service as the generated code would, except
    that a request that is not a protobuf message reaches the method as None (to be
    answered INVALID_ARGUMENT) instead of failing in gRPC with UNKNOWN and a traceback."""
    caught = _Handlers()
    pb_grpc.add_RendezvousServicer_to_server(service, caught)
    handlers = {
        name: handler._replace(request_deserializer=_lenient(handler.request_deserializer))
        for name, handler in caught.handlers.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(caught.service, handlers),))
    server.add_registered_method_handlers(caught.service, handlers)


SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Rendezvous"].full_name


async def serve(server: grpc.aio.Server, service: CoordinatorService, checker: health.aio.HealthServicer) -> None:
    """Start serving Rendezvous and the standard gRPC health service (grpc.health.v1), both
    SERVING; call `checker.enter_graceful_shutdown()` before stopping."""
    add_lenient_servicer(service, server)
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    await server.start()
    for name in ("", SERVICE_NAME):
        await checker.set(name, health_pb2.HealthCheckResponse.SERVING)
