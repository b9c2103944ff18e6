"""--sync-dir in the round machines: summaries with Ready and Finished, SYNCING before the
release, FINAL_SYNC before the completion, and what a member does with SyncFrom."""

from __future__ import annotations


import pytest

from rendezvous.core import member as machine
from rendezvous.core.manifest import PreviousChief, SyncSummary
from rendezvous.core.member import Member, SyncFrom
from rendezvous.core.round import (
    Action,
    Policy,
    Round,
    RoundPhase,
    check_liveness,
    finished,
    heard,
    leave,
    newer,
    ready,
    synced,
)
from rendezvous.core.record import replace
from test_core_round import A, B, C, frozen_round


def copy(digest: str, newest: int = 1, files: int = 1, previous=None) -> SyncSummary:
    return SyncSummary(digest, files, 10 * files, newest, previous)


def ready_all(state: Round, copies: dict) -> tuple[Round, Action]:
    for p in (A, B, C):
        step = ready(state, p.node_id, state.membership.digest, copies.get(p.node_id))
        state = step.state
    return state, step.action


def syncing_round(copies=None) -> Round:
    copies = copies or {A.node_id: copy("old", 1), B.node_id: copy("new", 5), C.node_id: copy("", 0, 0)}
    copies = {k: v if v.digest else copy("empty", 0, 0) for k, v in copies.items()}
    state, action = ready_all(frozen_round(), copies)
    assert (state.phase, action) == (RoundPhase.SYNCING, Action.BROADCAST_SYNC)
    return state


def test_without_summaries_the_last_ready_releases_as_before():
    state, action = ready_all(frozen_round(), {})
    assert (state.phase, action) == (RoundPhase.RELEASED, Action.RELEASE)


def test_alike_copies_release_at_once():
    same = copy("same")
    state, action = ready_all(frozen_round(), {p.node_id: same for p in (A, B, C)})
    assert (state.phase, action) == (RoundPhase.RELEASED, Action.RELEASE)
    assert state.sync == {}  # spent: the final sync compares what Finished reports


def test_differing_copies_sync_from_the_newest_first():
    state = syncing_round()
    assert (state.source, state.source_digest, state.source_reason) == (B, "new", "newest content")
    assert state.synced == frozenset()


def test_syncing_from_the_previous_chief():
    chief = PreviousChief(A.node_id, str(A.address), 1)
    copies = {A.node_id: copy("old", 1), B.node_id: copy("new", 5, previous=chief), C.node_id: copy("new", 5)}
    state = syncing_round(copies)
    assert (state.source, state.source_reason) == (A, "chief of the previous round")


def test_every_member_synced_releases():
    state = syncing_round()
    for p in (A, B):
        step = synced(state, p.node_id, "new")
        assert step.action is Action.NOTHING
        state = step.state
    step = synced(state, C.node_id, "new")
    assert (step.state.phase, step.action) == (RoundPhase.RELEASED, Action.RELEASE)


@pytest.mark.parametrize("digest, error, reason", [
    ("new", "SHA-256 mismatch", "SHA-256 mismatch"),
    ("other", "", "has copy other after the sync, expected new"),
])
def test_a_failed_sync_before_the_release_fails_the_round_not_the_job(digest, error, reason):
    state = replace(syncing_round(), policy=Policy(max_restarts=3))
    step = synced(state, C.node_id, digest, error)
    assert step.action is Action.ABORT and reason in step.state.abort_reason
    assert C.describe() in step.state.abort_reason
    assert not step.state.final


def test_synced_outside_a_sync_or_from_a_stranger_is_ignored():
    assert synced(frozen_round(), A.node_id, "x").action is Action.NOTHING
    assert synced(syncing_round(), "ffffffff", "new").action is Action.NOTHING


def test_a_member_without_sync_dir_ends_the_job():
    state, action = ready_all(frozen_round(), {A.node_id: copy("a"), B.node_id: copy("a")})
    assert action is Action.ABORT and state.final
    assert f"not on {C.describe()}" in state.abort_reason


def test_a_member_whose_copy_is_unusable_ends_the_job_with_its_reason():
    copies = {A.node_id: copy("a"), B.node_id: SyncSummary.failed("holds 30 GB"), C.node_id: copy("a")}
    state, action = ready_all(frozen_round(), copies)
    assert action is Action.ABORT and state.final
    assert state.abort_reason == f"{B.describe()}: holds 30 GB"


def test_a_member_lost_while_syncing_fails_the_round():
    step = leave(syncing_round(), C.node_id, 0.0)
    assert step.action is Action.ABORT and "left before the start" in step.state.abort_reason


def test_a_silent_member_while_syncing_fails_the_round():
    state = syncing_round()
    for p in (A, B, C):
        state = heard(state, p.node_id, 0.0)
    state = heard(state, A.node_id, 9.0)
    state = heard(state, B.node_id, 9.0)
    step = check_liveness(state, 10.0, 5.0)
    assert step.action is Action.ABORT and C.describe() in step.state.abort_reason


def test_a_newer_round_aborts_a_sync():
    assert newer(syncing_round(), 2).action is Action.ABORT


# -- after the job ------------------------------------------------------------------------------


def released(copies: dict) -> Round:
    state, action = ready_all(frozen_round(), copies)
    assert action is Action.RELEASE
    return state


def test_the_last_clean_finish_syncs_the_chiefs_copy_everywhere():
    state = released({})
    step = finished(state, A.node_id, 0, sync=copy("chief-end", 1))
    step = finished(step.state, B.node_id, 0, sync=copy("stale", 9))
    step = finished(step.state, C.node_id, 0, sync=copy("stale", 9))
    state = step.state
    assert (state.phase, step.action) == (RoundPhase.FINAL_SYNC, Action.BROADCAST_SYNC)
    assert (state.source, state.source_digest) == (A, "chief-end")  # the chief, not the newest
    for p in (A, B):
        state = synced(state, p.node_id, "chief-end").state
    step = synced(state, C.node_id, "chief-end")
    assert (step.state.phase, step.action) == (RoundPhase.COMPLETED, Action.COMPLETE)


def test_alike_copies_at_the_end_complete_at_once():
    state = released({})
    for p in (A, B, C):
        step = finished(state, p.node_id, 0, sync=copy("same"))
        state = step.state
    assert (state.phase, step.action) == (RoundPhase.COMPLETED, Action.COMPLETE)


def final_sync() -> Round:
    state = released({})
    for p, digest in ((A, "chief"), (B, "x"), (C, "x")):
        state = finished(state, p.node_id, 0, sync=copy(digest)).state
    assert state.phase is RoundPhase.FINAL_SYNC
    return state


def test_a_failed_final_sync_ends_the_job_without_running_it_again():
    state = replace(final_sync(), policy=Policy(max_restarts=5))
    step = synced(state, B.node_id, "", "disk full")
    assert step.action is Action.ABORT and step.state.final


def test_a_member_lost_in_the_final_sync_ends_the_job():
    state = synced(final_sync(), A.node_id, "chief").state
    assert leave(state, A.node_id, 0.0).action is Action.NOTHING  # it has the chief's copy
    step = leave(state, B.node_id, 0.0)
    assert step.action is Action.ABORT and step.state.final


def test_a_silent_member_in_the_final_sync_ends_the_job():
    state = final_sync()
    for p in (A, B, C):
        state = heard(state, p.node_id, 9.0 if p is not C else 0.0)
    step = check_liveness(state, 10.0, 5.0)
    assert step.action is Action.ABORT and step.state.final and C.describe() in step.state.abort_reason


# -- the member's side --------------------------------------------------------------------------


def member_frozen() -> Member:
    state = Member(A, 3.0, 30.0)
    membership = frozen_round().membership
    step = machine.step(state, machine.Frozen(membership, membership.digest), 0.0)
    assert isinstance(step.action, machine.Confirm)
    return step.state


def test_a_frozen_member_syncs_when_told():
    order = SyncFrom(B, "new", 10)
    step = machine.step(member_frozen(), order, 1.0)
    assert step.action == machine.Sync(order)
    assert step.state.phase is machine.MemberPhase.FROZEN


def test_a_final_sync_comes_only_after_this_nodes_command_succeeded():
    order = SyncFrom(A, "chief", 10, final=True)
    assert isinstance(machine.step(member_frozen(), order, 1.0).action, machine.Fail)
    state = machine.step(member_frozen(), machine.Released(0.0, 0.01), 1.0).state
    assert isinstance(machine.step(state, order, 1.0).action, machine.Wait)  # still running
    state = machine.step(state, machine.CommandExited(0), 2.0).state
    assert machine.step(state, order, 3.0).action == machine.Sync(order)


def test_a_sync_before_the_freeze_is_a_broken_protocol():
    step = machine.step(Member(A, 3.0, 30.0), SyncFrom(B, "new", 10), 0.0)
    assert isinstance(step.action, machine.Fail)
