"""The member's side of one round, as plain data and small decisions.

The counterpart of `round.py`: `round.py` decides what the coordinator does with what its
peers send; this module decides what a peer does with what its coordinator sends.

    JOINING --Frozen (me in it, as I am)--> FROZEN --Released--> RELEASED
       |  ^                                   |
       |  +-- Waiting / Redirected / Lost     +-- anything else: the round failed
       +-- Rejected, Aborted: the round failed

`step(state, event, now)` returns the next state and the one action the node must carry
out. Nothing here reads a clock, opens a socket or touches the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Optional, Union

from ..errors import CoordinatorError, MembershipError, RendezvousError
from .peer import Peer, describe_peers
from .tf_config import Membership

# -- what the coordinator says (the Join stream, decoded) -------------------------------


@dataclass(frozen=True)
class Waiting:
    joined: tuple[Peer, ...]
    expect: int


@dataclass(frozen=True)
class Frozen:
    membership: Membership
    digest: str  # as the coordinator computed it


@dataclass(frozen=True)
class Released:
    # When to start, in seconds after the release arrived: the coordinator's start time
    # read by this node's clock. Clocks can disagree, so it is only a hint (`start_delay`).
    start_in: float
    delay: float  # the longest a member waits after receiving the release


@dataclass(frozen=True)
class Redirected:
    coordinator: Optional[Peer]
    reason: str


@dataclass(frozen=True)
class Rejected:
    reason: str
    message: str


@dataclass(frozen=True)
class Aborted:
    reason: str


CoordinatorEvent = Union[Waiting, Frozen, Released, Redirected, Rejected, Aborted]

# -- what happens on this side ------------------------------------------------------------


@dataclass(frozen=True)
class Lost:
    """The stream to the coordinator ended or could not be opened."""

    reason: str


@dataclass(frozen=True)
class TargetChanged:
    """Discovery changed whom this node would join, or found peers that disagree with it."""

    endpoint: str
    conflicts: tuple[str, ...] = ()


MemberEvent = Union[CoordinatorEvent, Lost, TargetChanged]

# -- actions ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wait:
    """Nothing to do: keep listening."""


@dataclass(frozen=True)
class Confirm:
    """Arm the command with the frozen list, then confirm the list by its digest."""

    membership: Membership


@dataclass(frozen=True)
class Start:
    """Let the armed command start `delay` seconds from now."""

    delay: float


@dataclass(frozen=True)
class Rejoin:
    """Close this stream and join whomever the view names now; first leave `suspect` out
    of the election until `until`, when it is set."""

    suspect: Optional[Peer] = None
    until: float = 0.0


@dataclass(frozen=True)
class Fail:
    """The round failed for this node: end it with `error`."""

    error: RendezvousError


MemberAction = Union[Wait, Confirm, Start, Rejoin, Fail]

# -- state --------------------------------------------------------------------------------


class MemberPhase(str, Enum):
    JOINING = "joining"
    FROZEN = "frozen"
    RELEASED = "released"
    FAILED = "failed"


@dataclass(frozen=True)
class Member:
    """One node's progress through a round, across the Join streams it opens.

    `target` is the coordinator of the open stream. `failing` remembers since when this
    node has been unable to reach an endpoint: after `suspect_after` seconds of that, the
    coordinator is left out of the election for `suspect_for` seconds, because a node
    killed without a goodbye stays in every mDNS cache for many minutes.
    """

    me: Peer
    suspect_after: float
    suspect_for: float
    target: Optional[Peer] = None
    endpoint: str = ""
    phase: MemberPhase = MemberPhase.JOINING
    membership: Optional[Membership] = None
    failing: Optional[tuple[str, float]] = None

    def joining(self, endpoint: str, target: Optional[Peer]) -> "Member":
        """A new Join stream to `endpoint` (the peer behind it, if known) is opening."""
        return replace(self, endpoint=endpoint, target=target)

    @property
    def frozen(self) -> bool:
        return self.membership is not None


@dataclass(frozen=True)
class Step:
    state: Member
    action: MemberAction


def _fail(state: Member, error: RendezvousError) -> Step:
    return Step(replace(state, phase=MemberPhase.FAILED), Fail(error))


def step(state: Member, event: MemberEvent, now: float) -> Step:
    """What this node does with `event`, received at `now` (time.monotonic())."""
    if state.phase in (MemberPhase.RELEASED, MemberPhase.FAILED):
        return Step(state, Wait())
    if isinstance(event, Waiting):
        return Step(replace(state, failing=None), Wait())
    if isinstance(event, Frozen):
        return _on_frozen(state, event)
    if isinstance(event, Released):
        return _on_released(state, event)
    if isinstance(event, Redirected):
        if state.frozen:
            return _fail(state, CoordinatorError(f"coordinator {state.endpoint} redirected after the freeze"))
        return Step(replace(state, failing=None), Rejoin())
    if isinstance(event, Rejected):
        return _fail(state, MembershipError(event.message))
    if isinstance(event, Aborted):
        return _fail(state, CoordinatorError(f"the coordinator {state.endpoint} aborted the round: {event.reason}"))
    if isinstance(event, Lost):
        return _on_lost(state, event, now)
    return _on_target_changed(state, event)


def _on_frozen(state: Member, event: Frozen) -> Step:
    """The frozen list must hold this node exactly as it is, or TensorFlow would hang."""
    membership = event.membership
    try:
        rank = membership.rank_of(state.me.node_id)
    except KeyError:
        return _fail(state, CoordinatorError(
            f"the coordinator froze a membership without this node: {describe_peers(membership.members)}"
        ))
    if membership.members[rank] != state.me:
        return _fail(state, CoordinatorError(
            f"the coordinator froze this node as {membership.members[rank]}, not {state.me}"
        ))
    frozen = replace(state, phase=MemberPhase.FROZEN, membership=membership, failing=None)
    return Step(frozen, Confirm(membership))


def _on_released(state: Member, event: Released) -> Step:
    if not state.frozen:
        return _fail(state, CoordinatorError(f"coordinator {state.endpoint} released before freezing"))
    delay = start_delay(event.start_in, event.delay)
    return Step(replace(state, phase=MemberPhase.RELEASED), Start(delay))


def _on_lost(state: Member, event: Lost, now: float) -> Step:
    if state.frozen:
        return _fail(state, CoordinatorError(f"lost the coordinator after the freeze: {event.reason}"))
    if state.failing is None or state.failing[0] != state.endpoint:
        return Step(replace(state, failing=(state.endpoint, now)), Rejoin())
    since = state.failing[1]
    peer = state.target
    if now - since < state.suspect_after or peer is None or peer.node_id == state.me.node_id:
        return Step(state, Rejoin())
    return Step(replace(state, failing=None), Rejoin(suspect=peer, until=now + state.suspect_for))


def _on_target_changed(state: Member, event: TargetChanged) -> Step:
    """Before the freeze, follow discovery; after it, the frozen list is all that counts."""
    if state.frozen:
        return Step(state, Wait())
    if event.conflicts:
        return _fail(state, MembershipError("; ".join(event.conflicts)))
    if event.endpoint != state.endpoint:
        return Step(state, Rejoin())
    return Step(state, Wait())


def start_delay(start_in: float, delay: float) -> float:
    """How long a member waits before starting: `start_in`, but never less than 0 (the
    release came late) nor more than `delay` (the clocks disagree)."""
    return min(max(start_in, 0.0), delay)
