"""The member's side of one round, as plain data and small decisions.

The counterpart of `round.py`: `round.py` decides what the coordinator does with what its
peers send; this module decides what a peer does with what its coordinator sends.

    JOINING --Frozen (me in it, as I am)--> FROZEN --Released--> RELEASED --command exits--> FINISHED
       |  ^                                   |                     |                         |
       |  +-- Waiting / Redirected / Lost     +------- Aborted, Lost, Completed: ENDED --------+
       +-- Rejected, a broken protocol: FAILED (no restart helps)

An ENDED round is followed by the next one unless `RoundEnd.final` (or `Policy`) says no; never
after `rendezvous stop`. `step(state, event, now)` returns the next state and the one action the
node must carry out. Nothing here reads a clock, opens a socket or touches the environment.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional, Union

from ..errors import CoordinatorError, MembershipError, RendezvousError
from .failure import Failure
from .peer import Peer, describe_peers
from .record import record, replace
from .round import ROUND_FAILED, Policy, heartbeat_interval
from .size import Size
from .stopping import STOPPED, StopOrder
from .tf_config import Membership

# -- what the coordinator says (the Join stream, decoded) -------------------------------


@record
class Waiting:
    joined: tuple[Peer, ...]
    expect: Size


@record
class Frozen:
    membership: Membership
    digest: str  # as the coordinator computed it
    warnings: tuple[str, ...] = ()  # differences between the members that were allowed
    liveness_timeout: float = 0.0  # the coordinator's, which rules the round; 0: not sent


@record
class Released:
    # When to start, in seconds after the release arrived: the coordinator's start time
    # read by this node's clock. Clocks can disagree, so it is only a hint (`start_delay`).
    start_in: float
    delay: float  # the longest a member waits after receiving the release


@record
class Redirected:
    coordinator: Optional[Peer]
    reason: str


@record
class Rejected:
    reason: str
    message: str


@record
class Aborted:
    reason: str
    exit_code: int = ROUND_FAILED
    final: bool = False
    preflight: bool = False  # refused by the preflight, before the freeze
    stop: Optional[StopOrder] = None  # `rendezvous stop` ended the job: who asked, no restart (exit 8)
    failure: Optional[Failure] = None  # the failed command that caused it


@record
class Completed:
    """Every member's command finished with 0."""


@record
class Heartbeat:
    """The coordinator is alive."""


@record
class SyncFrom:
    """--sync-dir: make this node's copy `source`'s, whose manifest digest is `digest`."""

    source: Peer
    digest: str
    total_bytes: int
    final: bool = False  # after the job completed: the chief's copy


CoordinatorEvent = Union[Waiting, Frozen, Released, Redirected, Rejected, Aborted, Completed, Heartbeat, SyncFrom]

# -- what happens on this side ------------------------------------------------------------


@record
class Lost:
    """The stream to the coordinator ended or could not be opened."""

    reason: str


@record
class Untrusted:
    """Authentication with the coordinator failed: it lacks the job's token, or this node's is not the job's."""

    reason: str


@record
class TargetChanged:
    """Discovery changed whom this node would join, or found peers that disagree with it."""

    endpoint: str
    conflicts: tuple[str, ...] = ()


@record
class CommandExited:
    """This node's command ended (`reason`: why it counts as failed though it did not)."""

    exit_code: int
    reason: str = ""


MemberEvent = Union[CoordinatorEvent, Lost, Untrusted, TargetChanged, CommandExited]

# -- actions ------------------------------------------------------------------------------


@record
class Wait:
    """Nothing to do: keep listening."""


@record
class Confirm:
    """Arm the command with the frozen list, then confirm the list by its digest; log the
    preflight's `warnings` first."""

    membership: Membership
    warnings: tuple[str, ...] = ()


@record
class Start:
    """Let the armed command start `delay` seconds from now."""

    delay: float


@record
class Rejoin:
    """Close this stream and join whomever the view names now; first leave `suspect` out
    of the election, when it is set, and `distrust` out for good."""

    suspect: Optional[Peer] = None
    distrust: Optional[Peer] = None


@record
class Sync:
    """Make the synced directory the source's, then say which copy this node has."""

    order: SyncFrom


@record
class Fail:
    """The round failed for this node in a way no restart mends: end it with `error`."""

    error: RendezvousError


@record
class Report:
    """Tell the coordinator how the command ended."""

    exit_code: int
    reason: str = ""


@record
class RoundEnd:
    """The round is over: stop the command. `final` None: this node decides (`Policy`)."""

    reason: str
    exit_code: int
    final: Optional[bool] = None
    completed: bool = False
    stop: Optional[StopOrder] = None  # `rendezvous stop` ended the job
    failure: Optional[Failure] = None  # the failed command that ended it, as the coordinator said


MemberAction = Union[Wait, Confirm, Start, Rejoin, Sync, Fail, Report, RoundEnd]

# -- state --------------------------------------------------------------------------------


class MemberPhase(str, Enum):
    JOINING = "joining"
    FROZEN = "frozen"
    RELEASED = "released"
    FINISHED = "finished"
    ENDED = "ended"
    FAILED = "failed"


@record
class Member:
    """One node's progress through a round, across the Join streams it opens.

    `target` is the coordinator of the open stream. `failing` remembers since when this
    node has been unable to reach an endpoint: after `suspect_after` seconds of that, the
    coordinator is left out of the election until it proves to be alive (it answers, or
    announces itself anew), because a node killed without a goodbye stays in every mDNS
    cache for many minutes.

    `liveness_timeout` is this node's own until the freeze, then the coordinator's: a
    member heartbeats at a fifth of it and counts the coordinator lost after it.

    `syncs`: this node has a --sync-dir, so its job is done only once the coordinator says
    every copy is the chief's (Completed), not when its command succeeded.
    """

    me: Peer
    suspect_after: float
    target: Optional[Peer] = None
    endpoint: str = ""
    phase: MemberPhase = MemberPhase.JOINING
    membership: Optional[Membership] = None
    failing: Optional[tuple[str, float]] = None
    exit_code: Optional[int] = None  # of this node's command, once it ended
    preflight: tuple[str, ...] = ()  # what the preflight said: its refusal, or what it allowed
    liveness_timeout: float = 5.0
    syncs: bool = False

    @property
    def heartbeat_interval(self) -> float:
        return heartbeat_interval(self.liveness_timeout)

    def joining(self, endpoint: str, target: Optional[Peer], me: Optional[Peer] = None) -> "Member":
        """A new Join stream to `endpoint` (the peer behind it, if known), as `me` when it changed."""
        return replace(self, endpoint=endpoint, target=target, me=me or self.me)

    @property
    def frozen(self) -> bool:
        return self.membership is not None

    @property
    def joined_to_self(self) -> bool:
        """This node is its own coordinator. Both sides share one process, so neither needs the other's
        proof of life: no heartbeats, no silence check (a lone node waiting then costs nothing)."""
        return self.endpoint == self.me.endpoint

    def poll_interval(self, watching_command: bool, next_lapse: Optional[float]) -> Optional[float]:
        """How long a listener waits when nothing happens: joined to itself before its command
        runs, it has no silence or stopped command to look for, only a suspicion's lapse."""
        return next_lapse if self.joined_to_self and not watching_command else self.heartbeat_interval

    @property
    def round(self) -> Optional[int]:
        """The round this node was frozen in, once it was."""
        return self.membership.round if self.membership else None


@record
class Step:
    state: Member
    action: MemberAction


def _fail(state: Member, error: RendezvousError) -> Step:
    return Step(replace(state, phase=MemberPhase.FAILED), Fail(error))


def _end(state: Member, end: RoundEnd) -> Step:
    return Step(replace(state, phase=MemberPhase.ENDED), end)


def step(state: Member, event: MemberEvent, now: float) -> Step:
    """What this node does with `event`, received at `now` (time.monotonic())."""
    if state.phase in (MemberPhase.ENDED, MemberPhase.FAILED):
        return Step(state, Wait())
    if isinstance(event, Untrusted):
        return _on_untrusted(state, event, now)
    if state.phase in (MemberPhase.RELEASED, MemberPhase.FINISHED):
        return _while_running(state, event)
    if isinstance(event, (Waiting, Heartbeat)):
        return Step(replace(state, failing=None), Wait())
    if isinstance(event, Frozen):
        return _on_frozen(state, event)
    if isinstance(event, Released):
        return _on_released(state, event)
    if isinstance(event, SyncFrom) and state.frozen and not event.final:
        return Step(state, Sync(event))
    if isinstance(event, Redirected):
        if state.frozen:
            return _fail(state, CoordinatorError(f"coordinator {state.endpoint} redirected after the freeze"))
        return Step(replace(state, failing=None), Rejoin())
    if isinstance(event, Rejected):
        return _fail(state, MembershipError(event.message))
    if isinstance(event, Aborted):
        refused = replace(state, preflight=(event.reason,)) if event.preflight else state
        return _end(refused, _aborted(state, event))
    if isinstance(event, Lost):
        return _on_lost(state, event, now)
    if isinstance(event, TargetChanged):
        return _on_target_changed(state, event)
    return _fail(state, CoordinatorError(f"coordinator {state.endpoint} sent {type(event).__name__} before the release"))


def _aborted(state: Member, event: Aborted) -> RoundEnd:
    if event.stop is not None:  # `rendezvous stop`, not a failure: the job ends on every member alike
        return RoundEnd(f"the job was stopped by {event.stop.describe()}", STOPPED, final=True, stop=event.stop)
    return RoundEnd(f"the coordinator {state.endpoint} aborted the round: {event.reason}", event.exit_code,
                    final=event.final, failure=event.failure)


def _while_running(state: Member, event: MemberEvent) -> Step:
    """After the release: the command runs, then its exit is reported; the coordinator
    ends the round for everyone (Aborted, Completed), or is lost."""
    if isinstance(event, CommandExited) and state.phase is MemberPhase.RELEASED:
        finished = replace(state, phase=MemberPhase.FINISHED, exit_code=event.exit_code)
        return Step(finished, Report(event.exit_code, event.reason))
    if isinstance(event, Aborted):
        return _end(state, _aborted(state, event))
    if isinstance(event, Completed):
        return _end(state, RoundEnd("every command exited with 0", 0, final=True, completed=True))
    if isinstance(event, SyncFrom) and event.final and state.exit_code == 0:
        return Step(state, Sync(event))
    if isinstance(event, Lost):
        if state.exit_code == 0 and state.syncs:  # the copy of the chief's DIR is not known done
            return _end(state, RoundEnd(
                f"lost the coordinator {state.endpoint} after the command succeeded, before it said every "
                f"--sync-dir holds the chief's copy (this one may not): {event.reason}", ROUND_FAILED, final=True,
            ))
        if state.exit_code == 0:  # this node's part is done; nothing is left to restart for
            return _end(state, RoundEnd(f"lost the coordinator after the command succeeded: {event.reason}", 0, True, True))
        return _end(state, RoundEnd(f"lost the coordinator {state.endpoint}: {event.reason}", ROUND_FAILED))
    return Step(state, Wait())


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
    liveness = event.liveness_timeout if event.liveness_timeout > 0 else state.liveness_timeout
    frozen = replace(state, phase=MemberPhase.FROZEN, membership=membership, failing=None,
                     preflight=event.warnings, liveness_timeout=liveness)
    return Step(frozen, Confirm(membership, event.warnings))


def _on_released(state: Member, event: Released) -> Step:
    if not state.frozen:
        return _fail(state, CoordinatorError(f"coordinator {state.endpoint} released before freezing"))
    delay = start_delay(event.start_in, event.delay)
    return Step(replace(state, phase=MemberPhase.RELEASED), Start(delay))


def _on_lost(state: Member, event: Lost, now: float) -> Step:
    if state.frozen:
        return _end(state, RoundEnd(f"lost the coordinator after the freeze: {event.reason}", ROUND_FAILED))
    if state.failing is None or state.failing[0] != state.endpoint:
        return Step(replace(state, failing=(state.endpoint, now)), Rejoin())
    since = state.failing[1]
    peer = state.target
    if now - since < state.suspect_after or peer is None or peer.node_id == state.me.node_id:
        return Step(state, Rejoin())
    return Step(replace(state, failing=None), Rejoin(suspect=peer))


def _on_untrusted(state: Member, event: Untrusted, now: float) -> Step:
    """Before the freeze, the coordinator is left out of the election for good; after it,
    the stream is as good as lost."""
    if state.frozen:
        return step(state, Lost(event.reason), now)
    target = state.target if state.target is not None and state.target.node_id != state.me.node_id else None
    return Step(replace(state, failing=None), Rejoin(distrust=target))


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


def is_last_round(end: RoundEnd, number: int, policy: Policy) -> bool:
    """Whether no round follows `end` of round `number`: the coordinator said so, or this
    node's own policy does (which also bounds a coordinator that never says so)."""
    return end.final is True or policy.is_final(number, end.exit_code)
