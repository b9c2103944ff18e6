"""A node's own status with peers it has not heard from for too long (core.heard): not
seen, and shown silent with the time since, in every form and over the wire."""

from __future__ import annotations

import ipaddress

from rendezvous.coordinator import _wire
from rendezvous.core.advert import Phase
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus, describe_status, progress_line, status_line, status_to_dict

ME = Peer(node_id="aaaaaaaa", address=ipaddress.ip_address("10.0.0.3"), port=7000, tf_port=9000)
A = Peer(node_id="bbbbbbbb", address=ipaddress.ip_address("10.0.0.1"), port=7000, tf_port=9000)
B = Peer(node_id="cccccccc", address=ipaddress.ip_address("10.0.0.2"), port=7000, tf_port=9000)


def cut_off() -> NodeStatus:
    return NodeStatus(node=ME, job="j", expect=Size.fixed(3), phase=Phase.WAITING, round=2,
                      seen=(ME,), silent=((A, 12.04), (B, 7.5)))


def test_silent_peers_are_not_counted_and_are_shown_with_their_age():
    status = cut_off()
    assert "waiting for peers 1/3" in status_line(status)
    line = progress_line(status)
    assert "1/3 peers seen" in line and "10.0.0.1 (bbbbbbbb) [unreachable]" in line, line
    text = describe_status(status)
    assert "silent" in text and "10.0.0.1 (bbbbbbbb), heard 12.0s ago" in text, text
    shown = status_to_dict(status)
    assert [p["address"] for p in shown["seen"]] == ["10.0.0.3"]
    assert [(p["address"], p["heard_seconds_ago"]) for p in shown["silent"]] == [("10.0.0.1", 12.0), ("10.0.0.2", 7.5)]


def test_silent_peers_cross_the_wire():
    status = cut_off()
    back = _wire.status_from_pb(_wire.status_to_pb(status))
    assert back.seen == (ME,) and back.silent == status.silent
    assert _wire.status_from_pb(_wire.status_to_pb(NodeStatus(node=ME, job="j", expect=Size.fixed(3)))).silent == ()


def test_a_peer_both_suspected_and_silent_is_shown_once_as_silent():
    """Suspected (its Join failed) and silent (not heard for long): once, in every form,
    with the time since it was last heard; an unreachable peer not silent keeps its mark."""
    status = NodeStatus(node=ME, job="j", expect=Size.fixed(3), phase=Phase.WAITING, round=2,
                        seen=(ME, A, B), unreachable=(A, B), silent=((A, 9.3), (A, 9.3)), following=B)
    assert status.unreachable == (B,) and status.silent == ((A, 9.3),) and status.seen == (ME,)
    line = progress_line(status)
    assert line.count("10.0.0.1") == 1 and line.count("10.0.0.2") == 1, line
    assert "1/3 peers seen" in line and "10.0.0.1 (bbbbbbbb) [unreachable]" in line, line
    text = describe_status(status)
    assert text.count("10.0.0.1") == 1 and "silent" in text, text
    assert [p["address"] for p in status_to_dict(status)["silent"]] == ["10.0.0.1"]
    # the suspected peer not silent yet: marked in every form too
    assert "unreachable  10.0.0.2 (cccccccc): left out of the election until it answers" in text, text
    assert [p["address"] for p in status_to_dict(status)["unreachable"]] == ["10.0.0.2"]
    assert status_to_dict(cut_off())["unreachable"] == [] and "unreachable" not in describe_status(cut_off())
    back = _wire.status_from_pb(_wire.status_to_pb(status))
    assert back.silent == status.silent and back.seen == (ME,)
