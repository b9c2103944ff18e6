"""Tests of rendezvous.cli.members: what `status --job` shows from the members when the
coordinator does not answer."""

from __future__ import annotations

import ipaddress
import json

from rendezvous.cli.members import members_view, render_members, unreachable_note
from rendezvous.core.advert import Advert, Phase
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus


def peer(n: int) -> Peer:
    return Peer(node_id=f"{n:08x}", address=ipaddress.ip_address(f"10.0.0.{n}"), port=7000, tf_port=9000)


def test_each_member_shows_its_own_phase_round_and_command_uptime():
    statuses = [
        NodeStatus(node=peer(3), job="j", expect=Size.fixed(3), phase=Phase.WAITING, round=2),
        NodeStatus(node=peer(2), job="j", expect=Size.fixed(3), phase=Phase.RUNNING, round=1, trainer_uptime=42.0),
    ]
    adverts = [Advert(peer=peer(1), job="j", expect=Size.fixed(3), phase=Phase.RUNNING, coordinator="10.0.0.1:7000")]
    view = members_view("j", statuses, adverts)
    assert [(m.peer.address.packed[-1], m.phase, m.round, m.uptime) for m in view.members] == [
        (2, Phase.RUNNING, 1, 42.0), (3, Phase.WAITING, 2, None)]
    assert view.round == 2 and view.coordinator is None and not view.coordinating
    note = unreachable_note("the daemon at 10.0.0.1:7000 did not answer: DEADLINE_EXCEEDED Deadline Exceeded",
                            ["10.0.0.1 (x): DEADLINE_EXCEEDED"])
    assert note.splitlines() == [
        "no job status: the daemon at 10.0.0.1:7000 did not answer: DEADLINE_EXCEEDED Deadline Exceeded; "
        "what the job's members say instead:",
        "no answer from 10.0.0.1 (x): DEADLINE_EXCEEDED",
    ]
    text = render_members(view, note, as_json=False, watch=False)
    assert text.startswith(note + "\njob j: round 2 (unknown)")
    shown = json.loads(render_members(view, note, as_json=True, watch=False))
    assert shown["coordinator_unreachable"] == note and len(shown["members"]) == 2
