"""Tests of rendezvous.core.admission: what a coordinator does with a Join around the
round's own decision. Above all: a Join that is refused or rejected changes nothing, and
nobody outside a running round moves it on."""

from __future__ import annotations


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core.admission import (
    MAX_ROUND,
    Header,
    Redirection,
    Refused,
    admit,
    check_header,
    check_round,
    check_source,
    not_known_yet,
    round_limit,
    route,
    start_over,
)
from rendezvous.core.peer import Peer
from rendezvous.core.record import replace
from rendezvous.core.round import Action, Policy, RejectReason, Round, RoundPhase, abort, join, ready, settle
from rendezvous.core.size import Size
from rendezvous.core.view import Target
from test_core_round import A, B, C, peer

STRANGER = peer("10.0.0.66", "66666666")
TWO = Size.fixed(2)
ELASTIC = Size(2, 3)


def gathering(*peers: Peer, expect: Size = TWO, policy: Policy = Policy(max_restarts=3), number: int = 1) -> Round:
    state = Round(job="job", expect=expect, policy=policy, number=number)
    for p in peers:
        state = join(state, p, expect, 0.0).state
    return state


def running(expect: Size = TWO, policy: Policy = Policy(max_restarts=3)) -> Round:
    state = gathering(A, B, expect=expect, policy=policy)
    if state.phase is RoundPhase.GATHERING:
        state = settle(replace(state, settle=1.0), 5.0).state
    for p in (A, B):
        state = ready(state, p.node_id, state.membership.digest).state
    assert state.phase is RoundPhase.RELEASED
    return state


# -- the header ------------------------------------------------------------------------------


def test_a_header_of_this_job_and_protocol_passes():
    assert check_header(Header(1, "job", 1), "job", 1) is None
    assert check_header(Header(1, "job", MAX_ROUND), "job", 1) is None


def test_a_header_of_another_protocol_job_or_an_absurd_round_is_refused_saying_which():
    version = check_header(Header(2, "job", 1), "job", 1)
    assert version.reason is Refused.VERSION_MISMATCH and "protocol version 2, coordinator speaks 1" == version.message
    job = check_header(Header(1, "other", 1), "job", 1)
    assert job.reason is Refused.BAD_REQUEST and job.message == "job 'other' asked a node of job 'job'"
    far = check_header(Header(1, "job", MAX_ROUND + 1), "job", 1)
    assert far.reason is Refused.BAD_REQUEST and "out of range" in far.message and str(MAX_ROUND) in far.message


@given(st.integers(0, 2**64 - 1))
def test_no_round_past_the_bound_passes_the_header(number):
    assert (check_header(Header(1, "job", number), "job", 1) is None) == (number <= MAX_ROUND)


# -- the caller's address --------------------------------------------------------------------


def test_a_peer_must_connect_from_the_address_it_claims():
    assert check_source(A, "10.0.0.9") is None
    assert check_source(A, "10.0.0.10") == "it claims address 10.0.0.9 but connects from 10.0.0.10"
    assert check_source(A, "not an address") is not None


def test_on_loopback_any_source_address_is_the_same_host():
    assert check_source(peer("127.0.0.5", "aaaaaaaa"), "127.0.0.1") is None
    assert check_source(peer("127.0.0.5", "aaaaaaaa"), "10.0.0.9") is not None


# -- where a Join goes -----------------------------------------------------------------------


def test_a_node_that_is_not_the_coordinator_sends_a_joiner_there_while_no_round_runs():
    state = gathering()
    assert route(state, B, Target(A.endpoint, A), C) == Redirection(f"{B.endpoint} is not the coordinator", A)
    assert route(abort(running(), "x").state, B, Target(A.endpoint, A), C).coordinator == A
    assert route(state, A, Target(A.endpoint, A), C) is None


def test_a_running_round_answers_its_joiners_itself_whoever_the_view_names():
    assert route(running(), A, Target(C.endpoint, C), STRANGER) is None


def test_a_joiner_of_the_other_family_goes_back_to_its_view():
    v6 = peer("fd00::7", "77777777")
    assert route(gathering(), A, Target(A.endpoint, A), v6) == Redirection("job 'job' uses IPv4 on this node, not IPv6")
    assert route(running(), A, Target(A.endpoint, A), v6).coordinator is None


def test_a_gathering_round_whose_joiners_went_elsewhere_starts_over_empty_with_its_number():
    state = gathering(A, number=3)
    fresh = start_over(state)
    assert (fresh.number, fresh.joined, fresh.phase, fresh.policy) == (3, (), RoundPhase.GATHERING, state.policy)
    assert start_over(running()) == running()


# -- which round a Join may ask for ----------------------------------------------------------


def test_a_running_round_takes_joins_for_itself_or_the_next_and_refuses_any_later():
    state = running()
    assert check_round(state, 1, 1) is None and check_round(state, 2, 1) is None
    refused = check_round(state, 3, 1)
    assert refused.reason is Refused.BAD_REQUEST and "round 3 is out of range (at most 2" in refused.message


def test_a_gathering_round_takes_one_round_past_this_nodes_own_not_past_what_peers_said():
    fresh = gathering()
    assert round_limit(fresh, 1) == 2
    assert round_limit(fresh, 4) == 5  # this node went through rounds the service never held
    renumbered = admit(fresh, A, 2, TWO, 0.0)[-1].state
    assert renumbered.number == 2 and round_limit(renumbered, 1) == 2  # no climbing one join at a time


@given(
    phase=st.sampled_from(["gathering", "running", "aborted"]),
    own=st.integers(1, 10),
    asked=st.integers(0, MAX_ROUND),
)
@settings(max_examples=200, deadline=None)
def test_the_limit_is_never_more_than_one_past_the_rounds_or_this_nodes(phase, own, asked):
    state = {"gathering": gathering(), "running": running(), "aborted": abort(running(), "x").state}[phase]
    limit = round_limit(state, own)
    assert limit <= max(state.number, own) + 1
    assert (check_round(state, asked, own) is None) == (asked <= limit)


def test_the_limit_stays_within_the_bound():
    assert round_limit(gathering(number=MAX_ROUND), MAX_ROUND) == MAX_ROUND


# -- admitting -------------------------------------------------------------------------------


def test_a_join_for_the_round_forming_joins_it():
    [step] = admit(gathering(A), B, 1, TWO, 3.0)
    assert step.action is Action.BROADCAST_FROZEN and step.state.number == 1


def test_a_restarted_node_that_knows_no_round_joins_the_one_forming():
    state = gathering(A, number=3)
    [step] = admit(state, B, 1, TWO, 3.0)
    assert step.state.number == 3 and step.state.phase is RoundPhase.FROZEN


def test_a_join_for_a_later_round_renumbers_a_gathering_round_it_joins():
    steps = admit(gathering(A), B, 2, TWO, 0.0)
    assert steps[-1].state.number == 2 and steps[-1].state.membership.round == 2


def test_after_an_abort_a_join_starts_the_next_round():
    ended = abort(running(), "x").state
    steps = admit(ended, A, 2, TWO, 0.0)
    assert [s.state.number for s in steps] == [2, 2]
    assert steps[-1].action is Action.BROADCAST_WAITING and steps[-1].state.joined == (A,)
    assert admit(ended, A, 1, TWO, 0.0)[-1].state.number == 2  # a node that knows no round


def test_a_stranger_asking_a_later_round_of_a_running_round_is_rejected_and_changes_nothing():
    """The hole: a later round number from outside used to abort the running round."""
    state = running()
    [step] = admit(state, STRANGER, state.number + 1, TWO, 9.0)
    assert step.action is Action.REJECT and step.rejection.reason is RejectReason.ALREADY_FROZEN
    assert step.state is state


def test_a_member_of_a_running_round_that_asks_for_the_next_one_aborts_it_and_joins_that():
    state = running()
    aborted, renumbered, joined = admit(state, A, 2, TWO, 9.0)
    assert aborted.action is Action.ABORT and aborted.state.abort_reason == "a member moved on to round 2"
    assert renumbered.state.number == 2 and renumbered.state.phase is RoundPhase.GATHERING
    assert joined.action is Action.BROADCAST_WAITING and joined.state.joined == (A,)


def test_a_member_identity_with_another_endpoint_is_a_stranger():
    state = running()
    [step] = admit(state, replace(A, port=7001), 2, TWO, 9.0)
    assert step.action is Action.REJECT and step.state is state


def test_a_newcomer_to_a_running_round_with_room_is_admitted_by_a_restart():
    state = running(ELASTIC)
    aborted, joined = admit(state, C, 1, ELASTIC, 9.0)
    assert aborted.action is Action.ABORT and "the next round admits it" in aborted.state.abort_reason
    assert joined.state.number == 2 and joined.state.joined == (C,)


def test_with_no_restart_left_a_newcomer_is_rejected_and_changes_nothing():
    state = running(ELASTIC, Policy(max_restarts=0))
    [step] = admit(state, C, 2, ELASTIC, 9.0)
    assert step.action is Action.REJECT and step.state is state


def test_a_rejected_join_after_an_abort_leaves_the_ended_round_as_it_was():
    ended = abort(running(), "x").state
    [step] = admit(ended, A, 2, Size.fixed(3), 0.0)
    assert step.rejection.reason is RejectReason.EXPECT_MISMATCH and step.state is ended


joins = st.tuples(
    st.sampled_from([A, B, C, STRANGER, replace(A, port=7001)]),
    st.integers(0, 5),
    st.sampled_from([TWO, ELASTIC, Size.fixed(3)]),
)


@given(phase=st.sampled_from(["gathering", "running", "elastic", "aborted"]), join_=joins)
@settings(max_examples=300, deadline=None)
def test_whatever_a_join_says_a_rejection_changes_nothing_and_only_members_abort_a_full_round(phase, join_):
    who, asked, expect = join_
    state = {
        "gathering": gathering(A), "running": running(), "elastic": running(ELASTIC),
        "aborted": abort(running(), "x").state,
    }[phase]
    steps = admit(state, who, asked, expect, 9.0)
    if steps[-1].rejection is not None:
        assert len(steps) == 1 and steps[-1].state is state
    aborts = [s for s in steps if s.action is Action.ABORT]
    if phase == "running" and aborts:
        assert who in state.membership.members and asked > state.number
    assert all(s.state.number <= max(state.number, asked, 1) + 1 for s in steps)


@pytest.mark.parametrize("asked", [0, 1])
def test_a_join_that_names_no_later_round_never_aborts_a_full_running_round(asked):
    state = running()
    for who in (A, B, C, STRANGER):
        assert all(s.action is not Action.ABORT for s in admit(state, who, asked, TWO, 9.0))


def test_a_forming_round_sends_a_later_but_bounded_round_back_to_ask_again():
    """A daemon restarted in a running job starts in round 1: its peers' Joins for the job's
    round are asked again, not refused, until it learns the round from their adverts."""
    fresh = gathering()
    back = not_known_yet(fresh, 4, own=1)
    assert isinstance(back, Redirection) and back.coordinator is None and "round 4" in back.reason
    assert not_known_yet(fresh, 2, own=1) is None, "within the limit: admitted as usual"
    assert not_known_yet(fresh, MAX_ROUND + 1, own=1) is None, "past any real round: refused"
    assert not_known_yet(running(), 5, own=1) is None, "a running round refuses it (check_round)"
    assert check_round(running(), 5, own=1) is not None
