"""Tests of rendezvous.core.unformed: what a waiting node says of peers it cannot be in the
job with, and of another node at its own address and port."""

from __future__ import annotations

import ipaddress

from rendezvous.core.advert import Advert
from rendezvous.core.peer import Peer
from rendezvous.core.record import replace
from rendezvous.core.size import Size
from rendezvous.core.unformed import Oddity, alone_hint, describe_twin, is_twin, oddity, timeout_advice
from rendezvous.core.view import PeerView, describe_missing, odd_peers


def advert(address: str, node_id: str, expect: int = 2, port: int = 7000, **kw) -> Advert:
    peer = Peer(node_id=node_id, address=ipaddress.ip_address(address), port=port, tf_port=9000)
    return Advert(peer=peer, job="job", expect=Size.fixed(expect), **kw)


ME = advert("10.0.0.2", "aaaaaaaa")
ODD = advert("10.0.0.3", "bbbbbbbb", expect=3)
NETWORK = "no peer seen for 10s: multicast may be blocked"


def test_only_a_confirmed_expect_makes_a_peer_odd_and_a_token_or_its_failure_always_does():
    assert oddity(ME, ODD, confirmed=False, distrusted=False) is None  # a mere advert claims nothing
    assert oddity(ME, ODD, confirmed=True, distrusted=False) is Oddity.EXPECT
    assert oddity(replace(ME, auth=True), advert("10.0.0.3", "bbbbbbbb"), False, False) is Oddity.NO_TOKEN
    assert oddity(ME, advert("10.0.0.3", "bbbbbbbb"), True, distrusted=True) is Oddity.AUTH_FAILED
    assert oddity(ME, advert("10.0.0.3", "bbbbbbbb"), True, False) is None


def test_a_peer_refused_for_its_expect_is_named_after_it_left_and_the_network_is_not_blamed():
    view = PeerView(ME).seen(ODD).confirm(ODD).gone(ODD.node_id)
    assert view.others == {} and odd_peers(view) == [(ODD, Oddity.EXPECT)]
    said = "10.0.0.3 (bbbbbbbb) runs it with --expect 3, this node with --expect 2 (set by RENDEZVOUS_EXPECT)"
    hint = alone_hint(ME, view.others, odd_peers(view), [], 10, "RENDEZVOUS_EXPECT", NETWORK)
    assert hint is not None and said in hint and "multicast" not in hint
    summary = describe_missing(view, "RENDEZVOUS_EXPECT")
    assert said in summary and summary.endswith("0 never appeared")
    assert timeout_advice(odd_peers(view), False) == "Start every node of the job with the same --expect"


def test_a_peer_that_left_agreeing_is_forgotten_and_nobody_heard_blames_the_network():
    view = PeerView(ME).seen(replace(ODD, expect=Size.fixed(2))).gone(ODD.node_id)
    assert odd_peers(view) == []
    assert alone_hint(ME, view.others, [], [], 10, "--expect", NETWORK) == NETWORK
    assert "multicast" in timeout_advice([], False)


def test_no_hint_while_a_peer_that_counts_is_there():
    other = advert("10.0.0.4", "cccccccc")
    view = PeerView(ME).seen(ODD).confirm(ODD).seen(other).confirm(other)
    assert alone_hint(ME, view.others, odd_peers(view), [], 10, "--expect", NETWORK) is None


def test_token_causes_name_the_token_in_the_advice():
    me = replace(ME, auth=True)
    tokenless = advert("10.0.0.3", "bbbbbbbb")
    view = PeerView(me).seen(tokenless).gone(tokenless.node_id)
    assert odd_peers(view) == [(tokenless, Oddity.NO_TOKEN)]
    assert timeout_advice(odd_peers(view), False) == "Start every node of the job with the same --token-file"


def test_a_twin_is_another_node_id_of_the_job_at_this_very_endpoint():
    assert is_twin(ME.peer, "job", advert("10.0.0.2", "cccccccc"))
    assert not is_twin(ME.peer, "job", ME)
    assert not is_twin(ME.peer, "job", advert("10.0.0.2", "cccccccc", port=7001))  # one host, two daemons
    assert not is_twin(ME.peer, "other", advert("10.0.0.2", "cccccccc"))


def test_twins_are_remembered_within_a_bound_and_named_in_the_hint_and_advice():
    view = PeerView(ME)
    for n in range(20):
        view = view.hinted(advert("10.0.0.2", f"{n:08x}"))
    assert len(view.twins) == 8 and view.others == {}
    said = [describe_twin(ME, t) for t in view.twins.values()][:1]
    hint = alone_hint(ME, view.others, [], said, 10, "--expect", NETWORK)
    assert hint is not None and "also advertises this node's address and port 10.0.0.2:7000" in hint
    assert timeout_advice([], True) == "Give each host its own address"
