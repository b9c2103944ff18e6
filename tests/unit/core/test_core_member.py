"""Tests of rendezvous.core.member: the member's side of one round."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.member import (
    Untrusted,
    Aborted,
    CommandExited,
    Completed,
    Heartbeat,
    Report,
    RoundEnd,
    is_last_round,
    Confirm,
    Fail,
    Frozen,
    Lost,
    Member,
    MemberPhase,
    Redirected,
    Rejected,
    Rejoin,
    Released,
    Start,
    TargetChanged,
    Wait,
    Waiting,
    start_delay,
    step,
)
from rendezvous.core.peer import Peer
from rendezvous.core.record import replace
from rendezvous.core.round import Policy
from rendezvous.core.tf_config import Membership
from rendezvous.errors import CoordinatorError, MembershipError

ip = ipaddress.ip_address


def peer(address: str, node_id: str, port: int = 7000) -> Peer:
    return Peer(node_id=node_id, address=ip(address), port=port, tf_port=9000)


A = peer("10.0.0.9", "aaaaaaaa")
ME = peer("10.0.0.10", "bbbbbbbb")
C = peer("10.0.0.100", "cccccccc")
MEMBERSHIP = Membership.freeze("j", 1, [A, ME, C])


def joining(target: Peer = A) -> Member:
    return Member(ME, suspect_after=3.0).joining(target.endpoint, target)


def frozen() -> Member:
    return step(joining(), Frozen(MEMBERSHIP, MEMBERSHIP.digest), 0.0).state


def released() -> Member:
    return step(frozen(), Released(0.0, 0.05), 0.0).state


def finished(code: int) -> Member:
    return step(released(), CommandExited(code), 0.0).state


def test_waiting_changes_nothing():
    result = step(joining(), Waiting((A, ME), 3), 0.0)
    assert result.action == Wait()
    assert result.state.phase is MemberPhase.JOINING


def test_a_frozen_list_with_me_is_confirmed():
    result = step(joining(), Frozen(MEMBERSHIP, MEMBERSHIP.digest), 0.0)
    assert result.action == Confirm(MEMBERSHIP)
    assert result.state.phase is MemberPhase.FROZEN
    assert result.state.membership == MEMBERSHIP


def test_the_preflights_warnings_come_with_the_confirmation_and_stay_in_the_state():
    warnings = ("preflight: 10.0.0.9 has Python 3.11.4, the others 3.11.9 (allowed by --allow-mismatch python)",)
    result = step(joining(), Frozen(MEMBERSHIP, MEMBERSHIP.digest, warnings), 0.0)
    assert result.action == Confirm(MEMBERSHIP, warnings)
    assert result.state.preflight == warnings


def test_the_coordinators_liveness_timeout_rules_the_round_from_the_freeze_on():
    state = Member(ME, suspect_after=3.0, liveness_timeout=0.5).joining(A.endpoint, A)
    assert (state.liveness_timeout, state.heartbeat_interval) == (0.5, 0.1)
    result = step(state, Frozen(MEMBERSHIP, MEMBERSHIP.digest, liveness_timeout=30.0), 0.0)
    assert (result.state.liveness_timeout, result.state.heartbeat_interval) == (30.0, 6.0)


def test_a_coordinator_that_sends_no_liveness_timeout_leaves_the_members_own():
    state = Member(ME, suspect_after=3.0, liveness_timeout=7.0).joining(A.endpoint, A)
    result = step(state, Frozen(MEMBERSHIP, MEMBERSHIP.digest), 0.0)
    assert result.state.liveness_timeout == 7.0


def test_a_round_refused_by_the_preflight_ends_for_good_and_keeps_the_reason():
    reason = "preflight: 10.0.0.100 has 4 GPUs, the others 8"
    result = step(joining(), Aborted(reason, 4, final=True, preflight=True), 0.0)
    assert result.action == RoundEnd(f"the coordinator {A.endpoint} aborted the round: {reason}", 4, True)
    assert result.state.preflight == (reason,)
    assert step(joining(), Aborted("member left", 6), 0.0).state.preflight == ()


def test_a_frozen_list_without_me_fails_naming_the_members():
    membership = Membership.freeze("j", 1, [A, C])
    result = step(joining(), Frozen(membership, membership.digest), 0.0)
    assert isinstance(result.action, Fail)
    assert isinstance(result.action.error, CoordinatorError)
    assert "without this node" in str(result.action.error) and "10.0.0.100" in str(result.action.error)
    assert result.state.phase is MemberPhase.FAILED


def test_a_frozen_list_with_me_as_someone_else_fails():
    moved = peer("10.0.0.10", "bbbbbbbb", port=7001)
    membership = Membership.freeze("j", 1, [A, moved])
    result = step(joining(), Frozen(membership, membership.digest), 0.0)
    assert isinstance(result.action, Fail)
    assert "froze this node as" in str(result.action.error)


def test_a_stream_opened_after_a_switch_of_family_is_frozen_as_the_switched_node():
    moved = peer("fd00::10", ME.node_id)
    target = peer("fd00::9", A.node_id)
    membership = Membership.freeze("j", 1, [target, moved])
    state = Member(ME, suspect_after=3.0).joining(target.endpoint, target, moved)
    assert state.me == moved and joining().joining(A.endpoint, A).me == ME
    assert step(state, Frozen(membership, membership.digest), 0.0).action == Confirm(membership)
    assert isinstance(step(joining(target), Frozen(membership, membership.digest), 0.0).action, Fail)


def test_a_node_that_joins_its_own_endpoint_is_joined_to_itself():
    assert Member(ME, suspect_after=3.0).joining(ME.endpoint, ME).joined_to_self
    assert not joining(A).joined_to_self
    moved = peer("fd00::10", ME.node_id)
    assert Member(ME, suspect_after=3.0).joining(moved.endpoint, moved, moved).joined_to_self
    assert not Member(ME, suspect_after=3.0).joining(ME.endpoint, ME, moved).joined_to_self


def test_release_after_the_freeze_starts_after_the_delay():
    result = step(frozen(), Released(start_in=0.03, delay=0.05), 0.0)
    assert result.action == Start(pytest.approx(0.03))
    assert result.state.phase is MemberPhase.RELEASED


def test_release_before_the_freeze_fails():
    result = step(joining(), Released(0.01, 0.05), 0.0)
    assert isinstance(result.action, Fail)
    assert "released before freezing" in str(result.action.error)


def test_redirect_before_the_freeze_rejoins():
    assert step(joining(), Redirected(None, "lower peer"), 0.0).action == Rejoin()


def test_redirect_after_the_freeze_fails():
    result = step(frozen(), Redirected(None, "lower peer"), 0.0)
    assert isinstance(result.action, Fail)
    assert isinstance(result.action.error, CoordinatorError)
    assert "redirected after the freeze" in str(result.action.error)


def test_rejected_fails_with_a_membership_error_carrying_the_message():
    result = step(joining(), Rejected("ALREADY_FROZEN", "job 'j' is already released"), 0.0)
    assert isinstance(result.action.error, MembershipError)
    assert str(result.action.error) == "job 'j' is already released"


@pytest.mark.parametrize("state", [joining(), frozen(), released(), finished(0)], ids=["joining", "frozen", "released", "finished"])
def test_aborted_ends_the_round_with_the_reason_and_the_coordinators_verdict(state):
    result = step(state, Aborted("member 10.0.0.9 left before the start", 6, final=True), 0.0)
    assert result.action == RoundEnd(f"the coordinator {A.endpoint} aborted the round: member 10.0.0.9 left before the start", 6, True)
    assert result.state.phase is MemberPhase.ENDED


def test_a_lost_stream_after_the_freeze_ends_the_round():
    result = step(frozen(), Lost("closed"), 0.0)
    assert result.action == RoundEnd("lost the coordinator after the freeze: closed", 6)


def test_the_commands_exit_is_reported_once():
    result = step(released(), CommandExited(3), 0.0)
    assert result.action == Report(3, "")
    assert result.state.phase is MemberPhase.FINISHED and result.state.exit_code == 3
    assert step(result.state, CommandExited(3), 0.0).action == Wait()


def test_completed_ends_the_job_with_0():
    assert step(finished(0), Completed(), 0.0).action == RoundEnd("every command exited with 0", 0, True, True)


def test_losing_the_coordinator_while_running_ends_the_round_for_a_restart():
    result = step(released(), Lost("nothing heard from it for 5.2 s"), 0.0)
    assert result.action == RoundEnd(f"lost the coordinator {A.endpoint}: nothing heard from it for 5.2 s", 6)


def test_losing_the_coordinator_after_succeeding_is_success():
    result = step(finished(0), Lost("closed"), 0.0)
    assert result.action.completed and result.action.exit_code == 0


def test_with_a_sync_dir_losing_the_coordinator_after_succeeding_ends_the_job_with_6():
    """The job's end makes every --sync-dir the chief's copy, which only the coordinator
    can say is done: without its word this node's copy may be stale (a next job would
    resume from it), and the job ends failed, with no round after it."""
    state = replace(finished(0), syncs=True)
    action = step(state, Lost("nothing heard from it for 2.0 s"), 0.0).action
    assert action == RoundEnd(
        f"lost the coordinator {A.endpoint} after the command succeeded, before it said every --sync-dir "
        "holds the chief's copy (this one may not): nothing heard from it for 2.0 s", 6, final=True,
    )
    assert step(state, Completed(), 0.0).action.exit_code == 0


def test_losing_the_coordinator_after_failing_is_not():
    assert step(finished(1), Lost("closed"), 0.0).action == RoundEnd(f"lost the coordinator {A.endpoint}: closed", 6)


def test_heartbeats_change_nothing():
    assert step(released(), Heartbeat(), 0.0).action == Wait()
    assert step(joining(), Heartbeat(), 0.0).action == Wait()


def test_the_last_round_is_the_coordinators_word_or_this_nodes_policy():
    policy = Policy(max_restarts=2)
    assert is_last_round(RoundEnd("x", 1, final=True), 1, policy)
    assert not is_last_round(RoundEnd("x", 1, final=False), 1, policy)
    assert is_last_round(RoundEnd("x", 1, final=False), 3, policy), "a coordinator that never stops is bounded"
    assert is_last_round(RoundEnd("x", 127), 1, policy)


def test_a_coordinator_that_stays_unreachable_is_suspected_after_suspect_after():
    state = joining()
    first = step(state, Lost("refused"), 10.0)
    assert first.action == Rejoin()
    again = step(first.state.joining(A.endpoint, A), Lost("refused"), 12.9)
    assert again.action == Rejoin()  # not yet 3 s
    late = step(again.state.joining(A.endpoint, A), Lost("refused"), 13.0)
    assert late.action == Rejoin(suspect=A)
    assert late.state.failing is None


def test_failing_counts_per_endpoint():
    first = step(joining(A), Lost("refused"), 10.0).state
    other = step(first.joining(C.endpoint, C), Lost("refused"), 20.0)
    assert other.action == Rejoin()  # C has just started failing
    assert other.state.failing == (C.endpoint, 20.0)


def test_hearing_from_the_coordinator_clears_the_failure():
    first = step(joining(), Lost("refused"), 10.0).state
    heard = step(first.joining(A.endpoint, A), Waiting((A,), 3), 11.0).state
    assert heard.failing is None
    assert step(heard, Lost("closed"), 20.0).action == Rejoin()


def test_i_never_suspect_myself():
    state = joining(ME)
    state = step(state, Lost("refused"), 0.0).state
    assert step(state.joining(ME.endpoint, ME), Lost("refused"), 100.0).action == Rejoin()


def test_an_endpoint_without_a_known_peer_is_never_suspected():
    state = Member(ME, 3.0, 30.0).joining("10.0.0.1:7000", None)
    state = step(state, Lost("refused"), 0.0).state
    assert step(state, Lost("refused"), 100.0).action == Rejoin()


def test_a_new_target_before_the_freeze_rejoins():
    assert step(joining(A), TargetChanged(C.endpoint), 0.0).action == Rejoin()
    assert step(joining(A), TargetChanged(A.endpoint), 0.0).action == Wait()


def test_conflicts_before_the_freeze_fail_with_every_message():
    result = step(joining(), TargetChanged(A.endpoint, ("one", "two")), 0.0)
    assert isinstance(result.action.error, MembershipError)
    assert str(result.action.error) == "one; two"


def test_after_the_freeze_discovery_no_longer_matters():
    assert step(frozen(), TargetChanged(C.endpoint, ("conflict",)), 0.0).action == Wait()


@pytest.mark.parametrize(
    "event",
    [Waiting((), 3), Lost("x"), Aborted("x"), Released(0, 0), TargetChanged("x"), Completed(), CommandExited(0)],
)
def test_after_the_end_or_a_failure_nothing_changes(event):
    ended = step(released(), Completed(), 0.0).state
    failed = step(joining(), Rejected("X", "no"), 0.0).state
    for state in (ended, failed):
        assert step(state, event, 1.0).action == Wait()


# -- the common start time -------------------------------------------------------


@pytest.mark.parametrize(
    "start_in, delay, expected",
    [
        (0.05, 0.05, 0.05),  # on time: wait until the common start
        (0.03, 0.05, 0.03),  # released a little late: wait less
        (-0.25, 0.05, 0.0),  # released after the start: go at once
        (50.0, 0.05, 0.05),  # our clock is far behind: never wait more than delay
    ],
)
def test_start_delay(start_in, delay, expected):
    assert start_delay(start_in, delay) == pytest.approx(expected)


@given(st.floats(-1e6, 1e6), st.floats(0, 10))
def test_start_delay_is_bounded(start_in, delay):
    assert 0.0 <= start_delay(start_in, delay) <= delay


def test_the_longest_start_margin_grows_with_the_job():
    from rendezvous.config.timings import Timings

    timings = Timings()
    longest = timings.longest_start_margin
    assert timings.start_margin_min < longest(1) < longest(2) < longest(16) < 1.0


def test_a_coordinator_failing_authentication_is_distrusted_before_the_freeze():
    result = step(joining(), Untrusted("bad mac"), 0.0)
    assert result.action == Rejoin(distrust=A)


def test_this_node_failing_authentication_with_itself_distrusts_nobody():
    result = step(joining(ME), Untrusted("bad mac"), 0.0)
    assert result.action == Rejoin()


def test_authentication_failing_after_the_freeze_ends_the_round_like_a_lost_coordinator():
    result = step(frozen(), Untrusted("bad mac"), 0.0)
    assert isinstance(result.action, RoundEnd) and "bad mac" in result.action.reason
