"""The coordinator's state machine for one round, as plain data and small decisions.

    GATHERING --(MAX peers joined, or MIN and   --> FROZEN --(all members ready)--> RELEASED
        ^  |     no change for the settle time)       |                               |
        |  +--- join / leave                          |                               +--(all exit 0)--> COMPLETED
        |                                             +--(member left, digest differs)--> ABORTED
        +--(the frozen members' fingerprints differ: preflight)--> ABORTED, final
        |                                      RELEASED --(a command failed, a member was lost or
        |                                                  went silent, a new peer came while
        |                                                  fewer than MAX run)--> ABORTED
        +-- the next round, once members come back (`newer`)

With `--sync-dir`, members report their copy's summary with Ready and Finished: when the
copies differ, the last Ready leads to SYNCING (every member makes its copy the source's,
then RELEASED) and the last clean Finished to FINAL_SYNC (the chief's copy, then COMPLETED).

Each operation returns a `Step`: the next state and the one action the coordinator's
adapter must carry out (tell everyone who is waiting, hand out the frozen list,
release everyone at once, abort everyone, or reject the one peer that asked).
After an abort every member joins the next round; `Policy` says when no restart follows.
The round, its phases and the `Step` are plain data, in `round_state`.
"""

from __future__ import annotations

from typing import Mapping, Optional

from . import preflight
from .failure import Failure
from .manifest import SourceChoice, SyncSummary, choose_source, out_of_sync
from .peer import Peer, describe_peers, shared_address
from .preflight import Fingerprint
from .record import replace
from .round_state import (  # the round as data, importable from here as before
    ROUND_FAILED as ROUND_FAILED,
    Action as Action,
    Policy as Policy,
    RejectReason as RejectReason,
    Rejection as Rejection,
    Round as Round,
    RoundPhase as RoundPhase,
    Step as Step,
)
from .size import Size
from .stopping import STOPPED, StopOrder
from .tf_config import Membership


# The shortest liveness timeout, in seconds: heartbeats go out every fifth of it, and a
# shorter one would make a node do little else (set by hand, or sent by a coordinator).
MIN_LIVENESS_TIMEOUT = 0.1


def heartbeat_interval(liveness_timeout: float) -> float:
    """How often each side of a running round proves itself alive: five times within the
    timeout, so that one late heartbeat is no loss."""
    return liveness_timeout / 5


def reject(state: Round, reason: RejectReason, message: str) -> Step:
    """Refuse the one peer that asked; the round goes on unchanged."""
    return Step(state, Action.REJECT, Rejection(reason, message))


def join(state: Round, peer: Peer, expect: Size, now: float, fingerprint: Optional[Fingerprint] = None) -> Step:
    """A peer asks to join at `now`. The MAX-th join freezes, unless the preflight refuses
    the members' differences; a frozen round admits nobody, unless it has fewer than MAX
    members and a restart is left: then it is aborted, and the peer joins the round that
    follows."""
    if expect != state.expect:
        return reject(
            state,
            RejectReason.EXPECT_MISMATCH,
            f"peer {peer.describe()} runs with --expect {expect}, but the coordinator of job "
            f"{state.job!r} runs with --expect {state.expect}; start every peer with the same value",
        )
    if state.phase is not RoundPhase.GATHERING:
        return _join_late(state, peer)
    others = [p for p in state.joined if p.node_id != peer.node_id]
    for other in state.joined:
        if other.node_id == peer.node_id and other != peer:
            return reject(
                state,
                RejectReason.DUPLICATE_NODE,
                f"node id {peer.node_id} already joined from {other.endpoint}, now from "
                f"{peer.endpoint}",
            )
    for other in others:
        if other.address == peer.address and (
            other.port == peer.port or other.tf_port == peer.tf_port
        ):
            return reject(
                state,
                RejectReason.ENDPOINT_CLASH,
                f"{peer.describe()} uses the endpoint of {other.describe()}, which joined first: two hosts "
                f"are configured with the address {peer.address}. Give each host its own address",
            )
    joined = tuple(sorted([*others, peer]))
    fingerprints = {**state.fingerprints, peer.node_id: fingerprint}
    gathering = replace(state, joined=joined, changed=now, fingerprints=fingerprints)
    if len(joined) < state.expect.max:
        return Step(gathering, Action.BROADCAST_WAITING)
    return _freeze(gathering, now)


def check_preflight(frozen: Round) -> Step:
    """Compare the frozen members' fingerprints: a refused difference ends the job on every
    node before any command starts (no restart mends it); allowed ones go out with the list,
    and so does the GPU count `--gpus` chose for this round's members."""
    assert frozen.membership is not None
    members = [(p, f) for p in frozen.membership.members if (f := frozen.fingerprints.get(p.node_id))]
    verdict = preflight.compare(members, frozen.policy.allow_mismatch, frozen.policy.gpus)
    if verdict.refused:
        return abort(replace(frozen, refused=True), verdict.reason, preflight.REFUSED, final=True)
    membership = replace(frozen.membership, gpus=verdict.gpus)  # --gpus: the count every member uses
    return Step(replace(frozen, membership=membership, warnings=verdict.warning_lines()), Action.BROADCAST_FROZEN)


def _join_late(state: Round, peer: Peer) -> Step:
    """A peer that is not a member asks to join a frozen or running round."""
    members = state.membership.members if state.membership else ()
    running = (RoundPhase.FROZEN, RoundPhase.SYNCING, RoundPhase.RELEASED)
    room = state.phase in running and len(members) < state.expect.max
    if room and not state.member(peer.node_id):
        if not state.policy.is_final(state.number, ROUND_FAILED):
            return abort(
                state,
                f"{peer.describe()} came while round {state.number} ran with {len(members)} of "
                f"{state.expect.describe()} peers: the next round admits it",
            )
    why = f"no restart is left to admit {peer.describe()}" if room else f"{peer.describe()} is not a member"
    return reject(
        state,
        RejectReason.ALREADY_FROZEN,
        f"job {state.job!r} round {state.number} is already {state.phase.value} with "
        f"{len(members)} of {state.expect.describe()} peers ({describe_peers(members)}); {why}. "
        "Use another --job name, or wait for it to end",
    )


def _freeze(state: Round, now: float) -> Step:
    """Waiting peers send no heartbeats: every member counts as heard at the freeze."""
    membership = Membership.freeze(state.job, state.number, state.joined)
    heard = {p.node_id: now for p in membership.members}
    frozen = replace(state, phase=RoundPhase.FROZEN, membership=membership, heard=heard, frozen_at=now)
    return check_preflight(frozen)


def settle(state: Round, now: float) -> Step:
    """An elastic round with at least MIN peers freezes once nobody came or went for the
    settle time; call it when that time may have passed."""
    quiet = now - state.changed >= state.settle
    if state.phase is RoundPhase.GATHERING and len(state.joined) >= state.expect.min and quiet:
        return _freeze(state, now)
    return Step(state, Action.NOTHING)


def leave(state: Round, node_id: str, now: float) -> Step:
    """A peer's stream ended at `now`. Before the freeze it simply leaves; after it, the
    round fails."""
    if not state.is_joined(node_id):
        return Step(state, Action.NOTHING)
    if state.phase is RoundPhase.GATHERING:
        joined = tuple(p for p in state.joined if p.node_id != node_id)
        return Step(replace(state, joined=joined, changed=now), Action.BROADCAST_WAITING)
    peer = state.member(node_id)
    if peer is None or not _watched(state, node_id):
        return Step(state, Action.NOTHING)
    if _gave_up_on_me(state, now):
        return abort(
            state, f"the coordinator did not run for {state.paused_for:.1f} s (frozen, stopped or starved "
            f"of CPU), and {peer.describe()} gave up on it", final=state.phase is RoundPhase.FINAL_SYNC,
        )
    if state.phase in (RoundPhase.FROZEN, RoundPhase.SYNCING):
        return abort(state, f"member {peer.describe()} left before the start{_twins(state, peer)}")
    return abort(
        state, f"{peer.describe()}: its rendezvous daemon was lost (stream closed){_twins(state, peer)}",
        final=state.phase is RoundPhase.FINAL_SYNC,
    )


def _watched(state: Round, node_id: str) -> bool:
    """Whether this member must still be there for the round to go on: after the freeze,
    unless its command finished with 0 (or, in the final sync, it has the chief's copy)."""
    if state.phase in (RoundPhase.FROZEN, RoundPhase.SYNCING):
        return True
    if state.phase is RoundPhase.RELEASED:
        return node_id not in state.succeeded
    return state.phase is RoundPhase.FINAL_SYNC and node_id not in state.synced


def _twins(state: Round, peer: Peer) -> str:
    """A hint when a lost member shares its address with another member: two hosts given
    the same address break each other's connections, and that is how it shows."""
    members = state.membership.members if state.membership else ()
    if not any(p.address == peer.address and p.node_id != peer.node_id for p in members):
        return ""
    return f" ({shared_address(peer.address, 'more than one member')})"


def ready(state: Round, node_id: str, digest: str, sync: Optional[SyncSummary] = None) -> Step:
    """A member confirms the frozen list by its digest (and reports its --sync-dir copy);
    the last confirmation releases all, or first has every copy made the source's."""
    if state.phase is not RoundPhase.FROZEN or state.membership is None:
        return Step(state, Action.NOTHING)
    membership = state.membership
    try:
        membership.rank_of(node_id)
    except KeyError:
        return reject(state, RejectReason.NOT_A_MEMBER, f"node {node_id} is not a member")
    if digest != membership.digest:
        return abort(
            state,
            f"node {node_id} computed cluster digest {digest[:12]}, expected "
            f"{membership.digest[:12]}: the peers do not agree on the member list",
        )
    confirmed = state.ready | {node_id}
    state = replace(state, ready=confirmed, sync=_reported(state, node_id, sync))
    if len(confirmed) < membership.world_size:
        return Step(state, Action.NOTHING)
    return _sync_before(state, RoundPhase.RELEASED)


def start_margin(state: Round, now: float, least: float, most: float) -> float:
    """Seconds from the release at `now` to the common start: time for the release to reach
    every member. The frozen list went to every member and came back as the last Ready,
    each member's arming included, in `now - frozen_at`; the release goes one way of that
    trip, with less to do at the other end: the whole trip, within [`least`, `most`]."""
    return min(max(now - state.frozen_at, least), most)


def _reported(state: Round, node_id: str, sync: Optional[SyncSummary]) -> Mapping[str, SyncSummary]:
    return {**state.sync, node_id: sync} if sync is not None else state.sync


def _go_on(state: Round, phase: RoundPhase) -> Step:
    """Release (the summaries of the freeze are spent), or complete."""
    if phase is RoundPhase.RELEASED:
        return Step(replace(state, phase=phase, sync={}), Action.RELEASE)
    return Step(replace(state, phase=phase), Action.COMPLETE)


def _sync_before(state: Round, phase: RoundPhase, source: Optional[SourceChoice] = None) -> Step:
    """Go on to `phase` (RELEASED or COMPLETED) when nobody syncs or every copy is alike
    already; else every member makes its copy `source`'s (by default `choose_source`)."""
    assert state.membership is not None
    members = state.membership.members
    if not state.sync:
        return _go_on(state, phase)
    final = phase is RoundPhase.COMPLETED
    missing = [m for m in members if m.node_id not in state.sync]
    if missing:
        return abort(
            state, f"--sync-dir is set on some nodes but not on {describe_peers(missing)}: set it on every node",
            final=True,
        )
    broken = [f"{m.describe()}: {state.sync[m.node_id].error}" for m in members if state.sync[m.node_id].error]
    if broken:
        return abort(state, "; ".join(broken), final=True)
    choice = source or choose_source(members, state.sync)
    digest = state.sync[choice.source.node_id].digest
    if not out_of_sync(members, state.sync, digest):
        return _go_on(state, phase)
    syncing = replace(
        state, phase=RoundPhase.FINAL_SYNC if final else RoundPhase.SYNCING, source=choice.source,
        source_digest=digest, source_reason=choice.why, synced=frozenset(),
    )
    return Step(syncing, Action.BROADCAST_SYNC)


def synced(state: Round, node_id: str, digest: str, error: str = "") -> Step:
    """A member made its copy the source's (`digest`: what it has now) or could not
    (`error`). A failure before the release fails the round (a restart tries again); in
    the final sync it ends the job, whose commands must not run again."""
    peer = state.member(node_id)
    if state.phase not in (RoundPhase.SYNCING, RoundPhase.FINAL_SYNC) or peer is None:
        return Step(state, Action.NOTHING)
    final = state.phase is RoundPhase.FINAL_SYNC
    if error:
        return abort(state, f"{peer.describe()}: {error}", final=final)
    if digest != state.source_digest:
        return abort(
            state, f"{peer.describe()} has copy {digest[:12]} after the sync, expected {state.source_digest[:12]}",
            final=final,
        )
    done = replace(state, synced=state.synced | {node_id})
    if len(done.synced) < len(state.membership.members):  # type: ignore[union-attr]
        return Step(done, Action.NOTHING)
    return _go_on(done, RoundPhase.COMPLETED if final else RoundPhase.RELEASED)


def abort(
    state: Round, reason: str, exit_code: int = ROUND_FAILED, final: bool = False, failure: Optional[Failure] = None
) -> Step:
    """End the round for every member (a failed command's `failure` goes to each). Final
    when asked, when restarts ran out or the exit code is one a restart cannot fix."""
    if state.phase in (RoundPhase.ABORTED, RoundPhase.COMPLETED):
        return Step(state, Action.NOTHING)
    final = final or state.policy.is_final(state.number, exit_code)
    ended = replace(state, phase=RoundPhase.ABORTED, abort_reason=reason, exit_code=exit_code, final=final,
                    failure=failure)
    return Step(ended, Action.ABORT)


def stop(state: Round, order: StopOrder) -> Step:
    """`rendezvous stop`: end the round for every member, final, with the stop's own exit
    code, in any phase but a completed one (a gathering round too: its joined peers end, and
    a round being restarted: its members' rejoins are answered with the stop). Not a failure:
    no restart follows whatever `Policy` says."""
    if state.phase is RoundPhase.COMPLETED:
        return Step(state, Action.NOTHING)
    ended = replace(state, phase=RoundPhase.ABORTED, abort_reason=f"stopped by {order.describe()}",
                    exit_code=STOPPED, final=True, stop=order)
    return Step(ended, Action.ABORT)


def newer(state: Round, number: int) -> Step:
    """A peer asks to join round `number`: the round this coordinator holds is over for it.

    A gathering round takes the newer number; a running one is aborted (that peer has
    already stopped its command); an ended one makes way for the new round."""
    if number <= state.number and state.phase not in (RoundPhase.ABORTED, RoundPhase.COMPLETED):
        return Step(state, Action.NOTHING)
    number = max(number, state.number + (state.phase is not RoundPhase.GATHERING))
    if state.phase is RoundPhase.GATHERING:
        return Step(replace(state, number=number), Action.NOTHING)
    if state.running:
        return abort(state, f"a member moved on to round {number}")
    return Step(state.next(number), Action.NOTHING)


def heard(state: Round, node_id: str, now: float) -> Round:
    """Any message from a member proves it alive at `now`."""
    return replace(state, heard={**state.heard, node_id: now})


def paused(deadline: float, now: float, allowance: float) -> bool:
    """Whether a process that slept until `deadline` woke more than `allowance` late, at
    `now`: it did not run meanwhile (starved of CPU, stopped, its machine suspended), and
    what its peers sent in that time may still wait unread. Their silence is then its own."""
    return now - deadline > allowance


def resumed(state: Round, now: float, paused_for: float = 0.0) -> Round:
    """The coordinator ran again after a pause (`paused`) of `paused_for` seconds: every
    member counts as heard `now`, so that a member is judged by what it sends from here on,
    not by messages the coordinator has not read yet; and a member that gave up on it
    meanwhile is not blamed for the round (`leave`)."""
    heard = {node_id: max(last, now) for node_id, last in state.heard.items()}
    return replace(state, heard=heard, resumed_at=now, paused_for=paused_for)


def _gave_up_on_me(state: Round, now: float) -> bool:
    """Whether a stream that closed `now` is one a member closed while this coordinator did
    not run: those arrive at once when it runs again, within as long as it did not."""
    return state.paused_for > 0 and now - state.resumed_at <= state.paused_for


def finished(
    state: Round, node_id: str, exit_code: int, reason: str = "", sync: Optional[SyncSummary] = None,
    failure: Optional[Failure] = None,
) -> Step:
    """A member's command ended. Anything but a clean 0 ends the round for everyone, its
    `failure` (the cause it sent) named after this coordinator's knowledge of who it is;
    the last clean 0 completes the job, once every --sync-dir is the chief's copy."""
    peer = state.member(node_id)
    if state.phase is not RoundPhase.RELEASED or peer is None:
        return Step(state, Action.NOTHING)
    if exit_code != 0 or reason:
        why = reason or f"command exited with code {exit_code}"
        code = exit_code or ROUND_FAILED
        if failure is None:
            return abort(state, f"{peer.describe()}: {why}", code)
        assert state.membership is not None
        failure = replace(failure, node_id=peer.node_id, address=str(peer.address), exit_code=code,
                          rank=state.membership.rank_of(node_id), reason=reason)
        cause = "" if failure.cause == why else f": {failure.cause}"
        fix = f"; {failure.hint}" if failure.hint else ""  # the last line every node prints
        return abort(state, f"{peer.describe()}: {why}{cause}{fix}", code, failure=failure)
    state = replace(state, succeeded=state.succeeded | {node_id}, sync=_reported(state, node_id, sync))
    if state.membership is not None and len(state.succeeded) == state.membership.world_size:
        chief = state.membership.members[0]
        return _sync_before(state, RoundPhase.COMPLETED, SourceChoice(chief, "chief of the round that completed"))
    return Step(state, Action.NOTHING)


def check_liveness(state: Round, now: float, timeout: float, coordinator: str = "") -> Step:
    """After the freeze, a member not heard from for `timeout` seconds (frozen, cut off)
    ends the round. Before it, nobody sends heartbeats (a job of N waiting peers would cost
    its coordinator 2N messages a second for nothing): a silent peer is HTTP/2 keepalive's
    to drop. The member with the `coordinator`'s node id shares its process and sends none."""
    if not state.running or state.membership is None:
        return Step(state, Action.NOTHING)
    for peer in state.membership.members:
        last = state.heard.get(peer.node_id)
        if peer.node_id == coordinator or not _watched(state, peer.node_id) or last is None:
            continue
        if now - last > timeout:
            return abort(
                state, f"{peer.describe()}: not heard from for {now - last:.1f} s (frozen or cut off)",
                final=state.phase is RoundPhase.FINAL_SYNC,
            )
    return Step(state, Action.NOTHING)
