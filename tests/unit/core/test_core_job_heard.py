"""Tests of rendezvous.core.job: `status --job` shows when each member was last heard, marks
the silent ones (frozen or cut off), and stops their uptime there."""

from __future__ import annotations

import json

from rendezvous.coordinator import _wire
from rendezvous.core import job as jobs
from rendezvous.core import round as rounds

from test_core_job import A, B, running

SILENT_AFTER = 2.0


def view_at(now: float, b_heard: float) -> jobs.JobView:
    state = rounds.heard(rounds.heard(running(A, B), A.node_id, now), B.node_id, b_heard)
    board = jobs.released(jobs.Board(), 10.0)
    return jobs.job_view(state, board, A, now, SILENT_AFTER)


def test_each_member_shows_when_it_was_last_heard_and_a_silent_one_is_marked():
    fresh, cut_off = view_at(100.0, 99.5), view_at(100.0, 40.0)
    b = fresh.members[1]
    assert (b.heard_ago, b.silent, b.uptime) == (0.5, False, 90.0)
    b = cut_off.members[1]
    assert (b.heard_ago, b.silent) == (60.0, True)
    assert b.uptime == 30.0  # run until it was last heard, not climbing on
    assert cut_off.members[0].heard_ago is None  # the coordinator's own node sends no heartbeats
    rows = jobs.job_table(cut_off).splitlines()
    assert rows[1].split() == ["RANK", "ADDRESS", "NODE", "PHASE", "ROUND", "UPTIME", "HEARD", "EXIT", "PROGRESS"]
    assert "1m 00s ago, silent" in rows[3] and "30.0s" in rows[3]


def test_the_json_and_the_wire_carry_it():
    view = view_at(100.0, 40.0)
    shown = jobs.job_to_dict(view)
    json.dumps(shown, allow_nan=False)
    assert shown["members"][1]["heard_seconds_ago"] == 60.0 and shown["members"][1]["silent"] is True
    assert shown["members"][0]["heard_seconds_ago"] is None and shown["members"][0]["silent"] is False
    assert _wire.job_view_from_pb(_wire.job_view_to_pb(view, A.node_id)) == view


def test_before_the_freeze_nobody_is_due_a_heartbeat():
    state = rounds.join(rounds.Round(job="resnet", expect=running(A, B).expect), A, running(A, B).expect, 0.0).state
    view = jobs.job_view(state, jobs.Board(), A, 100.0, SILENT_AFTER)
    assert all(m.heard_ago is None and not m.silent for m in view.members)
