"""What a node does with discovery's events and its own advert, between startup and
shutdown: every change goes through the view holder, which tells its listeners."""

from __future__ import annotations

import asyncio
import ipaddress
from types import SimpleNamespace

from rendezvous.config import JoinConfig, Timings
from rendezvous.core.advert import Advert, Phase
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.view import Gone, Hinted, PeerView, Seen
from rendezvous.daemon.presence import Presence
from rendezvous.daemon.viewholder import ViewHolder


def advert(address: str, node_id: str) -> Advert:
    peer = Peer(node_id=node_id, address=ipaddress.ip_address(address), port=7000, tf_port=9000)
    return Advert(peer=peer, job="j", expect=Size.fixed(3))


ME, LOW = advert("10.0.0.10", "aaaaaaaa"), advert("10.0.0.9", "bbbbbbbb")


class FakeDiscovery:
    def __init__(self) -> None:
        self.updates: list[Advert] = []

    async def update(self, advert: Advert) -> None:
        self.updates.append(advert)

    def ask_again(self) -> None:
        pass


def presence(told: list[PeerView], allowed=None) -> tuple[Presence, ViewHolder, FakeDiscovery]:
    config = JoinConfig(expect=3, job="j", command=("true",), timings=Timings(advertise_delay=0.0))
    views = ViewHolder(PeerView(ME), settle=0.0)
    views.listen(lambda: told.append(views.view))
    discovery = FakeDiscovery()
    endpoint = SimpleNamespace(discovery=discovery, switch=lambda me: None, allowed=allowed)
    node = Presence(config, endpoint, views, lambda: Phase.WAITING, lambda: False, lambda: None)  # type: ignore[arg-type]
    return node, views, discovery


def test_discovery_s_events_are_applied_by_the_view_and_told():
    async def scenario() -> tuple[list[PeerView], PeerView]:
        told: list[PeerView] = []
        node, views, _ = presence(told)
        node.on_discovery(Seen(LOW))
        node.on_discovery(Gone(LOW.node_id))
        return told, views.view

    told, view = asyncio.run(scenario())
    assert told == [PeerView(ME).seen(LOW), PeerView(ME).seen(LOW).gone(LOW.node_id)]
    assert view == told[-1]


def test_a_node_of_the_job_outside_the_allowed_hosts_is_left_out_and_named_once(caplog):
    """--allow-host (the Slurm step's nodes): a lower address outside them would otherwise
    be elected; neither its advert nor a hint of it reaches the view."""
    allowed = frozenset({ME.peer.address, ipaddress.ip_address("10.0.0.11")})
    inside = advert("10.0.0.11", "cccccccc")

    async def scenario() -> PeerView:
        told: list[PeerView] = []
        node, views, _ = presence(told, allowed)
        for event in (Seen(LOW), Hinted(LOW), Seen(inside), Gone(LOW.node_id)):
            node.on_discovery(event)
        return views.view

    view = asyncio.run(scenario())
    assert set(view.others) == {inside.node_id}
    assert caplog.text.count("a host outside the job: 10.0.0.9 is not one of the hosts allowed") == 1


def test_a_hint_of_a_known_node_tells_nothing():
    async def scenario() -> list[PeerView]:
        told: list[PeerView] = []
        node, _, _ = presence(told)
        node.on_discovery(Seen(LOW))
        node.on_discovery(Hinted(LOW))
        return told

    assert len(asyncio.run(scenario())) == 1


def test_this_node_s_advert_goes_through_the_view_holder_and_then_out():
    async def scenario() -> tuple[list[PeerView], list[Advert]]:
        told: list[PeerView] = []
        node, _, discovery = presence(told)
        node.advertise(Phase.RUNNING, 2, "10.0.0.9:7000")
        while not discovery.updates:
            await asyncio.sleep(0.01)
        node.close()
        return told, discovery.updates

    told, updates = asyncio.run(scenario())
    (view,) = told
    assert view.me.phase is Phase.RUNNING and view.me.round == 2 and view.me.coordinator == "10.0.0.9:7000"
    assert updates == [view.me]


def test_a_suspected_peer_s_own_signed_request_makes_it_a_candidate_again_and_says_so(caplog):
    """A coordinator asks its quiet peers again (core.heard): its vouched request reaches a
    peer that suspects it before that peer's own ask is answered, and is said alike."""
    async def scenario() -> PeerView:
        node, views, _ = presence([])
        node.on_discovery(Seen(LOW))
        views.update(views.view.confirm(LOW).suspect(LOW.node_id, float("inf")))
        node.on_discovery(Hinted(LOW))  # not vouched: proves nothing
        assert views.view.is_suspected(LOW.node_id, 0.0)
        node.on_discovery(Hinted(LOW, vouched=True))
        return views.view

    with caplog.at_level("INFO", logger="rendezvous.daemon.viewholder"):
        view = asyncio.run(scenario())
    assert not view.is_suspected(LOW.node_id, 0.0)
    assert caplog.text.count(f"{LOW.peer.describe()} answers again: it is a candidate again") == 1, caplog.text
