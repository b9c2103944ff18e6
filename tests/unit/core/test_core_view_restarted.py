"""Tests of rendezvous.core.view: a daemon restarted at the same address and port (a new
node id) supersedes its predecessors, whose adverts stay in every mDNS cache."""

from __future__ import annotations

import ipaddress

from rendezvous.core.advert import Advert, Phase
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.status import describe_progress
from rendezvous.core.view import PeerView, describe_missing, describe_shared

ip = ipaddress.ip_address


def advert(address: str, node_id: str, port: int = 7000, **kw) -> Advert:
    peer = Peer(node_id=node_id, address=ip(address), port=port, tf_port=9000)
    return Advert(peer=peer, job="job", expect=Size.fixed(3), **kw)


ME = advert("10.0.0.10", "aaaaaaaa")
OLD = advert("10.0.0.9", "bbbbbbbb")  # the coordinator, killed -9
OLDER = advert("10.0.0.9", "b0b0b0b0")  # and killed before that
NEW = advert("10.0.0.9", "cccccccc")  # restarted at the same address and port
HIGH = advert("10.0.0.100", "dddddddd")


def confirmed(*adverts: Advert) -> PeerView:
    view = PeerView(ME)
    for a in adverts:
        view = view.seen(a).confirm(a)
    return view


def test_a_new_node_id_at_an_endpoint_shadows_the_older_ones_there_at_once():
    assert PeerView(ME).seen(OLDER).seen(OLD).seen(NEW).shadowed == {OLD.node_id, OLDER.node_id}
    view = confirmed(OLD, HIGH).seen(NEW)
    assert view.shadowed == {OLD.node_id}
    # neither elected nor counted, nor listed as unreachable: the new one is asked first
    assert view.target(0.0).peer == ME.peer
    assert view.present(0.0) == sorted([ME.peer, NEW.peer, HIGH.peer])
    assert view.unconfirmed(0.0)[0] == NEW
    assert view.suspected(0.0) == []


def test_the_new_node_confirmed_supersedes_its_predecessors_for_good():
    view = PeerView(ME).seen(OLDER).seen(OLD).confirm(OLD).seen(NEW).confirm(NEW)
    assert view.target(0.0).peer == NEW.peer
    assert set(view.others) == {NEW.node_id}
    assert view.superseded == {OLD.node_id: "10.0.0.9:7000", OLDER.node_id: "10.0.0.9:7000"}
    # their adverts, refreshed from every cache, are ignored from now on
    assert view.seen(OLD) is view
    assert view.seen(OLD.with_phase(Phase.RUNNING, OLD.peer.endpoint)) is view


def test_confirming_a_node_supersedes_the_others_at_its_endpoint_even_unshadowed():
    # the old advert arrives after the new one (a cache answering late): the endpoint's
    # Status says who is there
    view = PeerView(ME).seen(NEW).seen(OLD)
    assert view.shadowed == {NEW.node_id}
    view = view.confirm(NEW)
    assert set(view.others) == {NEW.node_id} and view.shadowed == frozenset()
    assert view.target(0.0).peer == NEW.peer


def test_an_endpoint_answering_as_another_node_supersedes_the_one_asked_about():
    view = confirmed(OLD).answered_as(OLD.node_id, NEW.with_phase(Phase.WAITING))
    assert OLD.node_id not in view.others and set(view.superseded) == {OLD.node_id}
    assert view.seen(OLD) is view


def test_a_forged_advert_at_a_live_nodes_endpoint_costs_one_status():
    forged = advert("10.0.0.9", "ffffffff")
    view = confirmed(OLD).seen(forged)
    assert view.shadowed == {OLD.node_id}
    view = view.answered_as(forged.node_id, OLD)  # the endpoint answers as the real node
    assert view.shadowed == frozenset() and forged.node_id in view.superseded
    assert view.target(0.0).peer == OLD.peer


def test_a_node_at_this_nodes_own_endpoint_is_its_twin_never_a_peer():
    # a host given the same address, or this node's predecessor (from seeds' gossip): its
    # Status would be this node's own, so it is never asked, counted or elected
    other = advert("10.0.0.10", "eeeeeeee")
    view = PeerView(ME).seen(other)
    assert view.others == {} and view.twins == {other.node_id: other}
    assert view.unconfirmed(0.0) == [] and view.present(0.0) == [ME.peer]
    assert view.seen(other) is view and PeerView(ME).hinted(other).hints == frozenset()
    assert describe_shared(view) == [
        "node eeeeeeee also advertises this node's address and port 10.0.0.10:7000 (job 'job'; this node is "
        "aaaaaaaa): two hosts are configured with the address 10.0.0.10, unless a daemon ran here before with that id"
    ]
    assert describe_missing(view).endswith("2 never appeared; " + describe_shared(view)[0])


def test_the_waiting_and_timeout_messages_name_an_endpoint_several_nodes_advertised():
    view = PeerView(ME).seen(OLD).confirm(OLD).seen(NEW).confirm(NEW)
    shared = describe_shared(view)
    assert shared == [
        "10.0.0.9:7000 was advertised by 2 nodes: bbbbbbbb before cccccccc, which answers there; a daemon "
        "restarted there, or two hosts configured with the same address and port"
    ]
    assert describe_missing(view).endswith("1 never appeared; " + shared[0])
    assert describe_shared(PeerView(ME).seen(HIGH).confirm(HIGH)) == []


def test_the_progress_line_never_counts_a_predecessor():
    # three of three expected: me, the restarted coordinator and a third node; the dead
    # predecessor is not a fourth
    view = confirmed(OLD, HIGH).seen(NEW).confirm(NEW)
    line = describe_progress("job", ME.expect, view.present(0.0), unreachable=view.suspected(0.0))
    assert line.startswith("job 'job': 3/3 peers seen: ")
    assert OLD.node_id not in line


def test_another_port_at_the_same_address_is_another_node():
    other_port = advert("10.0.0.9", "cccccccc", port=7001)
    view = confirmed(OLD).seen(other_port)
    assert view.shadowed == frozenset()
    assert set(view.others) == {OLD.node_id, other_port.node_id}
