"""The job as its coordinator sees it: the board beside the round, stragglers, the view,
where to ask, and how it is shown; its protobuf round trip."""

from __future__ import annotations

import ipaddress
import json
from rendezvous.core.record import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.coordinator import _wire
from rendezvous.core import job as jobs
from rendezvous.core import round as rounds
from rendezvous.core.advert import Advert, Phase
from rendezvous.core.peer import Peer
from rendezvous.core.progress import Progress
from rendezvous.core.round import Round
from rendezvous.core.size import Size

A = Peer("aaaaaaaaaaaa", ipaddress.ip_address("10.0.0.1"), 7001, 9001)
B = Peer("bbbbbbbbbbbb", ipaddress.ip_address("10.0.0.2"), 7002, 9002)
C = Peer("cccccccccccc", ipaddress.ip_address("10.0.0.3"), 7003, 9003)


def running(*peers: Peer) -> Round:
    state = Round(job="resnet", expect=Size.fixed(len(peers)))
    for p in peers:
        state = rounds.join(state, p, Size.fixed(len(peers)), 0.0).state
    for p in peers:
        state = rounds.ready(state, p.node_id, state.membership.digest).state
    assert state.phase is rounds.RoundPhase.RELEASED
    return state


def steps(board: jobs.Board, **by_node: int) -> jobs.Board:
    for node, step in by_node.items():
        board = jobs.progressed(board, node, Progress(step=step))
    return board


def test_a_new_round_starts_empty_but_for_the_last_abort():
    board = jobs.aborted(jobs.progressed(jobs.released(jobs.Board(), 5.0), "a", Progress(step=1)), "a failed")
    assert jobs.for_round(board, 1) is board
    assert jobs.for_round(board, 2) == jobs.Board(round=2, last_abort="a failed")


def test_the_view_of_a_running_job():
    state = running(A, B, C)
    board = jobs.released(jobs.Board(), 10.0)
    board = jobs.progressed(board, A.node_id, Progress(epoch=3, epochs=10, loss=0.5))
    board = jobs.finished(board, C.node_id, 1, 14.0)
    view = jobs.job_view(state, board, A, now=20.0)
    assert (view.job, view.round, view.phase, view.expect, view.restarts) == ("resnet", 1, "released", Size.fixed(3), 0)
    assert [(m.rank, m.phase, m.uptime, m.exit_code) for m in view.members] == [
        (0, Phase.RUNNING, 10.0, None), (1, Phase.RUNNING, 10.0, None), (2, Phase.FINISHED, 4.0, 1),
    ]
    assert view.members[0].progress == Progress(epoch=3, epochs=10, loss=0.5) and view.members[1].progress is None


def test_the_view_before_the_start_and_of_a_later_round():
    state = rounds.join(Round(job="resnet", expect=Size.fixed(2)), B, Size.fixed(2), 0.0).state
    view = jobs.job_view(state, jobs.Board(), B, now=1.0)
    assert [(m.peer, m.rank, m.phase, m.uptime) for m in view.members] == [(B, None, Phase.WAITING, None)]
    frozen = rounds.join(state, A, Size.fixed(2), 0.0).state
    assert [m.phase for m in jobs.job_view(frozen, jobs.Board(), A, 1.0).members] == [Phase.FROZEN] * 2
    later = rounds.join(Round(job="resnet", expect=Size.fixed(2), number=3), A, Size.fixed(2), 0.0).state
    stale = jobs.released(jobs.aborted(jobs.Board(round=2), "B lost"), 0.0)
    view = jobs.job_view(later, stale, A, now=1.0)
    assert (view.round, view.restarts, view.last_abort) == (3, 2, "B lost")
    assert view.members[0].uptime is None  # the release was round 2's


def test_a_member_lagging_the_median_for_long_enough_is_marked_once():
    board = steps(jobs.Board(), a=100, b=100, c=79)
    board, marked = jobs.check_stragglers(board, now=0.0, after=60)
    assert marked == [] and board.record("c").lagging_since == 0.0 and not board.record("c").straggler
    board, marked = jobs.check_stragglers(board, now=59.9, after=60)
    assert marked == []
    board, marked = jobs.check_stragglers(board, now=60.0, after=60)
    assert marked == ["c"] and board.record("c").straggler
    board, marked = jobs.check_stragglers(board, now=90.0, after=60)
    assert marked == [] and board.record("c").straggler  # logged once
    board, marked = jobs.check_stragglers(steps(board, c=95), now=91.0, after=60)
    assert marked == [] and board.record("c") == jobs.MemberRecord(progress=Progress(step=95))


def test_images_per_second_count_too_and_finished_or_silent_members_do_not():
    fast, slow = Progress(images_per_s=1000.0), Progress(images_per_s=700.0)
    board = jobs.Board(members={"a": jobs.MemberRecord(fast), "b": jobs.MemberRecord(fast), "c": jobs.MemberRecord(slow)})
    assert jobs.check_stragglers(board, 0.0, after=0)[1] == ["c"]
    done = jobs.finished(board, "a", 0, 1.0)
    assert jobs.check_stragglers(done, 0.0, after=0)[1] == []  # b and c: no median to lag
    assert jobs.check_stragglers(steps(jobs.Board(), a=10), 0.0, after=0)[1] == []
    assert jobs.check_stragglers(steps(jobs.Board(), a=10, b=8, c=9), 0.0, after=0)[1] == []  # 20% exactly is fine


def test_with_an_even_number_of_members_the_median_is_the_mean_of_the_middle_two():
    # median (80 + 100) / 2 = 90: 72 is exactly 20% below it, 71 is more
    assert jobs.check_stragglers(steps(jobs.Board(), a=72, b=80, c=100, d=100), 0.0, after=0)[1] == []
    assert jobs.check_stragglers(steps(jobs.Board(), a=71, b=80, c=100, d=100), 0.0, after=0)[1] == ["a"]


@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=8))
def test_never_more_than_half_are_stragglers(values):
    board = steps(jobs.Board(), **{f"n{i}": v for i, v in enumerate(values)})
    _, marked = jobs.check_stragglers(board, 0.0, after=0)
    assert len(marked) <= len(values) // 2


def advert(peer: Peer, **kwargs) -> Advert:
    return Advert(peer=peer, job=kwargs.pop("job", "resnet"), expect=Size.fixed(3), **kwargs)


def test_where_to_ask_about_a_job():
    assert jobs.coordinator_endpoint([advert(A, job="other")], "resnet") is None
    assert jobs.coordinator_endpoint([advert(C), advert(B)], "resnet") == B.endpoint  # the lowest
    named = [advert(B, phase=Phase.RUNNING, coordinator=C.endpoint), advert(A), advert(C, coordinator=C.endpoint)]
    assert jobs.coordinator_endpoint(named, "resnet") == C.endpoint
    newer = [advert(A, round=1, coordinator=A.endpoint), advert(C, round=2), advert(B, round=2)]
    assert jobs.coordinator_endpoint(newer, "resnet") == B.endpoint


def view() -> jobs.JobView:
    board = jobs.released(jobs.aborted(jobs.Board(round=2), "10.0.0.3 (cccccccccccc): command exited with code 1"), 0.0)
    board = jobs.progressed(board, A.node_id, Progress(epoch=12, epochs=60, loss=0.84, images_per_s=2310.0))
    board = replace(board, members={**board.members, B.node_id: jobs.MemberRecord(Progress(step=3), straggler=True)})
    return jobs.job_view(replace(running(A, B), number=2), board, A, now=125.0)


def test_the_table():
    assert jobs.job_table(view()).splitlines() == [
        "job resnet: round 2 (released), 2 of 2 members, 1 restart, coordinator 10.0.0.1:7001",
        "last round ended: 10.0.0.3 (cccccccccccc): command exited with code 1",
        "RANK  ADDRESS   NODE          PHASE    ROUND  UPTIME  HEARD       EXIT  PROGRESS",
        "0     10.0.0.1  aaaaaaaaaaaa  running  2      2m 05s  -           -     epoch 12/60, loss 0.84, 2,310 img/s",
        "1     10.0.0.2  bbbbbbbbbbbb  running  2      2m 05s  2m 05s ago  -     step 3 [straggler]",
    ]
    empty = jobs.JobView(job="x", round=1, phase="gathering", expect=Size.fixed(2), coordinator=None)
    assert jobs.job_table(empty).splitlines()[1:] == ["no member has joined yet"]


def test_the_json_and_the_wire():
    shown = jobs.job_to_dict(view())
    json.dumps(shown, allow_nan=False)
    assert shown["restarts"] == 1 and shown["last_abort_reason"].endswith("code 1")
    assert shown["members"][0]["progress"]["epoch"] == 12 and shown["members"][1]["straggler"]
    assert [(m["rank"], m["phase"], m["round"]) for m in shown["members"]] == [(0, "running", 2), (1, "running", 2)]
    assert _wire.job_view_from_pb(_wire.job_view_to_pb(view(), "aaaaaaaaaaaa")) == view()
    waiting = jobs.JobView(job="x", round=1, phase="gathering", expect=Size.fixed(2), coordinator=None, coordinating=False)
    assert _wire.job_view_from_pb(_wire.job_view_to_pb(waiting, "a")) == waiting


@pytest.mark.parametrize("member", [jobs.MemberView(A, None, Phase.WAITING, 1)])
def test_unknowns_are_null(member):
    shown = jobs.job_to_dict(jobs.JobView("x", 1, "gathering", Size.fixed(2), A, (member,)))["members"][0]
    assert shown["rank"] is None and shown["command_uptime_seconds"] is None and shown["progress"] is None
