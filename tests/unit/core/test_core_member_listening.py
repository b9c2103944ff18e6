"""Tests of rendezvous.core.listening.Listening: what a member notices while it listens on a
Join stream (the coordinator's silence, its own pauses, a stopped command), with `now`
passed in."""

from __future__ import annotations

import ipaddress
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.listening import Listening
from rendezvous.core.member import CommandExited, Frozen, Lost, Member, step
from rendezvous.core.peer import Peer
from rendezvous.core.round import ROUND_FAILED, paused
from rendezvous.core.tf_config import Membership


def peer(address: str, node_id: str) -> Peer:
    return Peer(node_id=node_id, address=ipaddress.ip_address(address), port=7000, tf_port=9000)


A = peer("10.0.0.9", "aaaaaaaa")
ME = peer("10.0.0.10", "bbbbbbbb")
MEMBERSHIP = Membership.freeze("j", 1, [A, ME])
LIVENESS = 5.0  # heartbeats every 1 s
HEARTBEAT = LIVENESS / 5


def joining(target: Peer = A) -> Member:
    return Member(ME, suspect_after=3.0, liveness_timeout=LIVENESS).joining(target.endpoint, target)


def frozen(target: Peer = A) -> Member:
    return step(joining(target), Frozen(MEMBERSHIP, MEMBERSHIP.digest), 0.0).state


# -- how long to wait ----------------------------------------------------------------------


def test_a_member_of_another_coordinator_looks_at_every_heartbeat():
    assert joining().poll_interval(False, None) == HEARTBEAT
    assert frozen().poll_interval(True, 0.3) == HEARTBEAT


def test_a_member_joined_to_itself_wakes_only_when_a_suspicion_lapses():
    assert joining(ME).poll_interval(False, None) is None
    assert joining(ME).poll_interval(False, 0.3) == 0.3


def test_a_member_joined_to_itself_looks_at_its_running_command_every_heartbeat():
    assert frozen(ME).poll_interval(True, None) == HEARTBEAT


# -- silence and pauses --------------------------------------------------------------------


def test_waits_add_up_to_the_silence():
    listening = Listening().woke(frozen(), 10.0, HEARTBEAT, 11.0).woke(frozen(), 20.0, HEARTBEAT, 20.5)
    assert listening.silence == pytest.approx(1.5)
    assert listening.paused_for is None


def test_time_between_two_waits_is_not_silence():
    """Busy for a minute between two waits (a --sync-dir scan): only the waits count."""
    listening = Listening().woke(frozen(), 0.0, HEARTBEAT, 1.0).woke(frozen(), 60.0, HEARTBEAT, 61.0)
    assert listening.silence == pytest.approx(2.0)


def test_hearing_the_coordinator_ends_the_silence():
    listening = Listening().woke(frozen(), 0.0, HEARTBEAT, 1.0).heard()
    assert listening.silence == 0.0


def test_a_wait_that_woke_far_past_its_deadline_was_a_pause_and_ends_the_silence():
    """Woken 4 s after a 1 s wait should have ended: the process did not run, and what the
    coordinator sent meanwhile may not be read yet."""
    listening = Listening(silence=4.0).woke(frozen(), 10.0, HEARTBEAT, 15.0)
    assert listening.paused_for == pytest.approx(4.0)
    assert listening.silence == 0.0


def test_waking_late_within_a_heartbeat_is_no_pause():
    listening = Listening(silence=1.0).woke(frozen(), 10.0, HEARTBEAT, 10.0 + HEARTBEAT * 1.9)
    assert listening.paused_for is None
    assert listening.silence == pytest.approx(1.0 + HEARTBEAT * 1.9)


def test_a_pause_is_said_of_one_wait_only():
    paused = Listening().woke(frozen(), 0.0, HEARTBEAT, 10.0)
    assert paused.woke(frozen(), 10.0, HEARTBEAT, 11.0).paused_for is None


def test_a_wait_without_a_deadline_is_never_a_pause():
    listening = Listening().woke(joining(ME), 0.0, None, 100.0)
    assert listening.paused_for is None and listening.silence == 100.0


def test_a_frozen_member_loses_a_coordinator_silent_past_the_liveness_timeout():
    assert Listening(silence=LIVENESS).silent(frozen()) is None
    lost = Listening(silence=LIVENESS + 0.5).silent(frozen())
    assert lost == Lost("nothing heard from it for 5.5 s")


def test_before_the_freeze_silence_is_for_keepalive_to_judge():
    assert Listening(silence=1000.0).silent(joining()) is None


def test_a_member_joined_to_itself_never_counts_its_own_coordinator_silent():
    assert Listening(silence=1000.0).silent(frozen(ME)) is None


def test_the_coordinators_liveness_timeout_rules_after_the_freeze():
    theirs = step(joining(), Frozen(MEMBERSHIP, MEMBERSHIP.digest, liveness_timeout=20.0), 0.0).state
    assert Listening(silence=10.0).silent(theirs) is None
    assert Listening(silence=21.0).silent(theirs) is not None
    assert theirs.poll_interval(True, None) == 4.0


@given(st.lists(st.tuples(st.floats(0, 1e4), st.floats(0, 5), st.floats(0, 100), st.booleans()), max_size=30))
def test_silence_is_never_negative_nor_more_than_the_waits(waits):
    listening, state, waited = Listening(), frozen(), 0.0
    for asked, poll, took, heard in waits:
        listening = listening.woke(state, asked, poll, asked + took)
        waited += took
        if heard:
            listening, waited = listening.heard(), 0.0
        assert 0.0 <= listening.silence <= waited + 1e-6
        assert (listening.paused_for is not None) == paused(asked + poll, asked + took, HEARTBEAT)


# -- a stopped command ---------------------------------------------------------------------


def test_a_running_command_is_never_stopped():
    listening, ended = Listening().command(frozen(), False, 100.0)
    assert listening.stopped_since is None and ended is None


def test_a_command_is_stopped_since_it_was_first_seen_stopped():
    listening, ended = Listening().command(frozen(), True, 10.0)
    assert listening.stopped_since == 10.0 and ended is None
    listening, ended = listening.command(frozen(), True, 12.0)
    assert listening.stopped_since == 10.0 and ended is None


def test_a_command_stopped_past_the_liveness_timeout_has_failed():
    listening, _ = Listening().command(frozen(), True, 10.0)
    _, ended = listening.command(frozen(), True, 10.0 + LIVENESS)
    assert ended is None
    _, ended = listening.command(frozen(), True, 10.0 + LIVENESS + 0.25)
    assert ended == CommandExited(ROUND_FAILED, "command stopped (SIGSTOP) for 5.2 s")


def test_a_command_that_runs_again_starts_over():
    listening, _ = Listening().command(frozen(), True, 0.0)
    listening, _ = listening.command(frozen(), False, 4.0)
    listening, ended = listening.command(frozen(), True, 6.0)
    assert listening.stopped_since == 6.0 and ended is None


def test_the_stopped_command_and_the_silence_are_kept_apart():
    listening, _ = Listening(silence=3.0).command(frozen(), True, 1.0)
    assert listening.heard().stopped_since == 1.0
    assert listening.silence == 3.0


@pytest.mark.parametrize("liveness", [0.5, 5.0, math.inf])
def test_a_stopped_command_fails_only_past_the_rounds_liveness_timeout(liveness):
    state = Member(ME, suspect_after=3.0, liveness_timeout=liveness)
    listening, _ = Listening().command(state, True, 0.0)
    _, ended = listening.command(state, True, 10.0)
    assert (ended is not None) == (10.0 > liveness)
