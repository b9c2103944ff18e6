"""`rendezvous stop` on the coordinator, and who may read a job's status.

Stop: the request names the job in its header and the daemon it is addressed to (its node
id, random at each start of a daemon); with a token it is signed like any other request
(`_auth.open_request`) and refused when its nonce was seen before, its time is outside the
replay window (`core.auth.ReplayGuard`), or it is addressed to another node id. So a
recorded stop is taken at most once, by the daemon it was sent to: played again to the
same daemon its nonce was seen; played to a later run of the job (the daemons started
again, under the same name and token) it names a node id no daemon has any more. A node
that does not coordinate the job answers with the one it believes does, for the caller to
ask instead.

Status and JobStatus of a job with a token answer an unsigned request with nothing but
"this job needs a token".
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional

import grpc
from google.protobuf.message import Message

from ..core.auth import AuthError, Keys, ReplayGuard
from ..core.status import printable
from ..core.view import Target
from ..v1 import rendezvous_pb2 as pb
from . import _auth, _wire
from ._coordination import Coordination
from ._guard import Guard, source_of
from ._join import check_header

log = logging.getLogger(__name__)

#: What an unsigned request to a job with a token is told, and all it is told.
NEEDS_TOKEN = "needs a token"


def needs_token(job: str) -> str:
    return f"job {job!r} {NEEDS_TOKEN}: ask with --token-file holding its secret"


async def open_signed(keys: Optional[Keys], job: str, guard: Guard, request: Message,
                      context: grpc.aio.ServicerContext) -> _auth.Signer:
    """The signer for the answer: none without a token; with one, the request must be
    signed with it (an unsigned one is told only that the job needs a token)."""
    if keys is None:
        return _auth.Signer(None)
    if not request.header.auth.scheme:  # type: ignore[attr-defined]
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, needs_token(job))
    try:
        return _auth.open_request(keys, request)
    except AuthError as exc:
        await guard.refuse(context, source_of(context), str(exc))
        raise  # pragma: no cover  (refuse aborts the call)


def misaddressed(job: str, addressed: str, me: str) -> str:
    """Why a stop for another daemon (or none) is refused: its node id is in what is signed,
    and a daemon's node id is new at each start, so a stop recorded for an earlier run of
    the job is refused by this one."""
    to = f"node {printable(addressed, 40)!r}" if addressed else "no node"
    return (f"the stop of job {job!r} is addressed to {to}, and this is node {me}: a stop for an earlier run "
            "of the job (or of this daemon before a restart) stops nothing; ask again")


def coordinating(c: Coordination, target: Target) -> bool:
    """Whether this node holds the job's round, as JobStatus tells it."""
    return bool(c.round.joined) or target.endpoint == c.me.endpoint


class Stops:
    """Serves Stop for one node. `replay_window`: how old a signed request may be, and how
    long its nonce is remembered (twice that)."""

    def __init__(self, coordination: Coordination, guard: Guard, keys: Optional[Keys],
                 target: Callable[[], Target], replay_window: float) -> None:
        self._c = coordination
        self._guard = guard
        self._keys = keys
        self._target = target
        self._replays = ReplayGuard(window=replay_window)

    async def serve(self, request: Optional[pb.StopRequest], context: grpc.aio.ServicerContext) -> pb.StopResponse:
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a StopRequest")
            raise AssertionError("abort raises")  # pragma: no cover
        return await self._serve(request, context)

    async def _serve(self, request: pb.StopRequest, context: grpc.aio.ServicerContext) -> pb.StopResponse:
        c = self._c
        refusal = check_header(c, request.header)
        if refusal is not None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, refusal.message)
        if self._keys is None and request.header.auth.scheme:
            # The caller believes the job has a token: stopping it anyway would answer in a way
            # its caller cannot trust, after the fact.
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                f"job {c.round.job!r} has no token: stop it without --token-file")
        signer = await open_signed(self._keys, c.round.job, self._guard, request, context)
        source = source_of(context)
        if signer.active:
            await self._check_replay(request, context, source)
        if (signer.active or request.node_id) and request.node_id != c.me.node_id:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, misaddressed(c.round.job, request.node_id,
                                                                                  c.me.node_id))
        target = self._target()
        if not coordinating(c, target):
            answer = pb.StopResponse(header=self._header(), coordinating=False)
            if target.peer is not None:
                answer.coordinator.CopyFrom(_wire.peer_to_pb(target.peer))
            return signer.seal(answer)
        try:
            order = _wire.stop_order_from_pb(pb.StopOrder(
                address=source, user=request.user, reason=request.reason,
                stop_grace=request.stop_grace if request.HasField("stop_grace") else None,
            ))
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, printable(str(exc)))
        state = c.round
        members = c.stop(order)
        return signer.seal(pb.StopResponse(
            header=self._header(), coordinating=True, members=_wire.peers_to_pb(members),
            round=state.number, phase=state.phase.value,
        ))

    async def _check_replay(self, request: pb.StopRequest, context: grpc.aio.ServicerContext, source: str) -> None:
        signed = request.header.auth
        try:
            self._replays = self._replays.admit(signed.nonce, signed.timestamp_ms / 1e3, time.time())
        except AuthError as exc:
            await self._guard.refuse(context, source, str(exc))

    def _header(self) -> pb.Header:
        return _wire.header(self._c.round.job, self._c.round.number, self._c.me.node_id)
