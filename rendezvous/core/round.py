"""The coordinator's state machine for one round, as plain data and small decisions.

    GATHERING --(expect peers joined)--> FROZEN --(all members ready)--> RELEASED
        ^  |                               |
        |  +--- join / leave               +--(member left, digest differs)--> ABORTED

Each operation returns a `Step`: the next state and the one action the coordinator's
adapter must carry out (tell everyone who is waiting, hand out the frozen list,
release everyone at once, abort everyone, or reject the one peer that asked).
A restart builds the next round with `Round.next()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Optional

from .peer import Peer, describe_peers
from .tf_config import Membership


class RoundPhase(str, Enum):
    GATHERING = "gathering"
    FROZEN = "frozen"
    RELEASED = "released"
    ABORTED = "aborted"


class Action(str, Enum):
    NOTHING = "nothing"
    BROADCAST_WAITING = "broadcast_waiting"
    BROADCAST_FROZEN = "broadcast_frozen"
    RELEASE = "release"
    ABORT = "abort"
    REJECT = "reject"


class RejectReason(str, Enum):
    EXPECT_MISMATCH = "expect_mismatch"
    ALREADY_FROZEN = "already_frozen"
    DUPLICATE_NODE = "duplicate_node"
    ENDPOINT_CLASH = "endpoint_clash"
    NOT_A_MEMBER = "not_a_member"


@dataclass(frozen=True)
class Rejection:
    reason: RejectReason
    message: str


@dataclass(frozen=True)
class Round:
    job: str
    expect: int
    number: int = 1
    phase: RoundPhase = RoundPhase.GATHERING
    joined: tuple[Peer, ...] = ()
    membership: Optional[Membership] = None
    ready: frozenset[str] = field(default_factory=frozenset)
    abort_reason: Optional[str] = None

    def __post_init__(self) -> None:
        if self.expect < 1:
            raise ValueError(f"expect must be at least 1, got {self.expect}")
        if self.number < 1:
            raise ValueError(f"round numbers start at 1, got {self.number}")

    def next(self) -> "Round":
        """A fresh round for the same job, for when a job forms its membership again."""
        return Round(job=self.job, expect=self.expect, number=self.number + 1)

    def is_joined(self, node_id: str) -> bool:
        return any(p.node_id == node_id for p in self.joined)


@dataclass(frozen=True)
class Step:
    state: Round
    action: Action
    rejection: Optional[Rejection] = None


def _reject(state: Round, reason: RejectReason, message: str) -> Step:
    return Step(state, Action.REJECT, Rejection(reason, message))


def join(state: Round, peer: Peer, expect: int) -> Step:
    """A peer asks to join. Frozen rounds admit nobody; the expect-th join freezes."""
    if expect != state.expect:
        return _reject(
            state,
            RejectReason.EXPECT_MISMATCH,
            f"peer {peer.describe()} runs with --expect {expect}, but the coordinator of job "
            f"{state.job!r} runs with --expect {state.expect}; start every peer with the same value",
        )
    if state.phase is not RoundPhase.GATHERING:
        members = state.membership.members if state.membership else ()
        return _reject(
            state,
            RejectReason.ALREADY_FROZEN,
            f"job {state.job!r} round {state.number} is already {state.phase.value} with "
            f"{len(members)} of {state.expect} peers ({describe_peers(members)}); "
            f"{peer.describe()} is not a member. Use another --job name, or wait for it to end",
        )
    others = [p for p in state.joined if p.node_id != peer.node_id]
    for other in state.joined:
        if other.node_id == peer.node_id and other != peer:
            return _reject(
                state,
                RejectReason.DUPLICATE_NODE,
                f"node id {peer.node_id} already joined from {other.endpoint}, now from "
                f"{peer.endpoint}",
            )
    for other in others:
        if other.address == peer.address and (
            other.port == peer.port or other.tf_port == peer.tf_port
        ):
            return _reject(
                state,
                RejectReason.ENDPOINT_CLASH,
                f"{peer.describe()} uses the endpoint of {other.describe()}",
            )
    joined = tuple(sorted([*others, peer]))
    if len(joined) < state.expect:
        return Step(replace(state, joined=joined), Action.BROADCAST_WAITING)
    membership = Membership.freeze(state.job, state.number, joined)
    frozen = replace(state, joined=joined, phase=RoundPhase.FROZEN, membership=membership)
    return Step(frozen, Action.BROADCAST_FROZEN)


def leave(state: Round, node_id: str) -> Step:
    """A peer's stream ended. Before the freeze it simply leaves; after it, the round fails."""
    if not state.is_joined(node_id):
        return Step(state, Action.NOTHING)
    if state.phase is RoundPhase.GATHERING:
        joined = tuple(p for p in state.joined if p.node_id != node_id)
        return Step(replace(state, joined=joined), Action.BROADCAST_WAITING)
    if state.phase is RoundPhase.FROZEN:
        peer = next(p for p in state.joined if p.node_id == node_id)
        return abort(state, f"member {peer.describe()} left before the start")
    return Step(state, Action.NOTHING)


def ready(state: Round, node_id: str, digest: str) -> Step:
    """A member confirms the frozen list by its digest; the last confirmation releases all."""
    if state.phase is not RoundPhase.FROZEN or state.membership is None:
        return Step(state, Action.NOTHING)
    membership = state.membership
    try:
        membership.rank_of(node_id)
    except KeyError:
        return _reject(state, RejectReason.NOT_A_MEMBER, f"node {node_id} is not a member")
    if digest != membership.digest:
        return abort(
            state,
            f"node {node_id} computed cluster digest {digest[:12]}, expected "
            f"{membership.digest[:12]}: the peers do not agree on the member list",
        )
    confirmed = state.ready | {node_id}
    if len(confirmed) < membership.world_size:
        return Step(replace(state, ready=confirmed), Action.NOTHING)
    return Step(replace(state, ready=confirmed, phase=RoundPhase.RELEASED), Action.RELEASE)


def abort(state: Round, reason: str) -> Step:
    if state.phase in (RoundPhase.ABORTED, RoundPhase.RELEASED):
        return Step(state, Action.NOTHING)
    return Step(replace(state, phase=RoundPhase.ABORTED, abort_reason=reason), Action.ABORT)
