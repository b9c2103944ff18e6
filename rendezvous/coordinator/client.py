"""The peer side: one Join stream to the coordinator, read as domain events."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any, Callable, Optional, TypeVar, Union

import grpc
from google.protobuf.message import Message

from ..core.advert import Advert
from ..core.auth import AuthError, Keys
from ..core.failure import Failure
from ..core.manifest import SyncSummary
from ..core.member import (
    Aborted,
    Completed,
    CoordinatorEvent,
    Frozen,
    Heartbeat,
    Redirected,
    Rejected,
    Released,
    SyncFrom,
    Waiting,
)
from ..core.adverts import Gossip
from ..core.job import JobView
from ..core.peer import Peer
from ..core.preflight import Fingerprint
from ..core.progress import Progress
from ..core.record import record
from ..core.round import MIN_LIVENESS_TIMEOUT
from ..core.size import Size
from ..core.status import NodeStatus, printable
from ..core.stopping import StopOrder
from ..core.tf_config import Membership
from ..errors import NoDaemonError, RequestRefused
from ..v1 import rendezvous_pb2 as pb
from ..v1 import rendezvous_pb2_grpc as pb_grpc
from . import _auth, _wire, _wire_sync
from .local import JoinHandler, LocalCall

log = logging.getLogger(__name__)

Answer = TypeVar("Answer")


class SessionLost(Exception):
    """The stream to the coordinator ended or could not be opened."""


class Untrusted(SessionLost):
    """The coordinator failed authentication, or refused this node's: one of the two does
    not hold the job's token."""


class StatusUntrusted(NoDaemonError):
    """A Status answer that failed authentication, or a refusal of this node's request."""


class JoinSession:
    """A Join stream from `me` to the coordinator at `endpoint`; with `local`, to this
    node's own servicer, inside the process (see .local)."""

    def __init__(
        self, endpoint: str, me: Peer, job: str, round: int, expect: Size, keepalive: Optional[float],
        fingerprint: Optional[Fingerprint] = None,
        keys: Optional[Keys] = None,
        local: Optional[JoinHandler] = None,
    ) -> None:
        self.endpoint = endpoint
        self._signer, self._nonce = _auth.client_signer(keys)
        self._challenged = not self._signer.active
        self._me = me
        self._fingerprint = fingerprint
        self._job = job
        self._round = round
        self._expect = expect
        self._channel: Optional[grpc.aio.Channel] = None
        self._call: Union[grpc.aio.StreamStreamCall, LocalCall]
        if local is not None:
            self._call = LocalCall(local, me)
        else:
            self._channel = grpc.aio.insecure_channel(endpoint, options=_wire.channel_options(keepalive))
            self._call = pb_grpc.RendezvousStub(self._channel).Join()
        self._writing = asyncio.Lock()

    def _message(self, **body: object) -> pb.PeerMessage:
        return pb.PeerMessage(header=_wire.header(self._job, self._round, self._me.node_id), **body)

    async def _write(self, message: pb.PeerMessage) -> None:
        try:
            async with self._writing:  # one write at a time: heartbeats go out beside the rest
                await self._call.write(self._signer.seal(message, self._nonce))
                self._nonce = b""  # only the join carries it
        except (grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError) as exc:
            raise SessionLost(f"stream to {self.endpoint} broke: {exc}") from None

    async def join(self) -> None:
        request = pb.JoinRequest(peer=_wire.peer_to_pb(self._me), **self._expect.fields())
        if self._fingerprint is not None:
            request.fingerprint.CopyFrom(_wire.fingerprint_to_pb(self._fingerprint))
        await self._write(self._message(join=request))

    async def ready(self, digest: str, sync: Optional[SyncSummary] = None) -> None:
        await self._write(self._message(ready=pb.Ready(cluster_digest=digest, sync=_wire_sync.sync_to_pb(sync))))

    async def finished(self, exit_code: int, reason: str = "", sync: Optional[SyncSummary] = None,
                       failure: Optional[Failure] = None) -> None:
        finished = pb.Finished(exit_code=exit_code, reason=reason, sync=_wire_sync.sync_to_pb(sync),
                               failure=_wire.failure_to_pb(failure) if failure else None)
        await self._write(self._message(finished=finished))

    async def synced(self, digest: str, error: str = "") -> None:
        await self._write(self._message(synced=pb.Synced(digest=digest, error=error)))

    async def progress(self, progress: Progress) -> None:
        await self._write(self._message(progress=_wire.progress_to_pb(progress)))

    async def heartbeat(self) -> None:
        if not self._challenged:
            return  # before the challenge, the coordinator waits for the proof alone
        await self._write(self._message(heartbeat=pb.Heartbeat()))

    async def receive(self) -> CoordinatorEvent:
        try:
            message = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            lost = Untrusted if exc.code() is grpc.StatusCode.UNAUTHENTICATED else SessionLost
            raise lost(f"{self.endpoint}: {_why_ended(exc)}") from None
        if message is grpc.aio.EOF:
            raise SessionLost(f"{self.endpoint} closed the stream")
        try:
            if not self._challenged:
                self._signer.accept_challenge(message)
                self._challenged = True
                await self.heartbeat()  # the proof: now the coordinator admits this node
            else:
                self._signer.open(message)
        except AuthError as exc:
            raise Untrusted(f"coordinator {self.endpoint} failed authentication: {exc}") from None
        # A node that joins late (restarted) joins the round being formed, whatever its own
        # count said: from now on its messages carry that round.
        self._round = max(self._round, message.header.round)
        return self._event(message)

    def _event(self, message: pb.CoordinatorMessage) -> CoordinatorEvent:
        kind = message.WhichOneof("body")
        try:
            if kind == "waiting":
                joined = tuple(_wire.peer_from_pb(p) for p in message.waiting.joined)
                return Waiting(joined, _wire.size_from_pb(message.waiting))
            if kind == "frozen":
                members = tuple(_wire.peer_from_pb(p) for p in message.frozen.members)
                gpus = message.frozen.gpus if message.frozen.HasField("gpus") else None
                membership = Membership(message.header.job, message.header.round, members, gpus)
                liveness = message.frozen.liveness_timeout
                if not (liveness == 0 or MIN_LIVENESS_TIMEOUT <= liveness < math.inf):
                    raise ValueError(f"liveness timeout {liveness!r} is not a number of seconds "
                                     f"from {MIN_LIVENESS_TIMEOUT:g} up")
                return Frozen(membership, message.frozen.cluster_digest, tuple(message.frozen.warnings), liveness)
        except ValueError as exc:
            return Aborted(f"coordinator {self.endpoint} sent an invalid {kind} message: {exc}")
        if kind == "release":
            start_in = message.release.start_at_unix_ns / 1e9 - time.time()
            return Released(start_in, message.release.delay_ns / 1e9)
        if kind == "redirect":
            return Redirected(
                _wire.optional_peer_from_pb(message.redirect.coordinator), message.redirect.reason
            )
        if kind == "rejected":
            reason = pb.Rejected.Reason.Name(message.rejected.reason)
            return Rejected(reason, message.rejected.message)
        if kind == "aborted":
            aborted = message.aborted
            return Aborted(aborted.reason, aborted.exit_code, aborted.final, aborted.preflight, self._stop_of(aborted),
                           _wire.optional_failure_from_pb(aborted))
        if kind == "completed":
            return Completed()
        if kind == "sync_from":
            order = message.sync_from
            source = _wire.optional_peer_from_pb(order.source)
            if source is None:
                return Aborted(f"coordinator {self.endpoint} named no valid source to sync from")
            return SyncFrom(source, order.digest, order.total_bytes, order.final)
        if kind == "heartbeat":
            return Heartbeat()
        return Aborted(f"coordinator {self.endpoint} sent an unknown message {kind!r}")

    def _stop_of(self, aborted: pb.Aborted) -> Optional[StopOrder]:
        """Who stopped the job, if `rendezvous stop` did; a stop with a grace that is no
        number of seconds still stops, with this node's own --stop-grace."""
        if not aborted.HasField("stop"):
            return None
        try:
            return _wire.stop_order_from_pb(aborted.stop)
        except ValueError as exc:
            log.warning("coordinator %s: %s; this node's --stop-grace applies", self.endpoint, printable(str(exc)))
            aborted.stop.ClearField("stop_grace")
            return _wire.stop_order_from_pb(aborted.stop)

    async def close(self) -> None:
        self._call.cancel()
        if self._channel is not None:
            await self._channel.close()
        elif isinstance(self._call, LocalCall):
            await self._call.wait_closed()


class TokenNeeded(RequestRefused):
    """The job has a token, and the request was not signed: that is all it said."""


class Unreachable(NoDaemonError):
    """Nothing listens at the endpoint (connection refused): no daemon runs there now."""


class TokenRefused(RequestRefused, StatusUntrusted):
    """A signed request refused, or an answer not signed with the request's token: the two
    sides hold different tokens (`status --job` and `stop` exit with RequestRefused's status)."""


# What grpc.aio reports instead of the server's own status when a write fails because
# the server has just ended the stream (grpc/grpc#36066): the reason is lost on the way.
_CLOBBERED = (grpc.StatusCode.INTERNAL, "Internal error from Core")


def _why_ended(exc: grpc.aio.AioRpcError) -> str:
    """A Join stream's end as the member says it: the status, or what a status that
    gRPC replaced with its own internal error means."""
    if (exc.code(), exc.details()) == _CLOBBERED:
        return "the coordinator ended the stream (gRPC lost its status: this node was writing to it then)"
    return f"{exc.code().name} {printable(exc.details() or '')}"


async def _ask(endpoint: str, timeout: float, method: str, request: Message):
    """One unary call (Status, JobStatus, Stop); NoDaemonError if it gets no answer in time,
    TokenNeeded if it was unsigned and the job has a token, StatusUntrusted if it was signed
    and refused."""
    async with grpc.aio.insecure_channel(endpoint, options=_wire.channel_options()) as channel:
        call = getattr(pb_grpc.RendezvousStub(channel), method)
        try:
            return await call(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            details = printable(exc.details() or "")
            if exc.code() is grpc.StatusCode.UNAUTHENTICATED:
                if not request.header.auth.scheme:  # type: ignore[attr-defined]
                    raise TokenNeeded(f"{endpoint}: {details}") from None
                raise TokenRefused(f"{endpoint} refused this node's signed request: {details}") from None
            if exc.code() is grpc.StatusCode.UNAVAILABLE:
                raise Unreachable(f"no daemon answers at {endpoint}: {details}") from None
            if exc.code() is grpc.StatusCode.UNIMPLEMENTED:
                raise RequestRefused(f"{endpoint} runs a rendezvous without {method} (an older version)") from None
            if exc.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT):
                raise RequestRefused(f"{endpoint} refused the request: {details}") from None
            raise NoDaemonError(f"the daemon at {endpoint} did not answer: {exc.code().name} {details}") from None


async def fetch_status(
    endpoint: str, timeout: float, keys: Optional[Keys] = None, caller: Optional[Advert] = None,
    about: Optional[Advert] = None,
) -> NodeStatus:
    """The Status of the daemon at `endpoint`; NoDaemonError if it does not answer in time,
    or (with `keys`) if its answer is not signed with them. A peer sends its own advert as
    the `caller`, and the advert it confirms as `about` (see StatusRequest)."""
    request = pb.StatusRequest(caller=_wire.advert_to_pb(caller)) if caller else pb.StatusRequest()
    if about is not None:
        request.about.CopyFrom(_wire.advert_to_pb(about))
    return await _ask_signed(endpoint, timeout, "Status", keys, request, _wire.status_from_pb, StatusUntrusted, "status")


async def fetch_job_status(endpoint: str, timeout: float, keys: Optional[Keys] = None, job: str = "") -> JobView:
    """The job as the daemon at `endpoint` sees it; NoDaemonError if it does not answer, or
    (with `keys`, those of `job`) if its answer is not signed with them."""
    request = pb.StatusRequest(header=_wire.header(job, 0, ""))
    return await _ask_signed(endpoint, timeout, "JobStatus", keys, request, _wire.job_view_from_pb, TokenRefused,
                             "job status")


async def _ask_signed(
    endpoint: str, timeout: float, rpc: str, keys: Optional[Keys], request: pb.StatusRequest,
    read: Callable[[Any], Answer], refused: type[StatusUntrusted], what: str,
) -> Answer:
    """Ask `rpc` with `request` signed (with `keys`), check the answer's signature and read
    it; `refused` if it is not signed with them, NoDaemonError if it cannot be read."""
    signer, request = _auth.sign_request(keys, request)
    response = await _ask(endpoint, timeout, rpc, request)
    try:
        signer.open(response)
        return read(response)
    except AuthError as exc:
        raise refused(f"the answer of {endpoint}: {exc}") from None
    except ValueError as exc:
        raise NoDaemonError(f"the daemon at {endpoint} sent an invalid {what}: {printable(str(exc))}") from None


@record
class StopAnswer:
    """What the node asked to stop a job said: whether it coordinates the job (else whom it
    believes does), the members it told to stop, and the round and phase the stop came in."""

    coordinating: bool
    coordinator: Optional[Peer] = None
    members: tuple[Peer, ...] = ()
    round: int = 0
    phase: str = ""


async def _node_id(endpoint: str, timeout: float, keys: Keys) -> str:
    """The node id of the daemon at `endpoint`, from its signed Status; "" when it answers
    unsigned: its job has no token, which the Stop then says."""
    try:
        return (await fetch_status(endpoint, timeout, keys)).node.node_id
    except TokenRefused:
        raise
    except StatusUntrusted:
        return ""


def stop_request(job: str, node_id: str, keys: Optional[Keys] = None, user: str = "", reason: str = "",
                 grace: Optional[float] = None, now_ms: int = 0) -> tuple[_auth.Signer, pb.StopRequest]:
    """The Stop request for the daemon whose node id is `node_id` (random at each start of
    a daemon: a stop for one run of a job is refused by the next), signed with `keys` if
    given and stamped `now_ms`; and the signer that checks the answer."""
    request = pb.StopRequest(header=_wire.header(job, 0, ""), user=user, reason=reason, node_id=node_id)
    if grace is not None:
        request.stop_grace = grace
    return _auth.sign_request(keys, request, now_ms=now_ms)


async def stop_job(
    endpoint: str, job: str, timeout: float, keys: Optional[Keys] = None, user: str = "", reason: str = "",
    grace: Optional[float] = None, node_id: Optional[str] = None,
) -> StopAnswer:
    """Ask the node at `endpoint` to stop `job`: addressed to its node id (`node_id`, or
    asked from its Status first), signed with `keys` if given, stamped with this machine's
    clock (the coordinator refuses a replayed or stale one, or one for another node)."""
    began = time.monotonic()
    if node_id is None:
        node_id = await _node_id(endpoint, timeout, keys) if keys is not None else ""
    signer, request = stop_request(job, node_id, keys, user, reason, grace, now_ms=int(time.time() * 1e3))
    response = await _ask(endpoint, max(timeout - (time.monotonic() - began), 0.1), "Stop", request)
    try:
        signer.open(response)
        members = tuple(_wire.peer_from_pb(p) for p in response.members)
        coordinator = _wire.optional_peer_from_pb(response.coordinator)
    except AuthError as exc:
        raise TokenRefused(f"the answer of {endpoint}: {exc}") from None
    except (ValueError, TypeError) as exc:
        raise NoDaemonError(f"the daemon at {endpoint} sent an invalid answer: {printable(str(exc))}") from None
    return StopAnswer(response.coordinating, coordinator, members, response.round, printable(response.phase, 40))


def open_channel(endpoint: str) -> grpc.aio.Channel:
    """A channel for short unary calls (Exchange): no keepalive pings, no proxy."""
    return grpc.aio.insecure_channel(endpoint, options=_wire.channel_options(keepalive=None))


async def exchange(
    channel: grpc.aio.Channel, gossip: Gossip, sender: str, timeout: float, keys: Optional[Keys] = None
) -> Gossip:
    """Send `gossip` to the node behind `channel`, signed with `keys` if given; its answer.
    SessionLost if it does not answer (or takes no part in unicast discovery), or (with
    `keys`) if its answer is not signed with them."""
    signer, request = _auth.sign_request(keys, _wire.gossip_to_pb(gossip, sender))
    try:
        response = await pb_grpc.RendezvousStub(channel).Exchange(request, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        raise SessionLost(f"{exc.code().name} {exc.details()}") from None
    try:
        signer.open(response)
    except AuthError as exc:
        raise SessionLost(f"the answer is not signed with the job's token: {exc}") from None
    return _wire.gossip_from_pb(response)
