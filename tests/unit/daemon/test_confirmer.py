"""When the confirmer asks an advertised node's Status again: a node that answered before at
every `suspect-after` (as the README says), a node never confirmed ever more seldom, and a
node that announced itself anew at once. Status calls are replaced by a scripted function."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from rendezvous.core.advert import Advert, Phase
from rendezvous.core.peer import Peer
from rendezvous.core.record import replace
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import PeerView
from rendezvous.daemon import confirmer as confirming
from rendezvous.daemon.confirmer import MAX_BACKOFF, Confirmer
from rendezvous.daemon.viewholder import ViewHolder
from rendezvous.errors import NoDaemonError

INTERVAL = 0.5  # suspect-after; the scripted calls answer at once, nothing waits for it


def advert(address: str, node_id: str) -> Advert:
    peer = Peer(node_id=node_id, address=ipaddress.ip_address(address), port=7000, tf_port=9000)
    return Advert(peer=peer, job="job", expect=Size.fixed(3))


ME = advert("10.0.0.10", "aaaaaaaaaaaa")
LOW = advert("10.0.0.9", "bbbbbbbbbbbb")  # would coordinate: asked before it counts


class Script:
    """Status calls: silent while `silent`, else the node answers with its advert's claims."""

    def __init__(self) -> None:
        self.silent = True
        self.adverts: list[Advert] = []  # the nodes that may be asked, as they advertise now
        self.asked: list[Advert] = []

    async def __call__(self, endpoint, timeout, keys, caller, about=None):
        target = next(a for a in self.adverts if a.peer.endpoint == endpoint)
        self.asked.append(target)
        if self.silent:
            raise NoDaemonError(f"{endpoint} does not answer")
        return NodeStatus(node=target.peer, job=target.job, expect=target.expect)


@pytest.fixture
def script(monkeypatch):
    s = Script()
    monkeypatch.setattr(confirming, "fetch_status", s)
    return s


async def settle(confirmer: Confirmer) -> None:
    """Until no ask is under way."""
    for _ in range(100):
        await asyncio.sleep(0)
        if not confirmer._tasks:
            return


def wait_before_next_ask(confirmer: Confirmer, node_id: str) -> float:
    return confirmer._next_ask[node_id] - asyncio.get_running_loop().time()


def test_a_node_that_answered_before_is_asked_every_interval_while_it_is_silent(script):
    async def scenario() -> list[float]:
        script.adverts = [LOW]
        view = PeerView(ME).seen(LOW).confirm(LOW).suspect(LOW.node_id, until=1e12)
        views = ViewHolder(view, 0.0)
        confirmer = Confirmer(views, None, 1.0, INTERVAL, 0.25)
        waits = []
        for _ in range(5):  # five silences in a row: a partition of a while
            confirmer._next_ask.pop(LOW.node_id, None)  # its time has come
            confirmer.kick()
            await settle(confirmer)
            waits.append(wait_before_next_ask(confirmer, LOW.node_id))
        confirmer.close()
        return waits

    waits = asyncio.run(scenario())
    assert len(script.asked) == 5
    assert all(w <= INTERVAL for w in waits), f"asked again only after {waits} s, not every {INTERVAL} s"


def test_a_node_never_confirmed_is_asked_ever_more_seldom_up_to_a_bound(script):
    async def scenario() -> list[float]:
        script.adverts = [LOW]
        views = ViewHolder(PeerView(ME).seen(LOW), 0.0)
        confirmer = Confirmer(views, None, 1.0, INTERVAL, 0.25)
        waits = []
        for _ in range(6):
            confirmer._next_ask.pop(LOW.node_id, None)
            confirmer.kick()
            await settle(confirmer)
            waits.append(confirmer._backoff[LOW.node_id])  # the wait it chose after this silence
        confirmer.close()
        return waits

    waits = asyncio.run(scenario())
    assert waits == sorted(waits) and waits[0] <= INTERVAL < waits[2]
    assert max(waits) <= MAX_BACKOFF * INTERVAL


def test_a_fresh_advert_is_asked_at_once_whatever_the_wait_left(script):
    async def scenario() -> int:
        script.adverts = [LOW]
        views = ViewHolder(PeerView(ME).seen(LOW), 0.0)
        confirmer = Confirmer(views, None, 1.0, INTERVAL, 0.25)
        for _ in range(4):  # silent: its next ask is several intervals away
            confirmer._next_ask.pop(LOW.node_id, None)
            confirmer.kick()
            await settle(confirmer)
        assert wait_before_next_ask(confirmer, LOW.node_id) > INTERVAL
        asked = len(script.asked)
        anew = replace(LOW, phase=Phase.RUNNING)  # it announces itself anew
        script.adverts, script.silent = [anew], False
        views.update(views.view.seen(anew))
        confirmer.kick()
        await settle(confirmer)
        confirmer.close()
        return len(script.asked) - asked

    assert asyncio.run(scenario()) == 1
