"""Tests of rendezvous.core.round: the coordinator's state machine for one round."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rendezvous.core.peer import Peer
from rendezvous.core.round import (
    Action,
    RejectReason,
    Round,
    RoundPhase,
    Step,
    abort,
    join,
    leave,
    ready,
)
from rendezvous.core.size import Size
from rendezvous.core.tf_config import Membership, build_tf_config

ip = ipaddress.ip_address


def peer(address: str, node_id: str, port: int = 7000, tf_port: int = 9000) -> Peer:
    return Peer(node_id=node_id, address=ip(address), port=port, tf_port=tf_port)


A = peer("10.0.0.9", "aaaaaaaa")
B = peer("10.0.0.10", "bbbbbbbb")
C = peer("10.0.0.100", "cccccccc")
D = peer("10.0.0.2", "dddddddd")


def gather(state: Round, *peers: Peer) -> Round:
    for p in peers:
        step = join(state, p, state.expect, 0.0)
        assert step.action in (Action.BROADCAST_WAITING, Action.BROADCAST_FROZEN), step
        state = step.state
    return state


def frozen_round(expect: int = 3) -> Round:
    state = gather(Round(job="job", expect=Size.fixed(expect)), *[C, A, B][:expect])
    assert state.phase is RoundPhase.FROZEN
    return state


def released_round() -> Round:
    state = frozen_round()
    digest = state.membership.digest
    for p in (A, B, C):
        state = ready(state, p.node_id, digest).state
    assert state.phase is RoundPhase.RELEASED
    return state


def aborted_round() -> Round:
    state = abort(frozen_round(), "test").state
    assert state.phase is RoundPhase.ABORTED
    return state


# --------------------------------------------------------------------------
# Round itself
# --------------------------------------------------------------------------


def test_new_round_defaults():
    r = Round(job="job", expect=Size.fixed(3))
    assert r.number == 1
    assert r.phase is RoundPhase.GATHERING
    assert r.joined == ()
    assert r.membership is None
    assert r.ready == frozenset()
    assert r.abort_reason is None


@pytest.mark.parametrize("low, high", [(0, 3), (-1, 3), (3, 2), (1, 4097)])
def test_sizes_must_be_in_range(low, high):
    with pytest.raises(ValueError, match=f"{low}:{high}"):
        Size(low, high)


@pytest.mark.parametrize("number", [0, -3])
def test_round_numbers_start_at_one(number):
    with pytest.raises(ValueError, match=str(number)):
        Round(job="job", expect=Size.fixed(1), number=number)


def test_round_is_frozen():
    with pytest.raises(FrozenError):
        Round(job="job", expect=Size.fixed(1)).number = 2  # type: ignore[misc]


@pytest.mark.parametrize("make", [lambda: Round(job="job", expect=Size.fixed(3)), frozen_round, released_round, aborted_round])
def test_next_increments_the_round_and_starts_over(make):
    state = make()
    nxt = state.next()
    assert nxt.number == state.number + 1
    assert (nxt.job, nxt.expect) == ("job", Size.fixed(3))
    assert nxt.phase is RoundPhase.GATHERING
    assert nxt.joined == () and nxt.membership is None and nxt.ready == frozenset()
    assert nxt.abort_reason is None
    assert nxt.next().number == state.number + 2


def test_next_round_freezes_a_membership_with_the_new_number_and_digest():
    first = frozen_round()
    second = gather(first.next(), A, B, C)
    assert second.membership.round == 2
    assert second.membership.members == first.membership.members
    assert second.membership.digest != first.membership.digest


def test_is_joined():
    state = gather(Round(job="job", expect=Size.fixed(3)), A)
    assert state.is_joined("aaaaaaaa")
    assert not state.is_joined("bbbbbbbb")


# --------------------------------------------------------------------------
# join
# --------------------------------------------------------------------------


def test_joins_below_expect_broadcast_waiting():
    state = Round(job="job", expect=Size.fixed(3))
    step = join(state, B, Size.fixed(3), 0.0)
    assert step.action is Action.BROADCAST_WAITING
    assert step.rejection is None
    assert step.state.joined == (B,)
    assert step.state.phase is RoundPhase.GATHERING
    assert state.joined == ()  # the old state is untouched
    step = join(step.state, A, Size.fixed(3), 0.0)
    assert step.action is Action.BROADCAST_WAITING
    assert step.state.joined == (A, B)  # kept sorted numerically


def test_freezes_after_exactly_expect_joins():
    state = Round(job="job", expect=Size.fixed(3))
    actions = []
    for p in (C, A, B):
        step = join(state, p, Size.fixed(3), 0.0)
        actions.append(step.action)
        state = step.state
    assert actions == [Action.BROADCAST_WAITING, Action.BROADCAST_WAITING, Action.BROADCAST_FROZEN]
    assert state.phase is RoundPhase.FROZEN
    assert state.membership == Membership(job="job", round=1, members=(A, B, C))
    assert state.joined == (A, B, C)


def test_expect_one_freezes_on_the_first_join():
    step = join(Round(job="solo", expect=Size.fixed(1)), A, Size.fixed(1), 0.0)
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.membership.members == (A,)


def test_rejoin_of_the_same_peer_is_idempotent():
    state = gather(Round(job="job", expect=Size.fixed(3)), A, B)
    step = join(state, A, Size.fixed(3), 0.0)
    assert step.action is Action.BROADCAST_WAITING
    assert step.rejection is None
    assert step.state.joined == (A, B)
    assert step.state.phase is RoundPhase.GATHERING
    # and it still freezes at exactly expect distinct peers
    step = join(step.state, C, Size.fixed(3), 0.0)
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.membership.members == (A, B, C)


def test_rejoin_does_not_count_twice_towards_expect():
    state = gather(Round(job="job", expect=Size.fixed(2)), A)
    for _ in range(3):
        step = join(state, A, Size.fixed(2), 0.0)
        assert step.action is Action.BROADCAST_WAITING
        state = step.state
    assert state.joined == (A,)


@pytest.mark.parametrize(
    "twin",
    [
        peer("10.0.0.50", "aaaaaaaa"),  # other address
        peer("10.0.0.9", "aaaaaaaa", port=7001),  # other port
        peer("10.0.0.9", "aaaaaaaa", tf_port=9001),  # other TF port
    ],
)
def test_duplicate_node_id_from_another_endpoint_is_rejected(twin):
    state = gather(Round(job="job", expect=Size.fixed(3)), A, B)
    step = join(state, twin, Size.fixed(3), 0.0)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.DUPLICATE_NODE
    assert "aaaaaaaa" in step.rejection.message
    assert A.endpoint in step.rejection.message
    assert twin.endpoint in step.rejection.message
    assert step.state == state


def test_endpoint_clash_is_rejected():
    state = gather(Round(job="job", expect=Size.fixed(3)), A, B)
    clash = peer("10.0.0.9", "eeeeeeee", port=A.port, tf_port=9999)
    step = join(state, clash, Size.fixed(3), 0.0)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.ENDPOINT_CLASH
    assert "eeeeeeee" in step.rejection.message and "aaaaaaaa" in step.rejection.message
    assert step.state == state


def test_same_address_other_port_is_not_a_clash():
    state = gather(Round(job="job", expect=Size.fixed(3)), A)
    neighbour = peer("10.0.0.9", "eeeeeeee", port=A.port + 1, tf_port=9001)
    step = join(state, neighbour, Size.fixed(3), 0.0)
    assert step.action is Action.BROADCAST_WAITING
    assert step.state.joined == (A, neighbour)


@pytest.mark.parametrize("theirs", [2, 4, 1, 4096])
def test_expect_mismatch_is_rejected_with_both_values(theirs):
    state = gather(Round(job="job", expect=Size.fixed(3)), A)
    step = join(state, B, Size.fixed(theirs), 0.0)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.EXPECT_MISMATCH
    assert f"--expect {theirs}" in step.rejection.message
    assert "--expect 3" in step.rejection.message
    assert "'job'" in step.rejection.message
    assert B.describe() in step.rejection.message
    assert step.state == state


def test_expect_mismatch_is_rejected_after_the_freeze_too():
    state = frozen_round()
    step = join(state, D, Size.fixed(5), 0.0)
    assert step.rejection.reason is RejectReason.EXPECT_MISMATCH


def test_late_join_after_freeze_is_rejected_naming_the_members():
    state = frozen_round()
    step = join(state, D, Size.fixed(3), 0.0)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.ALREADY_FROZEN
    message = step.rejection.message
    assert "10.0.0.9 (aaaaaaaa), 10.0.0.10 (bbbbbbbb), 10.0.0.100 (cccccccc)" in message
    assert "3 of 3" in message
    assert "frozen" in message
    assert D.describe() in message
    assert "--job" in message
    assert step.state == state


@pytest.mark.parametrize("make, word", [(released_round, "released"), (aborted_round, "aborted")])
def test_join_after_release_or_abort_is_rejected(make, word):
    state = make()
    step = join(state, D, Size.fixed(3), 0.0)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.ALREADY_FROZEN
    assert word in step.rejection.message
    assert step.state == state


# --------------------------------------------------------------------------
# leave
# --------------------------------------------------------------------------


def test_leave_before_freeze():
    state = gather(Round(job="job", expect=Size.fixed(3)), A, B)
    step = leave(state, "aaaaaaaa", 0.0)
    assert step.action is Action.BROADCAST_WAITING
    assert step.state.joined == (B,)
    assert step.state.phase is RoundPhase.GATHERING


def test_leave_then_another_peer_completes_the_round():
    state = gather(Round(job="job", expect=Size.fixed(3)), A, B)
    state = leave(state, "aaaaaaaa", 0.0).state
    state = gather(state, C)
    assert state.phase is RoundPhase.GATHERING
    step = join(state, D, Size.fixed(3), 0.0)
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.membership.members == (D, B, C)


def test_leave_of_an_unknown_node_does_nothing():
    state = gather(Round(job="job", expect=Size.fixed(3)), A)
    step = leave(state, "eeeeeeee", 0.0)
    assert step == Step(state, Action.NOTHING)


def test_leave_after_freeze_aborts_naming_the_member():
    state = frozen_round()
    step = leave(state, "bbbbbbbb", 0.0)
    assert step.action is Action.ABORT
    assert step.state.phase is RoundPhase.ABORTED
    assert "10.0.0.10 (bbbbbbbb)" in step.state.abort_reason


def test_leave_after_freeze_by_a_stranger_does_nothing():
    state = frozen_round()
    assert leave(state, "eeeeeeee", 0.0) == Step(state, Action.NOTHING)


def test_leave_after_an_abort_does_nothing():
    state = aborted_round()
    assert leave(state, "aaaaaaaa", 0.0) == Step(state, Action.NOTHING)


# --------------------------------------------------------------------------
# ready
# --------------------------------------------------------------------------


def test_release_only_after_all_members_are_ready():
    state = frozen_round()
    digest = state.membership.digest
    step = ready(state, "bbbbbbbb", digest)
    assert step.action is Action.NOTHING and step.state.phase is RoundPhase.FROZEN
    assert step.state.ready == {"bbbbbbbb"}
    step = ready(step.state, "bbbbbbbb", digest)  # a repeated Ready counts once
    assert step.action is Action.NOTHING and step.state.ready == {"bbbbbbbb"}
    step = ready(step.state, "cccccccc", digest)
    assert step.action is Action.NOTHING and step.state.phase is RoundPhase.FROZEN
    step = ready(step.state, "aaaaaaaa", digest)
    assert step.action is Action.RELEASE
    assert step.state.phase is RoundPhase.RELEASED
    assert step.state.ready == {"aaaaaaaa", "bbbbbbbb", "cccccccc"}


def test_ready_with_a_wrong_digest_aborts():
    state = frozen_round()
    good = state.membership.digest
    bad = "0" * 64
    step = ready(ready(state, "aaaaaaaa", good).state, "bbbbbbbb", bad)
    assert step.action is Action.ABORT
    assert step.state.phase is RoundPhase.ABORTED
    assert "bbbbbbbb" in step.state.abort_reason
    assert good[:12] in step.state.abort_reason
    assert bad[:12] in step.state.abort_reason


def test_ready_from_a_stranger_is_rejected():
    state = frozen_round()
    step = ready(state, "eeeeeeee", state.membership.digest)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.NOT_A_MEMBER
    assert "eeeeeeee" in step.rejection.message
    assert step.state == state


def test_ready_before_freeze_does_nothing():
    state = gather(Round(job="job", expect=Size.fixed(3)), A)
    assert ready(state, "aaaaaaaa", "x") == Step(state, Action.NOTHING)


@pytest.mark.parametrize("make", [released_round, aborted_round])
def test_ready_after_release_or_abort_does_nothing(make):
    state = make()
    assert ready(state, "aaaaaaaa", "0" * 64) == Step(state, Action.NOTHING)


# --------------------------------------------------------------------------
# abort
# --------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: Round(job="job", expect=Size.fixed(3)), frozen_round])
def test_abort_gathering_or_frozen(make):
    step = abort(make(), "operator said so")
    assert step.action is Action.ABORT
    assert step.state.phase is RoundPhase.ABORTED
    assert step.state.abort_reason == "operator said so"


def test_abort_after_an_abort_does_nothing():
    state = aborted_round()
    assert abort(state, "again") == Step(state, Action.NOTHING)


def test_abort_keeps_the_first_reason():
    state = aborted_round()
    assert abort(state, "second").state.abort_reason == "test"


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------

node_ids = st.from_regex(r"[0-9a-f]{8,32}", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)
peers = st.builds(
    Peer, node_id=node_ids, address=st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)), port=ports, tf_port=ports
)
v4_peers = st.builds(Peer, node_id=node_ids, address=st.ip_addresses(v=4), port=ports, tf_port=ports)


def distinct(strategy: st.SearchStrategy[Peer]) -> st.SearchStrategy[list[Peer]]:
    return st.lists(
        strategy,
        min_size=1,
        max_size=10,
        # join() refuses a peer that shares its address and either port with another
        unique_by=(lambda p: p.node_id, lambda p: (p.address, p.port), lambda p: (p.address, p.tf_port)),
    )


def run_joins(ps: list[Peer]) -> Round:
    state = Round(job="prop", expect=Size.fixed(len(ps)))
    for i, p in enumerate(ps):
        step = join(state, p, Size.fixed(len(ps)), 0.0)
        expected = Action.BROADCAST_FROZEN if i == len(ps) - 1 else Action.BROADCAST_WAITING
        assert step.action is expected
        state = step.state
    return state


@settings(deadline=None)
@given(distinct(peers), st.permutations(range(10)))
def test_any_join_order_freezes_the_same_sorted_membership(ps, perm):
    order = [ps[i] for i in perm if i < len(ps)]
    frozen_a = run_joins(ps)
    frozen_b = run_joins(order)
    assert frozen_a.membership == frozen_b.membership
    assert list(frozen_a.membership.members) == sorted(ps)
    assert frozen_a.membership.digest == frozen_b.membership.digest


@settings(deadline=None)
@given(distinct(v4_peers))
@example([C, B, A])
@example([peer("10.0.0.10", "0000000a"), peer("9.255.255.255", "0000000b")])
@example([peer("192.168.1.10", "0000000a"), peer("192.168.1.2", "0000000b")])
def test_worker_zero_is_the_numerically_lowest_address(ps):
    membership = run_joins(ps).membership
    lowest = min(int(p.address) for p in ps)
    assert int(membership.members[0].address) == lowest
    assert build_tf_config(membership, 0)["cluster"]["worker"][0] == membership.members[0].tf_endpoint
    assert membership.coordinator == membership.members[0]


@settings(deadline=None)
@given(distinct(peers))
def test_worker_zero_prefers_ipv4(ps):
    membership = run_joins(ps).membership
    first = membership.members[0]
    if any(p.address.version == 4 for p in ps):
        assert first.address.version == 4
    assert int(first.address) == min(int(p.address) for p in ps if p.address.version == first.address.version)


@settings(deadline=None)
@given(distinct(peers))
def test_every_rank_gets_an_identical_worker_list(ps):
    membership = run_joins(ps).membership
    lists = {tuple(build_tf_config(membership, r)["cluster"]["worker"]) for r in range(len(ps))}
    assert len(lists) == 1
    for p in ps:
        rank = membership.rank_of(p.node_id)
        assert build_tf_config(membership, rank)["cluster"]["worker"][rank] == p.tf_endpoint


@settings(deadline=None)
@given(distinct(peers), st.randoms())
def test_release_happens_exactly_on_the_last_ready_in_any_order(ps, rnd):
    state = run_joins(ps)
    digest = state.membership.digest
    order = [p.node_id for p in ps]
    rnd.shuffle(order)
    for i, node_id in enumerate(order):
        step = ready(state, node_id, digest)
        assert step.action is (Action.RELEASE if i == len(order) - 1 else Action.NOTHING)
        state = step.state
    assert state.phase is RoundPhase.RELEASED


@settings(deadline=None)
@given(distinct(peers), st.data())
def test_joins_with_leaves_before_the_freeze_still_freeze_the_sorted_remaining(ps, data):
    # Everyone but the last joins; some leave again and rejoin; then the last one joins.
    state = Round(job="prop", expect=Size.fixed(len(ps)))
    for p in ps[:-1]:
        state = join(state, p, Size.fixed(len(ps)), 0.0).state
    leavers = data.draw(st.lists(st.sampled_from(ps[:-1]), unique=True) if len(ps) > 1 else st.just([]))
    for p in leavers:
        state = leave(state, p.node_id, 0.0).state
    assert len(state.joined) == len(ps) - 1 - len(leavers)
    for p in leavers:
        state = join(state, p, Size.fixed(len(ps)), 0.0).state
    step = join(state, ps[-1], Size.fixed(len(ps)), 0.0)
    assert step.action is Action.BROADCAST_FROZEN
    assert list(step.state.membership.members) == sorted(ps)


# --------------------------------------------------------------------------
# after the release: liveness, exit codes, completion, restarts
# --------------------------------------------------------------------------

from rendezvous.core.round import ROUND_FAILED, Policy, check_liveness, finished, heard, newer, paused, resumed  # noqa: E402


def released_with(policy: Policy) -> Round:
    return replace_policy(released_round(), policy)


def replace_policy(state: Round, policy: Policy) -> Round:
    return replace(state, policy=policy)


def test_a_member_lost_after_the_release_aborts_naming_it():
    step = leave(released_round(), "bbbbbbbb", 0.0)
    assert step.action is Action.ABORT
    assert step.state.abort_reason == "10.0.0.10 (bbbbbbbb): its rendezvous daemon was lost (stream closed)"
    assert step.state.exit_code == ROUND_FAILED and step.state.final is True  # no restarts by default


def test_a_command_that_fails_aborts_with_its_exit_code():
    step = finished(released_with(Policy(max_restarts=3)), "cccccccc", 1)
    assert step.action is Action.ABORT
    assert step.state.abort_reason == "10.0.0.100 (cccccccc): command exited with code 1"
    assert (step.state.exit_code, step.state.final) == (1, False)


@pytest.mark.parametrize("code", [2, 126, 127])
def test_exit_codes_a_restart_cannot_fix_end_the_job(code):
    step = finished(released_with(Policy(max_restarts=3)), "aaaaaaaa", code)
    assert (step.state.exit_code, step.state.final) == (code, True)


def test_restarts_run_out():
    policy = Policy(max_restarts=2)
    assert not policy.is_final(2, 1) and policy.is_final(3, 1)


def test_a_stopped_command_counts_as_failed_with_its_reason():
    step = finished(released_with(Policy(max_restarts=3)), "aaaaaaaa", ROUND_FAILED, "command stopped (SIGSTOP) for 5.1 s")
    assert step.state.abort_reason == "10.0.0.9 (aaaaaaaa): command stopped (SIGSTOP) for 5.1 s"


def test_exit_0_aborts_nobody_and_the_last_one_completes_the_job():
    state = released_round()
    for p in (A, B):
        step = finished(state, p.node_id, 0)
        assert step.action is Action.NOTHING
        state = step.state
    assert leave(state, "aaaaaaaa", 0.0).action is Action.NOTHING, "a member that succeeded may leave"
    step = finished(state, C.node_id, 0)
    assert step.action is Action.COMPLETE and step.state.phase is RoundPhase.COMPLETED


def test_finished_before_the_release_or_from_a_stranger_does_nothing():
    assert finished(frozen_round(), "aaaaaaaa", 1).action is Action.NOTHING
    assert finished(released_round(), "dddddddd", 1).action is Action.NOTHING


def test_a_silent_member_aborts_the_round_after_the_timeout():
    state = released_round()
    for p in (A, B, C):
        state = heard(state, p.node_id, 100.0)
    state = heard(heard(state, "aaaaaaaa", 104.0), "cccccccc", 104.0)
    assert check_liveness(state, 105.0, 5.0).action is Action.NOTHING
    step = check_liveness(state, 105.5, 5.0)
    assert step.action is Action.ABORT
    assert step.state.abort_reason == "10.0.0.10 (bbbbbbbb): not heard from for 5.5 s (frozen or cut off)"


def test_liveness_spares_the_coordinators_own_member():
    state = released_round()
    for p in (A, B, C):
        state = heard(state, p.node_id, 100.0)
    assert check_liveness(state, 106.0, 5.0, coordinator=A.node_id).action is Action.ABORT
    state = heard(heard(state, "bbbbbbbb", 104.0), "cccccccc", 104.0)
    assert check_liveness(state, 106.0, 5.0, coordinator=A.node_id).action is Action.NOTHING
    assert check_liveness(state, 106.0, 5.0).action is Action.ABORT


def test_a_coordinator_that_woke_late_was_paused_itself():
    assert not paused(deadline=10.0, now=10.9, allowance=1.0)
    assert not paused(deadline=10.0, now=11.0, allowance=1.0)
    assert paused(deadline=10.0, now=11.01, allowance=1.0)


def test_after_a_pause_every_member_counts_as_heard_and_the_silent_one_gets_a_full_timeout():
    state = released_round()
    for p in (A, B, C):
        state = heard(state, p.node_id, 100.0)
    state = heard(state, "aaaaaaaa", 107.0)  # a later time stays as it is
    assert check_liveness(state, 108.0, 5.0).action is Action.ABORT  # what it would say unpaused
    state = resumed(state, 108.0)
    assert state.heard == {"aaaaaaaa": 108.0, "bbbbbbbb": 108.0, "cccccccc": 108.0}
    assert check_liveness(state, 113.0, 5.0).action is Action.NOTHING
    state = heard(heard(state, "aaaaaaaa", 112.0), "cccccccc", 112.0)
    step = check_liveness(state, 113.5, 5.0)
    assert step.action is Action.ABORT and "10.0.0.10 (bbbbbbbb): not heard from for 5.5 s" in step.state.abort_reason


def test_every_member_counts_as_heard_at_the_freeze_as_waiting_peers_send_no_heartbeats():
    state = gather(Round(job="job", expect=Size.fixed(2)), A)
    assert state.heard == {}
    frozen = join(state, B, state.expect, 42.0).state
    assert frozen.heard == {"aaaaaaaa": 42.0, "bbbbbbbb": 42.0}
    assert check_liveness(frozen, 46.0, 5.0).action is Action.NOTHING
    assert check_liveness(frozen, 47.5, 5.0).action is Action.ABORT


def test_only_a_frozen_round_that_has_not_ended_is_running():
    assert not Round(job="job", expect=Size.fixed(3)).running
    assert frozen_round().running and released_round().running
    assert not abort(released_round(), "x").state.running


def test_liveness_spares_gathering_rounds_and_members_that_succeeded():
    gathering = heard(gather(Round(job="job", expect=Size.fixed(3)), A), "aaaaaaaa", 0.0)
    assert check_liveness(gathering, 100.0, 5.0).action is Action.NOTHING
    state = finished(released_round(), "aaaaaaaa", 0).state  # all heard at the freeze, at 0.0
    state = heard(heard(state, "bbbbbbbb", 99.0), "cccccccc", 99.0)
    assert check_liveness(state, 100.0, 5.0).action is Action.NOTHING


def test_a_newer_round_number_renumbers_a_gathering_round_and_keeps_its_peers():
    state = gather(Round(job="job", expect=Size.fixed(3)), A)
    step = newer(state, 4)
    assert (step.state.number, step.state.joined, step.action) == (4, (A,), Action.NOTHING)
    assert newer(state, 1).state is state


def test_a_newer_round_number_aborts_a_running_round():
    step = newer(released_with(Policy(max_restarts=3)), 2)
    assert step.action is Action.ABORT and "moved on to round 2" in step.state.abort_reason


def test_after_an_abort_any_join_starts_the_next_round_keeping_the_policy():
    policy = Policy(max_restarts=5)
    state = replace_policy(aborted_round(), policy)
    step = newer(state, 1)  # a restarted node knows no round: it joins the one forming
    assert (step.state.number, step.state.phase, step.state.policy) == (2, RoundPhase.GATHERING, policy)
    assert newer(state, 7).state.number == 7


# -- preflight ---------------------------------------------------------------------------

from rendezvous.core.preflight import Fingerprint, Mismatch  # noqa: E402
from rendezvous.core.round import check_preflight  # noqa: E402

EIGHT = Fingerprint("3.11.9", "2.21.0", ("H100",) * 8)
FOUR = Fingerprint("3.11.9", "2.21.0", ("H100",) * 4)
OLDER_PYTHON = Fingerprint("3.11.4", "2.21.0", ("H100",) * 8)


def gather_with(state: Round, *joins: tuple[Peer, Fingerprint]) -> Step:
    step = Step(state, Action.NOTHING)
    for p, fingerprint in joins:
        step = join(step.state, p, step.state.expect, 0.0, fingerprint)
    return step


def test_members_with_the_same_fingerprint_freeze_without_warnings():
    step = gather_with(Round(job="job", expect=Size.fixed(3)), (A, EIGHT), (B, EIGHT), (C, EIGHT))
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.warnings == () and not step.state.refused


def test_a_gpu_count_that_differs_refuses_the_round_for_good_before_any_command():
    policy = Policy(max_restarts=3)
    step = gather_with(Round(job="job", expect=Size.fixed(3), policy=policy), (C, FOUR), (A, EIGHT), (B, EIGHT))
    assert step.action is Action.ABORT
    assert step.state.abort_reason == "preflight: 10.0.0.100 has 4 GPUs, the others 8"
    assert (step.state.exit_code, step.state.final, step.state.refused) == (4, True, True)
    assert step.state.ready == frozenset()


def test_an_allowed_difference_freezes_with_a_warning_for_every_member():
    policy = Policy(allow_mismatch=frozenset({Mismatch.PYTHON}))
    step = gather_with(Round(job="job", expect=Size.fixed(3), policy=policy), (A, EIGHT), (B, OLDER_PYTHON), (C, EIGHT))
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.warnings == (
        "preflight: 10.0.0.10 has Python 3.11.4, the others 3.11.9 (allowed by --allow-mismatch python)",
    )


def test_the_allowed_kinds_survive_the_next_round():
    policy = Policy(allow_mismatch=frozenset({Mismatch.PYTHON}))
    assert Round(job="job", expect=Size.fixed(1), policy=policy).next().policy.allow_mismatch == {Mismatch.PYTHON}


def test_peers_that_sent_no_fingerprint_are_left_out_of_the_comparison():
    step = gather_with(Round(job="job", expect=Size.fixed(3)), (A, EIGHT), (B, None), (C, EIGHT))
    assert step.action is Action.BROADCAST_FROZEN


def test_a_peer_that_left_before_the_freeze_is_not_compared():
    state = gather_with(Round(job="job", expect=Size.fixed(2)), (A, FOUR)).state
    state = leave(state, A.node_id, 0.0).state
    step = gather_with(state, (B, EIGHT), (C, EIGHT))
    assert step.action is Action.BROADCAST_FROZEN


def test_check_preflight_of_a_frozen_round_without_fingerprints_freezes():
    assert check_preflight(frozen_round()).action is Action.BROADCAST_FROZEN


# --------------------------------------------------------------------------
# Elastic size: --expect MIN:MAX and the settle time
# --------------------------------------------------------------------------

from rendezvous.core.round import settle  # noqa: E402
from rendezvous.core.record import FrozenError, replace

ELASTIC = Size(2, 3)


def elastic_round(*peers: Peer, at: float = 0.0, settle_for: float = 3.0, policy: Policy = Policy(max_restarts=3)) -> Round:
    state = Round(job="job", expect=ELASTIC, settle=settle_for, policy=policy)
    for p in peers:
        state = join(state, p, ELASTIC, at).state
    return state


def test_an_elastic_round_freezes_at_once_with_max_peers():
    state = elastic_round(A, B)
    step = join(state, C, ELASTIC, 0.5)
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.membership.members == (A, B, C)


def test_an_elastic_round_with_min_peers_freezes_once_nobody_came_for_the_settle_time():
    state = elastic_round(A, B, at=10.0)
    assert state.phase is RoundPhase.GATHERING
    assert settle(state, 12.9) == Step(state, Action.NOTHING)
    step = settle(state, 13.0)
    assert step.action is Action.BROADCAST_FROZEN
    assert step.state.membership.members == (A, B)


def test_below_min_the_settle_time_freezes_nothing():
    state = elastic_round(A, at=0.0)
    assert settle(state, 100.0).action is Action.NOTHING


@pytest.mark.parametrize("change", ["join", "leave"])
def test_every_arrival_or_departure_starts_the_settle_time_again(change):
    size = Size(2, 4)
    state = Round(job="job", expect=size, settle=3.0)
    for p in (A, B):
        state = join(state, p, size, 0.0).state
    if change == "join":
        state = join(state, B, size, 2.0).state  # B again, on a new stream
    else:
        state = join(state, D, size, 1.0).state
        state = leave(state, D.node_id, 2.0).state
    assert settle(state, 4.9).action is Action.NOTHING
    assert settle(state, 5.0).action is Action.BROADCAST_FROZEN


def test_a_fixed_size_never_freezes_on_the_settle_time():
    state = gather(Round(job="job", expect=Size.fixed(3), settle=0.0), A, B)
    assert settle(state, 1e9).action is Action.NOTHING


def test_settle_does_nothing_once_frozen():
    state = settle(elastic_round(A, B), 5.0).state
    assert settle(state, 50.0) == Step(state, Action.NOTHING)


def running_elastic(policy: Policy = Policy(max_restarts=3)) -> Round:
    state = settle(elastic_round(A, B, policy=policy), 5.0).state
    for p in (A, B):
        state = ready(state, p.node_id, state.membership.digest).state
    assert state.phase is RoundPhase.RELEASED
    return state


@pytest.mark.parametrize("make", [lambda p: settle(elastic_round(A, B, policy=p), 5.0).state, running_elastic])
def test_a_peer_that_comes_while_fewer_than_max_run_is_admitted_by_a_restart(make):
    state = make(Policy(max_restarts=3))
    step = join(state, C, ELASTIC, 9.0)
    assert step.action is Action.ABORT
    assert step.state.phase is RoundPhase.ABORTED and not step.state.final
    assert C.describe() in step.state.abort_reason
    assert "2 of 2 to 3 peers" in step.state.abort_reason
    assert "next round admits it" in step.state.abort_reason
    nxt = newer(step.state, 2).state
    assert (nxt.number, nxt.phase) == (2, RoundPhase.GATHERING)
    assert join(nxt, C, ELASTIC, 9.0).state.joined == (C,)


def test_with_no_restart_left_a_new_peer_is_refused_not_admitted():
    state = running_elastic(Policy(max_restarts=0))
    step = join(state, C, ELASTIC, 9.0)
    assert step.action is Action.REJECT
    assert step.rejection.reason is RejectReason.ALREADY_FROZEN
    assert f"no restart is left to admit {C.describe()}" in step.rejection.message
    assert step.state == state


def test_a_full_round_refuses_a_new_peer_whatever_the_restarts():
    state = released_round()
    state = replace(state, expect=Size(2, 3), policy=Policy(max_restarts=5))
    step = join(state, D, Size(2, 3), 9.0)
    assert step.action is Action.REJECT
    assert f"{D.describe()} is not a member" in step.rejection.message


def test_a_member_joining_again_does_not_restart_the_round():
    state = running_elastic()
    assert join(state, A, ELASTIC, 9.0).action is Action.REJECT


def test_an_elastic_size_must_match_exactly():
    state = elastic_round(A)
    step = join(state, B, Size.fixed(3), 0.0)
    assert step.rejection.reason is RejectReason.EXPECT_MISMATCH
    assert "--expect 3" in step.rejection.message and "--expect 2:3" in step.rejection.message


def test_the_next_round_keeps_size_and_settle_time():
    nxt = elastic_round(A, settle_for=7.5).next()
    assert (nxt.expect, nxt.settle, nxt.joined) == (ELASTIC, 7.5, ())


def test_a_lost_member_that_shares_its_address_hints_at_two_hosts_with_one_address():
    twin = peer("10.0.0.10", "ffffffff", port=7001, tf_port=9001)
    state = gather(Round(job="job", expect=Size.fixed(3)), A, B, twin)
    reason = leave(state, B.node_id, 0.0).state.abort_reason
    assert "10.0.0.10 is the address of more than one member" in reason
    assert "two hosts are configured with the same address" in reason
    assert "more than one member" not in leave(state, A.node_id, 0.0).state.abort_reason


# -- the start margin -------------------------------------------------------------------------

from rendezvous.core.round import start_margin  # noqa: E402


def test_the_freeze_notes_when_the_frozen_list_went_out():
    state = gather(Round(job="job", expect=Size.fixed(2)), A)
    assert join(state, B, state.expect, 42.0).state.frozen_at == 42.0
    assert settle(elastic_round(A, B, at=10.0), 13.5).state.frozen_at == 13.5
    assert frozen_round().next().frozen_at == 0.0


def test_the_start_margin_is_the_round_trip_of_the_frozen_list():
    state = replace(released_round(), frozen_at=100.0)
    assert start_margin(state, 100.012, 0.005, 0.036) == pytest.approx(0.012)


def test_the_start_margin_has_a_floor_for_a_fast_trip_and_a_ceiling_for_a_slow_one():
    state = replace(released_round(), frozen_at=100.0)
    assert start_margin(state, 100.001, 0.005, 0.036) == 0.005
    assert start_margin(state, 105.0, 0.005, 0.036) == 0.036  # a --sync-dir copy came in between


@given(st.floats(0, 1e6), st.floats(0, 100), st.floats(0, 1), st.floats(0, 1))
def test_the_start_margin_stays_within_its_bounds(frozen_at, trip, least, most):
    state = replace(released_round(), frozen_at=frozen_at)
    margin = start_margin(state, frozen_at + trip, least, most)
    assert margin <= most and (margin >= least or least > most)
