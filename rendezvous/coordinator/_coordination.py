"""The round a coordinator holds, and the one place that carries out its decisions: each
core.round Step becomes messages to the joined peers' outboxes, timers and log lines."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Optional

from ..config.timings import Timings
from ..core import admission
from ..core import job as jobs
from ..core import round as rounds
from ..core.manifest import out_of_sync
from ..core.peer import Peer
from ..core.round import Action, Round, RoundPhase, Step
from ..core.stopping import StopOrder
from ..v1 import rendezvous_pb2 as pb
from . import _wire, _wire_sync
from ._watchdog import Watchdog

log = logging.getLogger(__name__)

# Closes a peer's outbound queue.
END = None

Outbox = asyncio.Queue  # of Optional[pb.CoordinatorMessage]; END closes it


class Coordination:
    """This node's round and what its joined peers are sent. `outboxes` holds one queue per
    peer with an open Join stream, by node id."""

    def __init__(self, me: Peer, round: Round, timings: Timings, liveness_timeout: float) -> None:
        self.me = me
        self._round = round  # changed by `apply` alone
        self.timings = timings
        self.liveness = liveness_timeout
        self.board = jobs.Board()  # what `status --job` shows beyond the round itself
        self.outboxes: dict[str, Outbox] = {}
        self._waiting_due: Optional[asyncio.TimerHandle] = None
        # `rendezvous stop` ended the job: every later Join is answered with the stop.
        self.stopped: Optional[StopOrder] = None
        self.stop_taken = asyncio.Event()  # set with `stopped`, for this node's own member
        self.stopped_between_rounds = False
        self.watchdog = Watchdog(self)

    @property
    def round(self) -> Round:
        return self._round

    @property
    def heartbeat_interval(self) -> float:
        return rounds.heartbeat_interval(self.liveness)

    def message(self, **body: Any) -> pb.CoordinatorMessage:
        return pb.CoordinatorMessage(header=_wire.header(self.round.job, self.round.number, self.me.node_id), **body)

    def rejected(self, reason: "pb.Rejected.Reason", message: str) -> pb.CoordinatorMessage:
        return self.message(rejected=pb.Rejected(reason=reason, message=message))

    def broadcast(self, message: Optional[pb.CoordinatorMessage]) -> None:
        for outbox in self.outboxes.values():
            outbox.put_nowait(message)

    def end_streams(self) -> None:
        """End every open stream once its peer has had time to read the last message: a
        peer closes its side when it has, and ending first could make a write of its (a
        heartbeat) fail and cost it that message."""
        loop = asyncio.get_running_loop()
        for outbox in self.outboxes.values():
            loop.call_later(self.timings.end_grace, outbox.put_nowait, END)

    def note(self, change: Callable[[jobs.Board], jobs.Board]) -> None:
        self.board = change(jobs.for_round(self.board, self.round.number))

    def apply(self, step: Step) -> None:
        """The one place the round changes: to the step's state, with its action carried out."""
        self._round = state = step.state
        if step.action is Action.BROADCAST_WAITING:
            self._schedule_waiting()
            if state.expect.elastic:
                asyncio.get_running_loop().call_later(state.settle + self.timings.settle_slack, self._settle)
        elif step.action is Action.BROADCAST_FROZEN and state.membership:
            self._frozen(state)
        elif step.action is Action.RELEASE:
            self._release(state)
        elif step.action is Action.COMPLETE:
            log.info("job %r round %d completed: every command exited with 0", state.job, state.number)
            self.broadcast(self.message(completed=pb.Completed()))
            self.end_streams()
        elif step.action is Action.ABORT:
            self._abort(state)
        elif step.action is Action.BROADCAST_SYNC and state.source is not None:
            log.info(
                "round %d: every --sync-dir becomes the copy of %s (%s), %d of %d members differ",
                state.number, state.source.describe(), state.source_reason,
                len(out_of_sync(state.membership.members, state.sync, state.source_digest)),  # type: ignore[union-attr]
                len(state.sync),
            )
            self.broadcast(self.message(sync_from=_wire_sync.sync_order_to_pb(state)))

    def _frozen(self, state: Round) -> None:
        membership = state.membership
        assert membership is not None
        log.info(
            "froze job %r round %d: %s",
            state.job, state.number, ", ".join(p.tf_endpoint for p in membership.members),
        )
        frozen = pb.Frozen(
            members=_wire.peers_to_pb(membership.members), cluster_digest=membership.digest,
            warnings=state.warnings, liveness_timeout=self.liveness, gpus=membership.gpus,
        )
        self.broadcast(self.message(frozen=frozen))
        self.watchdog.start()

    def _release(self, state: Round) -> None:
        timings = self.timings
        delay = rounds.start_margin(state, time.monotonic(), timings.start_margin_min,
                                    timings.longest_start_margin(len(state.ready)))
        log.info("all %d members ready: releasing, start in %.0f ms", len(state.ready), delay * 1e3)
        start_at = time.time_ns() + int(delay * 1e9)
        self.note(lambda board: jobs.released(board, time.monotonic() + delay))
        self.broadcast(self.message(release=pb.Release(start_at_unix_ns=start_at, delay_ns=int(delay * 1e9))))

    def _abort(self, state: Round) -> None:
        ending = "no restart follows" if state.final else f"round {state.number + 1} follows"
        log.log(logging.ERROR if state.final else logging.WARNING, "round %d of job %r aborted (%s): %s",
                state.number, state.job, ending, state.abort_reason)
        self.note(lambda board: jobs.aborted(board, state.abort_reason or "", state.failure))
        self.broadcast(self.aborted(state))
        self.end_streams()

    def aborted(self, state: Round) -> pb.CoordinatorMessage:
        aborted = pb.Aborted(
            reason=state.abort_reason or "", exit_code=state.exit_code, final=state.final, preflight=state.refused,
            stop=_wire.stop_order_to_pb(state.stop),
            failure=_wire.failure_to_pb(state.failure) if state.failure else None,
        )
        return self.message(aborted=aborted)

    def stopped_message(self, order: StopOrder) -> pb.CoordinatorMessage:
        """After a stop, what any Join is answered with: the stop itself."""
        return self.aborted(rounds.stop(rounds.Round(job=self.round.job, expect=self.round.expect,
                                                     number=self.round.number), order).state)

    def stop(self, order: StopOrder) -> tuple[Peer, ...]:
        """`rendezvous stop`: end the round for every member, and every round after it for
        whoever joins later (a member of a round being restarted comes back to learn of
        it); the members told."""
        state = self.round
        told = state.membership.members if state.membership and state.running else state.joined
        # This node's own member may be on its way back to the next round: it ends too.
        by_id = {p.node_id: p for p in told}
        if state.phase is not RoundPhase.COMPLETED:
            by_id.setdefault(self.me.node_id, self.me)
        log.warning("job %r: stop asked by %s in round %d (%s): ending it on %d members, no restart",
                    state.job, order.describe(), state.number, state.phase.value, len(self.outboxes))
        self.stopped = order
        self.stop_taken.set()
        # Between two rounds, the members are on their way back: they learn of the stop on rejoining.
        self.stopped_between_rounds = state.phase is RoundPhase.ABORTED and not state.final
        if self._waiting_due is not None:
            self._waiting_due.cancel()
            self._waiting_due = None
        self.apply(rounds.stop(state, order))
        return tuple(sorted(by_id.values()))

    def _settle(self) -> None:
        self.apply(rounds.settle(self.round, time.monotonic()))

    def _schedule_waiting(self) -> None:
        """Who has joined goes to everyone joined at most once per `waiting_every`: N peers
        joining one after another would otherwise cost N broadcasts of up to N peers each."""
        if self._waiting_due is None:
            self._waiting_due = asyncio.get_running_loop().call_later(self.timings.waiting_every, self._send_waiting)

    def _send_waiting(self) -> None:
        self._waiting_due = None
        state = self.round
        if state.phase is not RoundPhase.GATHERING:
            return  # frozen or ended since: that message went out instead
        log.debug("coordinating job %r: %s peers joined", state.job, state.expect.progress(len(state.joined)))
        waiting = pb.Waiting(joined=_wire.peers_to_pb(state.joined), **state.expect.fields())
        self.broadcast(self.message(waiting=waiting))

    def redirect_all(self, why: str, reason: str, coordinator: Optional[Peer] = None) -> None:
        """Send every peer that joined this gathering round elsewhere, and start it over."""
        if self.round.phase is not RoundPhase.GATHERING or not self.outboxes:
            return
        log.debug("%s: redirecting %d peers", why, len(self.outboxes))
        redirect = pb.Redirect(reason=reason)
        if coordinator is not None:
            redirect.coordinator.CopyFrom(_wire.peer_to_pb(coordinator))
        self.broadcast(self.message(redirect=redirect))
        self.end_streams()
        self.apply(Step(admission.start_over(self.round), Action.NOTHING))
