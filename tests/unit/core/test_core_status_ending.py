"""Tests of rendezvous.core.status: a node that stops its command after its round was
aborted says so (systemd's STATUS=, `rendezvous status`, its JSON and the wire)."""

from __future__ import annotations

import ipaddress

from rendezvous.coordinator import _wire
from rendezvous.core.advert import Phase
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus, describe_status, status_line, status_to_dict
from rendezvous.core.tf_config import Membership

ME = Peer(node_id="aaaaaaaa", address=ipaddress.ip_address("10.0.0.1"), port=7000, tf_port=9000)
OTHER = Peer(node_id="bbbbbbbb", address=ipaddress.ip_address("10.0.0.2"), port=7000, tf_port=9000)
REASON = "the coordinator 10.0.0.1:7000 aborted the round: 10.0.0.2 (bbbbbbbb): command exited with code 3"


def running(ending=None) -> NodeStatus:
    membership = Membership(job="j", round=1, members=(ME, OTHER))
    return NodeStatus(node=ME, job="j", expect=Size.fixed(2), phase=Phase.RUNNING, membership=membership,
                      trainer_pid=42, trainer_uptime=3.0, ending=ending)


def test_an_aborting_node_says_so_everywhere():
    assert status_line(running()) == "round 1, worker 0 of 2 training"
    assert status_line(running(REASON)) == f"round 1, aborting: {REASON}"
    assert f"aborting, stopping the command: {REASON}" in describe_status(running(REASON))
    assert status_to_dict(running(REASON))["ending"] == REASON and status_to_dict(running())["ending"] is None
    assert _wire.status_from_pb(_wire.status_to_pb(running(REASON))).ending == REASON
    assert _wire.status_from_pb(_wire.status_to_pb(running())).ending is None
