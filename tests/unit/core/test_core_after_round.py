"""Tests of rendezvous.core.after_round: what a node does when a round has ended, over every
combination of the round's end, a stop signal, the preflight's refusal and the restart
policy."""

from __future__ import annotations

import itertools

import pytest

from rendezvous.core.after_round import Next, after_round
from rendezvous.core.member import RoundEnd
from rendezvous.core.round_state import Policy
from rendezvous.core.stopping import StopOrder

ORDER = StopOrder("10.0.0.1", "alice", "maintenance")
POLICY = Policy(max_restarts=2, no_restart_on=frozenset({3}))


def end(stop: bool, completed: bool, final, exit_code: int) -> RoundEnd:
    return RoundEnd("why", exit_code, final=final, completed=completed, stop=ORDER if stop else None)


@pytest.mark.parametrize("stop,completed,final,exit_code,played,signalled,refused", list(itertools.product(
    (False, True), (False, True), (None, False, True), (0, 1, 3), (1, 2, 3), (False, True), (False, True))))
def test_every_combination_takes_the_first_rung_that_holds(stop, completed, final, exit_code, played, signalled,
                                                           refused):
    got = after_round(end(stop, completed, final, exit_code), played, POLICY, signalled=signalled, refused=refused)
    last = final is True or played > POLICY.max_restarts or exit_code in POLICY.no_restart_on
    rungs = [(stop, Next.STOPPED), (completed, Next.COMPLETED), (signalled, Next.SIGNALLED),
             (refused, Next.REFUSED), (last, Next.FAILED), (True, Next.RESTART)]
    assert got is next(step for holds, step in rungs if holds)


def test_the_rungs_that_matter_most():
    # a stop rules a completed round; a completed job is done though a signal came
    assert after_round(end(True, True, None, 0), 1, POLICY, signalled=True, refused=True) is Next.STOPPED
    assert after_round(end(False, True, None, 0), 1, POLICY, signalled=True, refused=False) is Next.COMPLETED
    # a signal ends the node before any restart, a refusal fails it before the policy is asked
    assert after_round(end(False, False, False, 1), 1, POLICY, signalled=True, refused=False) is Next.SIGNALLED
    assert after_round(end(False, False, False, 1), 1, POLICY, signalled=False, refused=True) is Next.REFUSED
    # --max-restarts 2: rounds 1 and 2 restart, round 3 is the last; exit code 3 never restarts
    assert after_round(end(False, False, None, 1), 2, POLICY, signalled=False, refused=False) is Next.RESTART
    assert after_round(end(False, False, None, 1), 3, POLICY, signalled=False, refused=False) is Next.FAILED
    assert after_round(end(False, False, None, 3), 1, POLICY, signalled=False, refused=False) is Next.FAILED
    # the coordinator's word that the end is final
    assert after_round(end(False, False, True, 1), 1, POLICY, signalled=False, refused=False) is Next.FAILED
