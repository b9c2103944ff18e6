"""One peer's Join stream on the coordinator: the handshake, the admission
(core.admission), then its messages both ways until the round ends for it."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional

import grpc
from google.protobuf.message import DecodeError

from ..core import admission
from ..core import job as jobs
from ..core import round as rounds
from ..core.advert import PROTOCOL_VERSION
from ..core.auth import AuthError, Keys
from ..core.peer import IPAddress, Peer
from ..core.round import Action, RejectReason, Step
from ..core.size import Size
from ..core.status import printable
from ..core.view import Target
from ..v1 import rendezvous_pb2 as pb
from . import _auth, _wire, _wire_sync
from ._coordination import END, Coordination
from ._guard import Guard

log = logging.getLogger(__name__)

_REASONS = {
    RejectReason.EXPECT_MISMATCH: pb.Rejected.EXPECT_MISMATCH,
    RejectReason.ALREADY_FROZEN: pb.Rejected.ALREADY_FROZEN,
    RejectReason.DUPLICATE_NODE: pb.Rejected.DUPLICATE_NODE,
    RejectReason.ENDPOINT_CLASH: pb.Rejected.ENDPOINT_CLASH,
    RejectReason.NOT_A_MEMBER: pb.Rejected.BAD_REQUEST,
}
_REFUSALS = {
    admission.Refused.VERSION_MISMATCH: pb.Rejected.VERSION_MISMATCH,
    admission.Refused.BAD_REQUEST: pb.Rejected.BAD_REQUEST,
}


def refusal_to_pb(coordination: Coordination, refusal: admission.Refusal) -> pb.CoordinatorMessage:
    return coordination.rejected(_REFUSALS[refusal.reason], refusal.message)


def check_header(coordination: Coordination, header: pb.Header) -> Optional[admission.Refusal]:
    return admission.check_header(_wire.header_from_pb(header), coordination.round.job, PROTOCOL_VERSION)


class JoinStreams:
    """Serves every Join stream of one node. `target` names the node this one believes
    coordinates; `own_round` the round this node is in itself."""

    def __init__(
        self, coordination: Coordination, guard: Guard, keys: Optional[Keys],
        target: Callable[[], Target], own_round: Callable[[], int],
        allowed: Optional[frozenset[IPAddress]] = None,
    ) -> None:
        self._c = coordination
        self._allowed = allowed
        self._guard = guard
        self._keys = keys
        self._target = target
        self._own_round = own_round

    async def serve(self, context: grpc.aio.ServicerContext, source: str) -> None:
        c = self._c
        first = await self._read_first(context, source)
        signer = await self._authenticate(context, first, source)
        answer = admission.answer(
            c.round, c.me, self._target(), self._ask(first, source),
            own=self._own_round(), stopped=c.stopped, streaming=c.outboxes.keys(), now=time.monotonic(),
            allowed=self._allowed,
        )
        if answer.warning is not None:
            kind, text = answer.warning
            self._guard.warn(kind, source, "%s", text)
        if answer.duplicate and answer.peer is not None:
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"node id {answer.peer.node_id} already has an open stream")
        reply = self._reply(answer, source)
        if reply is not None:
            await context.write(signer.seal(reply))
            return
        *before, step = answer.steps
        for earlier in before:  # an abort that admits this peer goes to the old round's members
            c.apply(earlier)
        assert answer.peer is not None
        await self._stream(context, answer.peer, signer, step)

    @staticmethod
    def _ask(first: pb.PeerMessage, source: str) -> admission.JoinAsk:
        """The Join's first message as values; what cannot be read becomes its problem."""
        try:
            peer: Peer | str = _wire.peer_from_pb(first.join.peer)
        except (ValueError, TypeError) as exc:
            peer = str(exc)
        try:
            expect: Size | str = _wire.size_from_pb(first.join)
        except ValueError as exc:
            expect = str(exc)
        return admission.JoinAsk(
            _wire.header_from_pb(first.header), source, peer, expect, _wire.optional_fingerprint_from_pb(first.join),
        )

    def _reply(self, answer: admission.Answer, source: str) -> Optional[pb.CoordinatorMessage]:
        """The message a Join that is not admitted is answered with; None when it is."""
        c = self._c
        if answer.refusal is not None:
            return refusal_to_pb(c, answer.refusal)
        if answer.rejection is not None:
            return c.rejected(_REASONS[answer.rejection.reason], answer.rejection.message)
        if answer.redirection is not None:
            return c.message(redirect=_wire.redirect_to_pb(answer.redirection))
        if answer.stop is not None:
            log.info("answered a Join from %s with the stop of job %r", source, c.round.job)
            return c.stopped_message(answer.stop)
        return None

    async def _stream(
        self, context: grpc.aio.ServicerContext, peer: Peer, signer: _auth.Signer, step: rounds.Step
    ) -> None:
        c = self._c
        outbox: asyncio.Queue[Optional[pb.CoordinatorMessage]] = asyncio.Queue()
        c.outboxes[peer.node_id] = outbox
        reader = asyncio.create_task(self._read(context, peer, outbox, signer), name=f"read-{peer.node_id}")
        try:
            c.apply(step)  # a freeze counts every member as heard
            while (message := await self._next_message(outbox, peer)) is not END:
                await context.write(signer.seal(message))
        finally:
            reader.cancel()
            if c.outboxes.get(peer.node_id) is outbox:
                del c.outboxes[peer.node_id]
                now = time.monotonic()
                c.watchdog.notice_pause(now)
                c.apply(rounds.leave(c.round, peer.node_id, now))

    async def _read_first(self, context: grpc.aio.ServicerContext, source: str) -> pb.PeerMessage:
        """The stream's first message, a join, within the handshake time."""
        message = await self._read_within(context, source)
        if message is grpc.aio.EOF:  # a peer that learned of a lower one before it sent its join
            log.debug("a Join stream from %s ended before its join", source)
            await context.abort(grpc.StatusCode.CANCELLED, "the stream ended before its join")
        if message.WhichOneof("body") != "join":
            self._guard.warn("first", source, "refused a Join stream from %s: it did not start with a join", source)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "first message must be a join")
        return message

    async def _read_within(self, context: grpc.aio.ServicerContext, source: str):
        handshake = self._c.timings.handshake
        try:
            message = await asyncio.wait_for(context.read(), handshake)
        except asyncio.TimeoutError:
            self._guard.warn("silent", source, "closed a Join stream from %s: nothing within %g s", source, handshake)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "no join within the handshake time")
        if message is None:
            self._guard.warn("malformed", source, "refused a Join stream from %s: not a protobuf message", source)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a PeerMessage")
        return message

    async def _authenticate(self, context: grpc.aio.ServicerContext, first: pb.PeerMessage, source: str) -> _auth.Signer:
        """With a token: check the join's MAC, send the challenge and check the proof (see
        rendezvous.core.auth). A peer is admitted only after this."""
        try:
            signer = _auth.server_signer(self._keys, first)
            if signer.active:
                challenge = _auth.new_nonce()
                signer.stream = signer.stream.with_server_nonce(challenge)  # type: ignore[union-attr]
                await context.write(signer.seal(self._c.message(heartbeat=pb.Heartbeat()), nonce=challenge))
                proof = await self._read_within(context, source)
                if proof is grpc.aio.EOF:
                    raise AuthError("the stream ended before the proof")
                signer.open(proof)
        except AuthError as exc:
            await self._guard.refuse(context, source, str(exc))
        return signer

    async def _next_message(self, outbox: asyncio.Queue, peer: Peer) -> Optional[pb.CoordinatorMessage]:
        """The next message for a peer; a heartbeat when there was none for a while, in a
        running round (core.round.check_liveness), unless the peer is this node's own member,
        which shares its process."""
        c = self._c
        beats = c.round.running and peer.node_id != c.me.node_id
        try:
            return await asyncio.wait_for(outbox.get(), c.heartbeat_interval if beats else None)
        except asyncio.TimeoutError:
            return c.message(heartbeat=pb.Heartbeat())

    async def _read(
        self, context: grpc.aio.ServicerContext, peer: Peer, outbox: asyncio.Queue, signer: _auth.Signer
    ) -> None:
        c = self._c
        try:
            while (message := await context.read()) is not grpc.aio.EOF:
                if message is None:
                    raise DecodeError("not a PeerMessage")
                signer.open(message)
                if message.header.round != c.round.number:
                    continue  # rounds never mix: a message of another round is stale
                c.apply(Step(rounds.heard(c.round, peer.node_id, time.monotonic()), Action.NOTHING))
                self._take(peer, message)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass
        except (AuthError, DecodeError) as exc:
            log.warning("closed the stream of %s: %s", peer.describe(), exc)
            outbox.put_nowait(c.rejected(pb.Rejected.BAD_REQUEST, f"closed: {exc}"))
        outbox.put_nowait(END)

    def _take(self, peer: Peer, message: pb.PeerMessage) -> None:
        """A member's message of the current round."""
        c = self._c
        kind = message.WhichOneof("body")
        if kind == "ready":
            sync = _wire_sync.sync_from_pb(message.ready.sync)
            c.apply(rounds.ready(c.round, peer.node_id, message.ready.cluster_digest, sync))
        elif kind == "finished":
            done = message.finished
            log.info("%s finished with exit code %d%s", peer.describe(), done.exit_code,
                     f" ({printable(done.reason)})" if done.reason else "")
            c.note(lambda board: jobs.finished(board, peer.node_id, done.exit_code, time.monotonic()))
            sync = _wire_sync.sync_from_pb(done.sync)
            failure = _wire.optional_failure_from_pb(done)
            c.apply(rounds.finished(c.round, peer.node_id, done.exit_code, done.reason, sync, failure))
        elif kind == "progress":
            try:
                progress = _wire.progress_from_pb(message.progress)
            except ValueError as exc:
                log.debug("ignored progress of %s: %s", peer.describe(), exc)
                return
            c.note(lambda board: jobs.progressed(board, peer.node_id, progress))
        elif kind == "synced":
            c.apply(rounds.synced(c.round, peer.node_id, message.synced.digest, message.synced.error))
