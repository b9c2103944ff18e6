"""What a coordinator does with a Join before and around the round's own decision
(core.round.join): the header, the caller's address, whether to send it elsewhere, which
round it may ask for, and the steps that admit it.

The rule that keeps a job safe from hosts outside it: nothing a peer says before it is a
member of the current round changes the round. A Join that is refused or rejected leaves
the round exactly as it was; only a member of a running round may say that it moved on.
"""

from __future__ import annotations

from enum import Enum
from typing import Collection, Optional

from . import round as rounds
from .advert import PROTOCOL_VERSION
from .peer import IPAddress, Peer, parse_address, same_host, unmapped
from .preflight import Fingerprint
from .record import record, replace
from .round import Action, RejectReason, Round, RoundPhase, Step
from .size import Size
from .stopping import StopOrder
from .view import Target

# The highest round a peer may name. --max-restarts is at most 1,000, so no real job gets
# near; it keeps a forged number inside what every peer's integer types hold.
MAX_ROUND = 2**31 - 1

# Rounds the coordinator may start over from: the one it held is over.
_ENDED = frozenset({RoundPhase.ABORTED, RoundPhase.COMPLETED})


class Refused(str, Enum):
    VERSION_MISMATCH = "version_mismatch"
    BAD_REQUEST = "bad_request"


@record
class Refusal:
    reason: Refused
    message: str


@record
class Header:
    """What every request says about itself."""

    protocol_version: int
    job: str
    round: int


@record
class Redirection:
    """Where a Join this node does not take goes: `coordinator`, or (None) back to the
    joiner's own view."""

    reason: str
    coordinator: Optional[Peer] = None


def check_header(header: Header, job: str, protocol_version: int) -> Optional[Refusal]:
    """The same protocol, the same job, and a round number in range."""
    if header.protocol_version != protocol_version:
        return Refusal(
            Refused.VERSION_MISMATCH,
            f"protocol version {header.protocol_version}, coordinator speaks {protocol_version}",
        )
    if header.job != job:
        return Refusal(Refused.BAD_REQUEST, f"job {header.job!r} asked a node of job {job!r}")
    if header.round > MAX_ROUND:
        return Refusal(Refused.BAD_REQUEST, f"round {header.round} is out of range (at most {MAX_ROUND})")
    return None


def check_source(peer: Peer, source: str) -> Optional[str]:
    """What is wrong when a peer connects from another address than it claims: else anyone
    could join as another host, whose TF worker would then be listed without knowing it."""
    try:
        ok = same_host(peer.address, parse_address(source))
    except ValueError:
        ok = False
    return None if ok else f"it claims address {peer.address} but connects from {source}"


def check_allowed(peer: Peer, allowed: Optional[frozenset[IPAddress]]) -> Optional[str]:
    """What is wrong with a peer outside the hosts allowed in the job (--allow-host; under
    Slurm, the step's nodes), if any are named."""
    if allowed is None or unmapped(peer.address) in allowed:
        return None
    return f"{peer.address} is not one of the hosts allowed in the job (--allow-host, or the Slurm step's nodes)"


def route(state: Round, me: Peer, target: Target, peer: Peer) -> Optional[Redirection]:
    """Whether a Join goes elsewhere: while no round runs here, to the node this one
    believes coordinates; and a peer of the other IP family than this node uses for the
    job, back to its own view."""
    mine = me.address.version
    if peer.address.version != mine:
        return Redirection(f"job {state.job!r} uses IPv{mine} on this node, not IPv{peer.address.version}")
    forming = state.phase is RoundPhase.GATHERING or state.phase in _ENDED
    if forming and target.endpoint != me.endpoint:
        return Redirection(f"{me.endpoint} is not the coordinator", target.peer)
    return None


def start_over(state: Round) -> Round:
    """The round after every joiner of a gathering round was sent elsewhere: the same
    number, nobody in it (they join where they were sent, or come back). Any other round
    stays: its members are frozen into it."""
    return state.next(state.number) if state.phase is RoundPhase.GATHERING else state


def round_limit(state: Round, own: int) -> int:
    """The highest round a Join may ask for. `own` is the round this node is in itself,
    which no peer can set. A gathering round may take one round past that (its peers saw
    an abort this node has not read yet); any other, one past its own number (the next
    round, after an abort)."""
    if state.phase is RoundPhase.GATHERING:
        return min(max(state.number, own + 1), MAX_ROUND)
    return min(max(state.number, own) + 1, MAX_ROUND)


def not_known_yet(state: Round, asked: int, own: int) -> Optional[Redirection]:
    """A forming round asked for a later round than this node knows of, within bounds: the
    joiner is sent back to ask again, not refused. A daemon restarted in a running job starts
    in round 1 and learns the job's round from its peers' adverts a moment later; its peers'
    Joins must not fail meanwhile. Like every redirect, it changes nothing here."""
    forming = state.phase is RoundPhase.GATHERING or state.phase in _ENDED
    if not forming or asked <= round_limit(state, own) or asked > MAX_ROUND:
        return None
    return Redirection(
        f"round {asked} of job {state.job!r} is not known here yet (this node is in round "
        f"{max(state.number, own)}): ask again"
    )


def check_round(state: Round, asked: int, own: int) -> Optional[Refusal]:
    limit = round_limit(state, own)
    if asked <= limit:
        return None
    return Refusal(
        Refused.BAD_REQUEST,
        f"round {asked} is out of range (at most {limit}: job {state.job!r} is in round {max(state.number, own)})",
    )


def _is_member(state: Round, peer: Peer) -> bool:
    return state.membership is not None and peer in state.membership.members


def admit(
    state: Round, peer: Peer, asked: int, expect: Size, now: float, fingerprint: Optional[Fingerprint] = None
) -> tuple[Step, ...]:
    """The steps a Join for round `asked` (within `round_limit`) leads to, in order; the
    last one is the joiner's answer. A rejection comes alone, with `state` unchanged.

    An ended round makes way for the next; a gathering one takes a later number; a running
    one is aborted only when one of its own members asks for a later round (it stopped its
    command already). A newcomer that finds a running round with room aborts it when a
    restart is left (core.round.join) and joins the round that follows."""
    asked = max(1, asked)
    steps: list[Step] = []
    if state.phase in _ENDED:
        steps.append(Step(state.next(max(asked, state.number + 1)), Action.NOTHING))
    elif state.phase is RoundPhase.GATHERING and asked > state.number:
        steps.append(Step(replace(state, number=asked), Action.NOTHING))
    elif state.running and asked > state.number and _is_member(state, peer):
        aborted = rounds.abort(state, f"a member moved on to round {asked}")
        steps += [aborted, Step(aborted.state.next(asked), Action.NOTHING)]
    step = rounds.join(steps[-1].state if steps else state, peer, expect, now, fingerprint)
    if step.action is Action.ABORT and not step.state.refused:  # admitted by a restart
        steps.append(step)
        step = rounds.join(step.state.next(), peer, expect, now, fingerprint)
    if step.rejection is not None:
        return (replace(step, state=state),)
    return (*steps, step)


@record
class JoinAsk:
    """A Join's first message as values: `peer` and `expect` are the problem (a string)
    when the message's own could not be read."""

    header: Header
    source: str  # the address the stream comes from
    peer: Peer | str
    expect: Size | str
    fingerprint: Optional[Fingerprint] = None


@record
class Answer:
    """What a Join is answered with; exactly one of the replies is set, or `steps` when the
    joiner is admitted (the earlier ones for the old round's members, the last one its
    own). `warning` is (kind, text) for the rate-limited warnings of refused callers."""

    refusal: Optional[Refusal] = None
    rejection: Optional[rounds.Rejection] = None
    redirection: Optional[Redirection] = None
    stop: Optional[StopOrder] = None
    duplicate: bool = False  # a second stream for `peer`: the first keeps its place
    steps: tuple[Step, ...] = ()
    peer: Optional[Peer] = None  # the joiner, once its address was checked
    warning: Optional[tuple[str, str]] = None


def answer(
    state: Round, me: Peer, target: Target, ask: JoinAsk, *,
    own: int, stopped: Optional[StopOrder], streaming: Collection[str], now: float,
    allowed: Optional[frozenset[IPAddress]] = None,
) -> Answer:
    """The coordinator's answer to a Join, the checks in their order: the header; after a
    `rendezvous stop`, the stop; the peer's address against the stream's, and among the
    `allowed` hosts when any are named (check_allowed); one stream per member; elsewhere
    (route, not_known_yet); the round asked for; then the round's own decision (admit).
    `own` is the round this node is in itself, `streaming` the node ids with an open Join
    stream."""
    header = ask.header
    refusal = check_header(header, state.job, PROTOCOL_VERSION)
    if refusal is not None:
        return Answer(refusal=refusal)
    if stopped is not None:  # a member back for the next round, or one late to the job
        return Answer(stop=stopped)
    peer = ask.peer
    problem = peer if isinstance(peer, str) else check_source(peer, ask.source) or check_allowed(peer, allowed)
    if problem is not None or isinstance(peer, str):
        return Answer(refusal=Refusal(Refused.BAD_REQUEST, f"bad peer: {problem}"),
                      warning=("bad peer", f"refused a Join from {ask.source}: {problem}"))
    if peer.node_id in streaming:  # a clone of a member, or its identity replayed
        return Answer(duplicate=True, peer=peer, warning=(
            "duplicate", f"refused a second stream for member {peer.node_id} from {ask.source}"))
    redirection = route(state, me, target, peer)
    if redirection is None:
        redirection = not_known_yet(state, header.round, own)
    if redirection is not None:
        return Answer(redirection=redirection, peer=peer)
    refusal = check_round(state, header.round, own)
    if refusal is not None:
        return Answer(refusal=refusal, peer=peer, warning=("round", f"rejected {peer.describe()}: {refusal.message}"))
    if isinstance(ask.expect, str):
        steps: tuple[Step, ...] = (
            rounds.reject(state, RejectReason.EXPECT_MISMATCH, f"{peer.describe()}: --expect {ask.expect}"),)
    else:
        steps = admit(state, peer, header.round, ask.expect, now, ask.fingerprint)
    rejection = steps[-1].rejection
    if rejection is not None:
        return Answer(rejection=rejection, peer=peer,
                      warning=(rejection.reason.value, f"rejected {peer.describe()}: {rejection.message}"))
    return Answer(steps=steps, peer=peer)
