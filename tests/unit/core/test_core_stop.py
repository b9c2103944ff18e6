"""`rendezvous stop` in the pure core: the coordinator's round ends final with the stop's
exit code in any phase but a completed one; a member takes it as the job's end, never as a
failure to restart from; who asked is cut short and made printable for log lines."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core import member as members
from rendezvous.core.member import Aborted, RoundEnd, is_last_round, step
from rendezvous.core.round import Action, Policy, Round, RoundPhase, finished as command_finished, stop
from rendezvous.core.size import Size
from rendezvous.core.stopping import MAX_WORDS, STOPPED, StopOrder, check_grace
from rendezvous.errors import JobStopped

from test_core_member import finished, frozen, joining, released
from test_core_round import aborted_round, frozen_round, gather, released_round, A, B, C

ORDER = StopOrder("10.0.0.4", "alice", "maintenance")


def test_the_exit_status_is_the_errors_own():
    assert STOPPED == JobStopped.exit_code == 8


@pytest.mark.parametrize("make", [
    lambda: gather(Round(job="job", expect=Size.fixed(3)), A, B),  # still forming
    frozen_round, released_round,
    aborted_round,  # between two rounds: the members come back to learn of it
], ids=["gathering", "frozen", "released", "aborted"])
def test_a_stop_ends_the_round_final_with_its_own_code_whatever_the_policy(make):
    state = make()
    result = stop(state, ORDER)
    assert result.action is Action.ABORT
    ended = result.state
    assert ended.phase is RoundPhase.ABORTED and ended.final and ended.exit_code == STOPPED
    assert ended.stop == ORDER and ended.abort_reason == "stopped by 10.0.0.4 (user alice): maintenance"
    assert Policy(max_restarts=100, no_restart_on=frozenset()).is_final(1, STOPPED) is False  # final by the stop alone


def test_a_completed_round_is_not_stopped():
    state = released_round()
    for p in (A, B, C):
        state = command_finished(state, p.node_id, 0).state
    assert state.phase is RoundPhase.COMPLETED
    assert stop(state, ORDER).action is Action.NOTHING


@pytest.mark.parametrize("make", [joining, frozen, released, lambda: finished(1)],
                         ids=["joining", "frozen", "released", "finished"])
def test_a_member_ends_the_job_on_a_stop_in_any_phase_with_no_restart(make):
    result = step(make(), Aborted("stopped by ...", STOPPED, final=True, stop=ORDER), 0.0)
    assert result.state.phase is members.MemberPhase.ENDED
    end = result.action
    assert isinstance(end, RoundEnd) and end.stop == ORDER and end.exit_code == STOPPED and end.final
    assert "stopped by 10.0.0.4 (user alice): maintenance" in end.reason
    assert is_last_round(end, 1, Policy(max_restarts=100))


def test_an_abort_without_a_stop_is_still_a_failure_to_restart_from():
    end = step(released(), Aborted("a member was lost", 6), 0.0).action
    assert isinstance(end, RoundEnd) and end.stop is None and not is_last_round(end, 1, Policy(max_restarts=3))


@given(st.text(max_size=1000), st.text(max_size=1000))
def test_who_asked_is_printable_and_short_whatever_was_sent(user, reason):
    order = StopOrder("10.0.0.4", user, reason)
    assert order.user.isprintable() and order.reason.isprintable()
    assert len(order.user) <= MAX_WORDS and len(order.reason) <= MAX_WORDS
    assert "\n" not in order.describe()


@pytest.mark.parametrize("grace", [-1.0, math.nan, math.inf])
def test_a_grace_from_the_network_is_a_number_of_seconds_from_zero(grace):
    with pytest.raises(ValueError, match="stop grace"):
        check_grace(grace)
    assert check_grace(None) is None and check_grace(0) == 0.0
