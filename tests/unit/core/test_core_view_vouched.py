"""Tests of rendezvous.core.view: an advert a peer sent with a request that proves it (signed
with the job's token, from the address it claims) confirms that peer at once, so hundreds of
forged adverts below it never stand between a late node and its coordinator."""

from __future__ import annotations

import ipaddress

from rendezvous.core.advert import Advert
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.view import Hinted, PeerView, Seen


def advert(address: str, node_id: str) -> Advert:
    peer = Peer(node_id=node_id, address=ipaddress.ip_address(address), port=7000, tf_port=9000)
    return Advert(peer=peer, job="job", expect=Size.fixed(3), auth=True)


ME = advert("10.0.1.30", "aaaaaaaa")
COORDINATOR = advert("10.0.1.10", "bbbbbbbb")
FORGED = [advert(f"10.0.0.{i}", f"{i:08x}") for i in range(1, 251)]


def late_view() -> PeerView:
    view = PeerView(ME)
    for a in [*FORGED, COORDINATOR]:
        view = view.apply(Seen(a))
    return view


def test_a_vouched_advert_confirms_the_coordinator_at_once_below_any_number_of_forged_ones():
    view = late_view()
    assert view.target(0.0).peer == ME.peer  # nothing confirmed: it would coordinate itself
    assert view.unconfirmed(0.0)[:1] == [FORGED[0]]  # and asks the forged ones first, lowest first
    view = view.apply(Hinted(COORDINATOR, vouched=True))
    assert view.target(0.0).peer == COORDINATOR.peer
    assert COORDINATOR.node_id in view.confirmed


def test_a_plain_hint_confirms_nothing():
    view = late_view().apply(Hinted(COORDINATOR))
    assert view.target(0.0).peer == ME.peer and view.confirmed == {}


def test_a_vouched_advert_of_a_node_not_yet_discovered_is_confirmed_too():
    view = PeerView(ME).apply(Hinted(COORDINATOR, vouched=True))
    assert view.target(0.0).peer == COORDINATOR.peer and COORDINATOR.node_id in view.hints


def test_a_confirmed_node_known_only_from_a_hint_stays_when_it_once_does_not_answer():
    view = PeerView(ME).apply(Hinted(COORDINATOR, vouched=True)).unanswered(COORDINATOR.node_id)
    assert COORDINATOR.node_id in view.others
    assert view.unanswered(COORDINATOR.node_id).others == {}
    assert PeerView(ME).apply(Hinted(COORDINATOR)).unanswered(COORDINATOR.node_id).others == {}
