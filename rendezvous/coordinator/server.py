"""The coordinator side: a grpc.aio servicer that applies the pure round state machine."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from typing import Callable, Optional, Sequence

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ..config.options import Timings
from ..core import job as jobs
from ..core import round as rounds
from ..core.advert import PROTOCOL_VERSION, Advert
from ..core.adverts import Gossip
from ..core.auth import AuthError, Keys
from ..core.manifest import out_of_sync
from ..core.peer import Peer, parse_address, parse_grpc_peer, same_host
from ..core.round import Action, Policy, RejectReason, Round, RoundPhase, Step
from ..core.size import Size
from ..core.status import NodeStatus, printable
from ..core.view import Target
from ..host.ports import check_port_free
from ..v1 import rendezvous_pb2 as pb
from ..v1 import rendezvous_pb2_grpc as pb_grpc
from . import _auth, _wire, limits
from .transfer import FileSource

log = logging.getLogger(__name__)

_REASONS = {
    RejectReason.EXPECT_MISMATCH: pb.Rejected.EXPECT_MISMATCH,
    RejectReason.ALREADY_FROZEN: pb.Rejected.ALREADY_FROZEN,
    RejectReason.DUPLICATE_NODE: pb.Rejected.DUPLICATE_NODE,
    RejectReason.ENDPOINT_CLASH: pb.Rejected.ENDPOINT_CLASH,
    RejectReason.NOT_A_MEMBER: pb.Rejected.BAD_REQUEST,
}

# Closes a peer's outbound queue.
_END = None
# The settle check runs this much after the settle time, never a tick before it.
_SETTLE_SLACK = 0.01

# Rounds a join may ask for: --max-restarts is at most 1,000, so no real job gets near; a
# forged join must not move the coordinator to the end of the counter.
MAX_ROUND = 2**32

# Open Join streams from one address at most: a node opens one, a host a few.
MAX_STREAMS_PER_SOURCE = 64


def _source(context: grpc.aio.ServicerContext) -> str:
    """The caller's address as gRPC names it, without the port."""
    try:
        return str(parse_grpc_peer(context.peer()))
    except ValueError:
        return context.peer()


def _check_source(peer: Peer, source: str) -> None:
    """A peer must connect from the address it claims: else anyone could join as another
    host, whose TF worker would then be listed without knowing it."""
    try:
        ok = same_host(peer.address, parse_address(source))
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"it claims address {peer.address} but connects from {source}")


class RateLimitedWarnings:
    """One warning line per kind and address per `interval` seconds, then how many were
    left out: a flood of bad requests must not become a flood of log lines."""

    def __init__(self, logger: logging.Logger, interval: float = 30.0, capacity: int = 1024) -> None:
        self._log = logger
        self._interval = interval
        self._capacity = capacity
        self._last: dict[tuple[str, str], float] = {}
        self._skipped: Counter[tuple[str, str]] = Counter()

    def warn(self, kind: str, source: str, message: str, *args: object) -> None:
        key = (kind, source)
        now = time.monotonic()
        if now - self._last.get(key, -math.inf) < self._interval or (
            key not in self._last and len(self._last) >= self._capacity
        ):
            self._skipped[key] += 1
            return
        skipped = self._skipped.pop(key, 0)
        self._last[key] = now
        suffix = f" ({skipped} more like it in the last {self._interval:.0f} s)" if skipped else ""
        self._log.warning(message + suffix, *args)
        if len(self._last) >= self._capacity:
            self._last = {k: t for k, t in self._last.items() if now - t < self._interval}


class CoordinatorService(pb_grpc.RendezvousServicer):
    """Serves Join on every node; only the node that is the coordinator admits peers.

    `target` tells which endpoint this node currently believes is the coordinator: while
    the round gathers, a node that is not it redirects every peer there. `status` gives this
    node's current state for the Status RPC.
    """

    def __init__(
        self,
        me: Peer,
        job: str,
        expect: Size,
        target: Callable[[], Target],
        status: Callable[[], NodeStatus],
        timings: Timings,
        liveness_timeout: float = 5.0,
        policy: Policy = Policy(),
        settle: float = 0.0,
        keys: Optional[Keys] = None,
    ) -> None:
        self._me = me
        self._keys = keys
        self._streams: Counter[str] = Counter()  # open Join streams by source address
        self._warnings = RateLimitedWarnings(log)
        self._target = target
        self._status = status
        self._timings = timings
        self._liveness = liveness_timeout
        self.round = Round(job=job, expect=expect, settle=settle, policy=policy)
        self.board = jobs.Board()  # what `status --job` shows beyond the round itself
        self._outboxes: dict[str, asyncio.Queue[Optional[pb.CoordinatorMessage]]] = {}
        self._watchdog: Optional[asyncio.Task] = None
        self.files: Optional[FileSource] = None  # --sync-dir: this node's copy, to serve
        self._waiting_due: Optional[asyncio.TimerHandle] = None
        #: Answers Exchange: what a node sent -> what it lacks, or None when this node takes
        #: no part in unicast discovery. Set by whoever owns the discovery.
        self.exchange: Callable[[Gossip], Optional[Gossip]] = lambda gossip: None
        #: Takes the advert a peer sent with its Status request (a hint, like one heard over
        #: mDNS). Set by whoever owns the discovery.
        self.hint: Callable[[Advert], None] = lambda advert: None

    def moved(self, me: Peer) -> None:
        """This node now advertises its address of the job's IP family (core.family): the
        peers that joined it on the other one start over, wherever their view says."""
        self._me = me
        self._redirect_all(f"now on IPv{me.address.version}", f"the coordinator uses IPv{me.address.version} now")

    @property
    def heartbeat_interval(self) -> float:
        return rounds.heartbeat_interval(self._liveness)

    # -- applying decisions -------------------------------------------------------

    def _message(self, **body: object) -> pb.CoordinatorMessage:
        return pb.CoordinatorMessage(
            header=_wire.header(self.round.job, self.round.number, self._me.node_id), **body
        )

    def _broadcast(self, message: Optional[pb.CoordinatorMessage]) -> None:
        for outbox in self._outboxes.values():
            outbox.put_nowait(message)

    def _end_streams(self) -> None:
        """End every open stream once its peer has had time to read the last message: a
        peer closes its side when it has, and ending first could make a write of its (a
        heartbeat) fail and cost it that message."""
        loop = asyncio.get_running_loop()
        for outbox in self._outboxes.values():
            loop.call_later(self._timings.end_grace, outbox.put_nowait, _END)

    def _note(self, change: Callable[[jobs.Board], jobs.Board]) -> None:
        self.board = change(jobs.for_round(self.board, self.round.number))

    def _apply(self, step: Step) -> None:
        self.round = state = step.state
        if step.action is Action.BROADCAST_WAITING:
            self._schedule_waiting()
            if state.expect.elastic:
                asyncio.get_running_loop().call_later(state.settle + _SETTLE_SLACK, self._settle)
        elif step.action is Action.BROADCAST_FROZEN and state.membership:
            membership = state.membership
            log.info(
                "froze job %r round %d: %s",
                state.job, state.number, ", ".join(p.tf_endpoint for p in membership.members),
            )
            frozen = pb.Frozen(
                members=_wire.peers_to_pb(membership.members), cluster_digest=membership.digest,
                warnings=state.warnings, liveness_timeout=self._liveness,
            )
            self._broadcast(self._message(frozen=frozen))
            self._start_watchdog()
        elif step.action is Action.RELEASE:
            timings = self._timings
            delay = rounds.start_margin(state, time.monotonic(), timings.start_margin_min,
                                        timings.longest_start_margin(len(state.ready)))
            log.info("all %d members ready: releasing, start in %.0f ms", len(state.ready), delay * 1e3)
            start_at = time.time_ns() + int(delay * 1e9)
            self._note(lambda board: jobs.released(board, time.monotonic() + delay))
            self._broadcast(self._message(release=pb.Release(start_at_unix_ns=start_at, delay_ns=int(delay * 1e9))))
        elif step.action is Action.COMPLETE:
            log.info("job %r round %d completed: every command exited with 0", state.job, state.number)
            self._broadcast(self._message(completed=pb.Completed()))
            self._end_streams()
        elif step.action is Action.ABORT:
            ending = "no restart follows" if state.final else f"round {state.number + 1} follows"
            log.log(logging.ERROR if state.final else logging.WARNING, "round %d of job %r aborted (%s): %s",
                    state.number, state.job, ending, state.abort_reason)
            self._note(lambda board: jobs.aborted(board, state.abort_reason or ""))
            aborted = pb.Aborted(
                reason=state.abort_reason or "", exit_code=state.exit_code, final=state.final, preflight=state.refused
            )
            self._broadcast(self._message(aborted=aborted))
            self._end_streams()
        elif step.action is Action.BROADCAST_SYNC and state.source is not None:
            log.info(
                "round %d: every --sync-dir becomes the copy of %s (%s), %d of %d members differ",
                state.number, state.source.describe(), state.source_reason,
                len(out_of_sync(state.membership.members, state.sync, state.source_digest)),  # type: ignore[union-attr]
                len(state.sync),
            )
            self._broadcast(self._message(sync_from=_wire.sync_order_to_pb(state)))

    def _settle(self) -> None:
        self._apply(rounds.settle(self.round, time.monotonic()))

    def _schedule_waiting(self) -> None:
        """Who has joined goes to everyone joined at most once per `waiting_every`: N peers
        joining one after another would otherwise cost N broadcasts of up to N peers each."""
        if self._waiting_due is None:
            self._waiting_due = asyncio.get_running_loop().call_later(self._timings.waiting_every, self._send_waiting)

    def _send_waiting(self) -> None:
        self._waiting_due = None
        state = self.round
        if state.phase is not RoundPhase.GATHERING:
            return  # frozen or ended since: that message went out instead
        log.debug("coordinating job %r: %s peers joined", state.job, state.expect.progress(len(state.joined)))
        waiting = pb.Waiting(joined=_wire.peers_to_pb(state.joined), **state.expect.fields())
        self._broadcast(self._message(waiting=waiting))

    def follow(self, target: Target) -> None:
        """The view changed: if someone else is now the coordinator, send everyone there."""
        if target.endpoint != self._me.endpoint:
            self._redirect_all(f"peer {target.endpoint} is lower", "a peer with a lower address is the coordinator", target.peer)

    def _redirect_all(self, why: str, reason: str, coordinator: Optional[Peer] = None) -> None:
        """Send every peer that joined this gathering round elsewhere, and start it over."""
        if self.round.phase is not RoundPhase.GATHERING or not self._outboxes:
            return
        log.debug("%s: redirecting %d peers", why, len(self._outboxes))
        redirect = pb.Redirect(reason=reason)
        if coordinator is not None:
            redirect.coordinator.CopyFrom(_wire.peer_to_pb(coordinator))
        self._broadcast(self._message(redirect=redirect))
        self._end_streams()
        self.round = self.round.next(self.round.number)

    def _redirect_for(self, peer: Peer, target: Target) -> pb.Redirect:
        """Where a Join this node does not take goes: to the coordinator, or, from a peer
        of the other IP family than this node uses for the job, back to its own view."""
        mine = self._me.address.version
        if peer.address.version != mine:
            return pb.Redirect(reason=f"job {self.round.job!r} uses IPv{mine} on this node, not IPv{peer.address.version}")
        redirect = pb.Redirect(reason=f"{self._me.endpoint} is not the coordinator")
        if target.peer is not None:
            redirect.coordinator.CopyFrom(_wire.peer_to_pb(target.peer))
        return redirect

    # -- RPCs ---------------------------------------------------------------------

    async def Join(self, request_iterator, context: grpc.aio.ServicerContext) -> None:  # noqa: N802
        """One peer's stream. At most MAX_STREAMS_PER_SOURCE at a time from one address,
        so that idle connections from one host cannot take every descriptor."""
        source = _source(context)
        if self._streams[source] >= MAX_STREAMS_PER_SOURCE:
            self._warnings.warn(
                "streams", source, "refused a Join stream from %s: %d are open from it", source, MAX_STREAMS_PER_SOURCE
            )
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many streams from this address")
        self._streams[source] += 1
        try:
            await self._serve_join(context, source)
        finally:
            self._streams[source] -= 1
            if not self._streams[source]:
                del self._streams[source]

    async def _serve_join(self, context: grpc.aio.ServicerContext, source: str) -> None:
        first = await self._read_first(context, source)
        signer = await self._authenticate(context, first, source)
        rejection = self._check_header(first.header)
        if rejection is not None:
            await context.write(signer.seal(rejection))
            return
        try:
            peer = _wire.peer_from_pb(first.join.peer)
            _check_source(peer, source)
        except (ValueError, TypeError) as exc:
            self._warnings.warn("bad peer", source, "refused a Join from %s: %s", source, exc)
            await context.write(signer.seal(self._rejected(pb.Rejected.BAD_REQUEST, f"bad peer: {exc}")))
            return
        if peer.node_id in self._outboxes:
            # a clone of a member, or its identity replayed: the live member keeps its place
            self._warnings.warn("duplicate", source, "refused a second stream for member %s from %s", peer.node_id, source)
            await context.abort(grpc.StatusCode.ALREADY_EXISTS, f"node id {peer.node_id} already has an open stream")
        target = self._target()
        forming = self.round.phase in (RoundPhase.GATHERING, RoundPhase.ABORTED, RoundPhase.COMPLETED)
        if (forming and target.endpoint != self._me.endpoint) or peer.address.version != self._me.address.version:
            await context.write(signer.seal(self._message(redirect=self._redirect_for(peer, target))))
            return
        asked = max(1, first.header.round)
        self._apply(rounds.newer(self.round, asked))
        self._apply(rounds.newer(self.round, asked))  # a running round was aborted: the next one
        step = self._join(peer, first.join)
        if step.rejection is not None:
            rejection = step.rejection
            self._warnings.warn(rejection.reason.value, source, "rejected %s: %s", peer.describe(), rejection.message)
            await context.write(signer.seal(self._rejected(_REASONS[rejection.reason], rejection.message)))
            return
        outbox: asyncio.Queue[Optional[pb.CoordinatorMessage]] = asyncio.Queue()
        self._outboxes[peer.node_id] = outbox
        reader = asyncio.create_task(self._read(context, peer, outbox, signer), name=f"read-{peer.node_id}")
        try:
            self._apply(step)  # a freeze counts every member as heard
            while (message := await self._next_message(outbox, peer)) is not _END:
                await context.write(signer.seal(message))
        finally:
            reader.cancel()
            if self._outboxes.get(peer.node_id) is outbox:
                del self._outboxes[peer.node_id]
                self._apply(rounds.leave(self.round, peer.node_id, time.monotonic()))

    def _join(self, peer: Peer, request: pb.JoinRequest) -> Step:
        """The round's answer to `peer`; a peer admitted by a restart joins the round that
        follows the one it aborts."""
        try:
            expect = _wire.size_from_pb(request)
        except ValueError as exc:
            return rounds.reject(self.round, RejectReason.EXPECT_MISMATCH, f"{peer.describe()}: --expect {exc}")
        fingerprint = _wire.optional_fingerprint_from_pb(request)
        step = rounds.join(self.round, peer, expect, time.monotonic(), fingerprint)
        if step.action is Action.ABORT and not step.state.refused:  # admitted by a restart
            self._apply(step)
            self._apply(rounds.newer(self.round, self.round.number + 1))
            step = rounds.join(self.round, peer, expect, time.monotonic(), fingerprint)
        return step

    async def _read_first(self, context: grpc.aio.ServicerContext, source: str) -> pb.PeerMessage:
        """The stream's first message, a join, within the handshake time."""
        message = await self._read_within(context, source)
        if message is grpc.aio.EOF:  # a peer that learned of a lower one before it sent its join
            log.debug("a Join stream from %s ended before its join", source)
            await context.abort(grpc.StatusCode.CANCELLED, "the stream ended before its join")
        if message.WhichOneof("body") != "join":
            self._warnings.warn("first", source, "refused a Join stream from %s: it did not start with a join", source)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "first message must be a join")
        return message

    async def _read_within(self, context: grpc.aio.ServicerContext, source: str):
        try:
            message = await asyncio.wait_for(context.read(), self._timings.handshake)
        except asyncio.TimeoutError:
            self._warnings.warn(
                "silent", source, "closed a Join stream from %s: nothing within %g s", source, self._timings.handshake
            )
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "no join within the handshake time")
        if message is None:
            self._warnings.warn("malformed", source, "refused a Join stream from %s: not a protobuf message", source)
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
                await context.write(signer.seal(self._message(heartbeat=pb.Heartbeat()), nonce=challenge))
                proof = await self._read_within(context, source)
                if proof is grpc.aio.EOF:
                    raise AuthError("the stream ended before the proof")
                signer.open(proof)
        except AuthError as exc:
            await self._refuse(context, source, str(exc))
        return signer

    async def _refuse(self, context: grpc.aio.ServicerContext, source: str, why: str) -> None:
        self._warnings.warn("auth", source, "refused %s: authentication failed (%s)", source, why)
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED,
            f"authentication failed for job {self.round.job!r}: {why}. Every peer needs the same --token-file",
        )

    async def _next_message(self, outbox: asyncio.Queue, peer: Peer) -> Optional[pb.CoordinatorMessage]:
        """The next message for a peer; a heartbeat when there was none for a while, in a
        running round (core.round.check_liveness), unless the peer is this node's own member,
        which shares its process."""
        beats = self.round.running and peer.node_id != self._me.node_id
        try:
            return await asyncio.wait_for(outbox.get(), self.heartbeat_interval if beats else None)
        except asyncio.TimeoutError:
            return self._message(heartbeat=pb.Heartbeat())

    async def _read(
        self, context: grpc.aio.ServicerContext, peer: Peer, outbox: asyncio.Queue, signer: _auth.Signer
    ) -> None:
        try:
            while (message := await context.read()) is not grpc.aio.EOF:
                if message is None:
                    raise DecodeError("not a PeerMessage")
                signer.open(message)
                if message.header.round != self.round.number:
                    continue  # rounds never mix: a message of another round is stale
                self.round = rounds.heard(self.round, peer.node_id, time.monotonic())
                kind = message.WhichOneof("body")
                if kind == "ready":
                    sync = _wire.sync_from_pb(message.ready.sync)
                    self._apply(rounds.ready(self.round, peer.node_id, message.ready.cluster_digest, sync))
                elif kind == "finished":
                    done = message.finished
                    log.info("%s finished with exit code %d %s", peer.describe(), done.exit_code, printable(done.reason))
                    self._note(lambda board: jobs.finished(board, peer.node_id, done.exit_code, time.monotonic()))
                    sync = _wire.sync_from_pb(done.sync)
                    self._apply(rounds.finished(self.round, peer.node_id, done.exit_code, done.reason, sync))
                elif kind == "progress":
                    self._progressed(peer, message.progress)
                elif kind == "synced":
                    self._apply(rounds.synced(self.round, peer.node_id, message.synced.digest, message.synced.error))
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass
        except (AuthError, DecodeError) as exc:
            log.warning("closed the stream of %s: %s", peer.describe(), exc)
            outbox.put_nowait(self._rejected(pb.Rejected.BAD_REQUEST, f"closed: {exc}"))
        outbox.put_nowait(_END)

    def _progressed(self, peer: Peer, message: pb.Progress) -> None:
        try:
            progress = _wire.progress_from_pb(message)
        except ValueError as exc:
            log.debug("ignored progress of %s: %s", peer.describe(), exc)
            return
        self._note(lambda board: jobs.progressed(board, peer.node_id, progress))

    def _check_stragglers(self) -> None:
        board, marked = jobs.check_stragglers(
            jobs.for_round(self.board, self.round.number), time.monotonic(), self._timings.straggler_after
        )
        self.board = board
        for node_id in marked:
            peer = self.round.member(node_id)
            log.warning(
                "%s is a straggler: its progress has lagged the others' median by more than %d%% for %.0f s",
                peer.describe() if peer else node_id, jobs.STRAGGLER_LAG * 100, self._timings.straggler_after,
            )

    def _start_watchdog(self) -> None:
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.create_task(self._watch(), name="liveness")

    async def _watch(self) -> None:
        """Ends the round when a member goes silent; runs from the freeze to the round's
        end, while anyone is joined."""
        looked = time.monotonic()
        while self._outboxes and self.round.running:
            await asyncio.sleep(self.heartbeat_interval)
            now = time.monotonic()
            # From the last look, not from this sleep's start: a stop between the two is this
            # node's too.
            if rounds.paused(looked + self.heartbeat_interval, now, self.heartbeat_interval):
                log.warning("this node did not run for %.1f s (starved of CPU or stopped): "
                            "the members count as heard now", now - looked - self.heartbeat_interval)
                self.round = rounds.resumed(self.round, now)
            looked = now
            self._apply(rounds.check_liveness(self.round, now, self._liveness, self._me.node_id))
            self._check_stragglers()

    async def Status(self, request: pb.StatusRequest, context: grpc.aio.ServicerContext) -> pb.StatusResponse:  # noqa: N802
        """Anyone may ask (`rendezvous status` has no token); a signed request gets a
        signed answer, which a peer can trust."""
        signer = _auth.Signer(None)
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a StatusRequest")
        if request.header.auth.scheme:
            try:
                signer = _auth.open_request(self._keys, request)
            except AuthError as exc:
                await self._refuse(context, _source(context), str(exc))
        if request.HasField("caller"):
            self._take_hint(request.caller, context)
        return signer.seal(_wire.status_to_pb(self._status()))

    def _take_hint(self, record: pb.AdvertRecord, context: grpc.aio.ServicerContext) -> None:
        """The advert of a peer that asks this node's Status: passed on if it is of this
        job and comes from the address it claims."""
        advert = _wire.advert_from_pb(record)
        if advert is None or advert.job != self.round.job or advert.node_id == self._me.node_id:
            return
        try:
            _check_source(advert.peer, _source(context))
        except ValueError as exc:
            log.debug("ignoring the advert sent with a Status request: %s", exc)
            return
        self.hint(advert)

    async def JobStatus(self, request: pb.StatusRequest, context: grpc.aio.ServicerContext) -> pb.JobStatusResponse:  # noqa: N802
        target = self._target()
        coordinating = bool(self.round.joined) or target.endpoint == self._me.endpoint
        if not coordinating:
            view = jobs.JobView(
                job=self.round.job, round=self.round.number, phase=self.round.phase.value,
                expect=self.round.expect, coordinator=target.peer, coordinating=False,
            )
        else:
            view = jobs.job_view(self.round, self.board, self._me, time.monotonic())
        return _wire.job_view_to_pb(view, self._me.node_id)

    async def GetManifest(self, request: Optional[pb.ManifestRequest], context: grpc.aio.ServicerContext) -> pb.ManifestResponse:  # noqa: N802
        await self._check_files(request, context)
        return await self.files.manifest(request, context)  # type: ignore[union-attr]

    async def FetchFiles(self, request: Optional[pb.FetchRequest], context: grpc.aio.ServicerContext):  # noqa: N802
        await self._check_files(request, context)
        async for chunk in self.files.files(request, context):  # type: ignore[union-attr]
            yield chunk

    async def _check_files(self, request: Optional[pb.ManifestRequest | pb.FetchRequest], context: grpc.aio.ServicerContext) -> None:
        """Files go only to a node of this job (one that holds its token, if it has one),
        and only from a node that syncs. What they hold is checked by the fetcher against
        the digest the coordinator named, over the signed Join stream."""
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a request of files")
        if self.files is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "this node runs without --sync-dir")
        rejection = self._check_header(request.header)
        if rejection is not None:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, rejection.rejected.message)
        if self._keys is not None:
            try:
                _auth.open_request(self._keys, request)
            except AuthError as exc:
                await self._refuse(context, _source(context), str(exc))

    async def Exchange(self, request: Optional[pb.Adverts], context: grpc.aio.ServicerContext) -> pb.Adverts:  # noqa: N802
        if request is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a list of adverts")
        if request.header.protocol_version != PROTOCOL_VERSION:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"this node speaks protocol {PROTOCOL_VERSION}")
        signer, gossip = _wire.exchange_in(request, self._keys, _source(context))
        answer = self.exchange(gossip)
        if answer is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node does not use unicast discovery (--discovery mdns)")
        return signer.seal(_wire.gossip_to_pb(answer, self._me.node_id))

    def _check_header(self, header: pb.Header) -> Optional[pb.CoordinatorMessage]:
        if header.protocol_version != PROTOCOL_VERSION:
            return self._rejected(
                pb.Rejected.VERSION_MISMATCH,
                f"protocol version {header.protocol_version}, coordinator speaks {PROTOCOL_VERSION}",
            )
        if header.job != self.round.job:
            return self._rejected(
                pb.Rejected.BAD_REQUEST,
                f"job {header.job!r} asked a node of job {self.round.job!r}",
            )
        if header.round > MAX_ROUND:
            return self._rejected(pb.Rejected.BAD_REQUEST, f"round {header.round} is out of range (at most {MAX_ROUND})")
        return None

    def _rejected(self, reason: int, message: str) -> pb.CoordinatorMessage:
        return self._message(rejected=pb.Rejected(reason=reason, message=message))


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
