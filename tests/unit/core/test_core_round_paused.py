"""Tests of rendezvous.core.round: a coordinator that did not run for a while (frozen,
stopped, starved of CPU) is blamed for the round, not the member that gave up on it."""

from __future__ import annotations

from rendezvous.core.round import Action, leave, resumed

from test_core_round import frozen_round, released_round


def test_a_member_that_gave_up_on_a_paused_coordinator_is_not_blamed():
    state = resumed(released_round(), 100.0, paused_for=4.8)
    step = leave(state, "bbbbbbbb", 100.01)
    assert step.action is Action.ABORT
    assert step.state.abort_reason == (
        "the coordinator did not run for 4.8 s (frozen, stopped or starved of CPU), and 10.0.0.10 "
        "(bbbbbbbb) gave up on it"
    )
    assert "its rendezvous daemon was lost" not in step.state.abort_reason


def test_before_the_start_too():
    step = leave(resumed(frozen_round(), 50.0, paused_for=3.0), "bbbbbbbb", 52.0)
    assert step.action is Action.ABORT and step.state.abort_reason.startswith("the coordinator did not run for 3.0 s")


def test_a_member_lost_long_after_the_pause_is_blamed_as_before():
    state = resumed(released_round(), 100.0, paused_for=4.8)
    step = leave(state, "bbbbbbbb", 105.0)
    assert step.state.abort_reason == "10.0.0.10 (bbbbbbbb): its rendezvous daemon was lost (stream closed)"


def test_a_resume_without_a_length_blames_the_member():
    step = leave(resumed(released_round(), 100.0), "bbbbbbbb", 100.0)
    assert "its rendezvous daemon was lost" in step.state.abort_reason
