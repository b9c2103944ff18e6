"""How a node passes on changes of its view: the first few at once, a burst at most every
`settle` seconds (Timings.view_settle)."""

from __future__ import annotations

import asyncio
import ipaddress
import math

from rendezvous.config.timings import Timings
from rendezvous.core.advert import Advert
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.view import PeerView
from rendezvous.daemon.viewholder import VIEW_BURST, ViewHolder

VIEW_SETTLE = Timings().view_settle


class FakeView:
    adverts: list = []  # nobody heard of: the record of who was heard stays empty
    unreachable: dict = {}  # nobody suspected
    twins: dict = {}  # nobody at this node's endpoint

    def __init__(self, n: int) -> None:
        self.n = n

    def target(self, now: float) -> int:
        return self.n


def resources(told: list[int], settle: float = VIEW_SETTLE) -> ViewHolder:
    views = ViewHolder(FakeView(0), settle)  # type: ignore[arg-type]
    views.listen(lambda: told.append(views.view.n))
    return views


def test_the_first_changes_are_told_at_once_and_a_burst_once_at_the_end_of_the_window():
    async def scenario() -> tuple[list[int], list[int]]:
        told: list[int] = []
        views = resources(told)
        for n in range(1, VIEW_BURST + 4):
            views.update(FakeView(n))  # type: ignore[arg-type]
        at_once = list(told)
        await asyncio.sleep(VIEW_SETTLE * 3)
        return at_once, told

    at_once, told = asyncio.run(scenario())
    assert at_once == list(range(1, VIEW_BURST + 1))  # the node that just started waits for none
    assert told == [*at_once, VIEW_BURST + 3]  # the rest of the burst: once, the latest view


def test_a_quiet_window_lets_the_next_changes_through_at_once_again():
    async def scenario() -> list[int]:
        told: list[int] = []
        views = resources(told)
        for n in range(1, VIEW_BURST + 1):
            views.update(FakeView(n))  # type: ignore[arg-type]
        await asyncio.sleep(VIEW_SETTLE * 2)
        views.update(FakeView(10))  # type: ignore[arg-type]
        return told

    assert asyncio.run(scenario()) == [*range(1, VIEW_BURST + 1), 10]


def test_changes_that_keep_coming_are_told_once_a_window_after_the_first_burst():
    async def scenario() -> tuple[list[int], float, int]:
        told: list[int] = []
        views = resources(told)
        loop = asyncio.get_running_loop()
        began = last = loop.time()
        gaps = 0  # pauses of a window or more between two changes (a machine this busy)
        for n in range(1, 41):  # a change every VIEW_SETTLE / 4 for 10 windows
            views.update(FakeView(n))  # type: ignore[arg-type]
            await asyncio.sleep(VIEW_SETTLE / 4)
            now = loop.time()
            gaps += now - last >= VIEW_SETTLE
            last = now
        took = loop.time() - began  # more windows when the machine is busy
        await asyncio.sleep(VIEW_SETTLE * 3)
        return told, took, gaps

    told, took, gaps = asyncio.run(scenario())
    assert told[:VIEW_BURST] == list(range(1, VIEW_BURST + 1)) and told[-1] == 40
    # at most one a window after the burst, and the last one after the changes stopped; a
    # window that a pause left quiet lets the next burst through at once, as it should
    assert len(told) <= VIEW_BURST + math.ceil(took / VIEW_SETTLE) + 2 + (VIEW_BURST - 1) * gaps


def test_the_window_is_the_configured_one():
    """The rest of a burst is told one window after the burst began, the window given (ten
    times the default here), never earlier."""
    settle = VIEW_SETTLE * 10

    async def scenario() -> list[tuple[int, float]]:
        told: list[tuple[int, float]] = []
        loop = asyncio.get_running_loop()
        views = ViewHolder(FakeView(0), settle)  # type: ignore[arg-type]
        views.listen(lambda: told.append((views.view.n, loop.time())))
        for n in range(1, VIEW_BURST + 2):
            views.update(FakeView(n))  # type: ignore[arg-type]
        while len(told) <= VIEW_BURST:
            await asyncio.sleep(settle / 4)
        return told

    told = asyncio.run(scenario())
    assert [n for n, _ in told] == [*range(1, VIEW_BURST + 1), VIEW_BURST + 1]
    assert told[-1][1] - told[0][1] >= settle * 0.99  # (timers may round by a millisecond)


def test_every_telling_sets_changed_and_calls_the_listeners_in_order():
    async def scenario() -> list[str]:
        calls: list[str] = []
        views = ViewHolder(FakeView(0), VIEW_SETTLE)  # type: ignore[arg-type]
        views.listen(lambda: calls.append(f"first {views.changed.is_set()}"))
        views.listen(lambda: calls.append("second"))
        views.update(FakeView(1))  # type: ignore[arg-type]
        views.close()
        return calls

    assert asyncio.run(scenario()) == ["first True", "second"]


def test_distrust_leaves_a_peer_out_once_and_says_so_once(caplog):
    import ipaddress
    import logging

    from rendezvous.core.advert import Advert
    from rendezvous.core.peer import Peer
    from rendezvous.core.size import Size
    from rendezvous.core.view import PeerView

    def peer(address: str, node_id: str) -> Peer:
        return Peer(node_id=node_id, address=ipaddress.ip_address(address), port=7000, tf_port=9000)

    me, liar = peer("10.0.0.10", "aaaaaaaa"), peer("10.0.0.9", "bbbbbbbb")

    async def scenario() -> tuple[ViewHolder, int]:
        told: list[int] = []
        views = ViewHolder(PeerView(Advert(peer=me, job="j", expect=Size.fixed(2))), VIEW_SETTLE)
        views.listen(lambda: told.append(1))
        views.distrust(liar, "bad mac")
        views.distrust(liar, "bad mac again")
        views.close()
        return views, len(told)

    with caplog.at_level(logging.ERROR):
        views, told = asyncio.run(scenario())
    assert views.view.distrusted == {"bbbbbbbb"} and told == 1
    assert caplog.text.count("authentication with peer bbbbbbbb") == 1


def test_a_suspected_peer_confirmed_again_is_said_once_and_one_that_left_is_not(caplog):
    def advert(last: int) -> Advert:
        peer = Peer(f"{last:012x}", ipaddress.ip_address(f"10.0.0.{last}"), 7000, 9000)
        return Advert(peer=peer, job="j", expect=Size.fixed(3))

    me, low, other = advert(5), advert(1), advert(2)

    async def main() -> None:
        views = ViewHolder(PeerView(me), VIEW_SETTLE)
        for a in (low, other):
            views.update(views.view.seen(a).confirm(a))
        views.update(views.view.suspect(low.node_id, until=math.inf).suspect(other.node_id, until=math.inf))
        with caplog.at_level("INFO", logger="rendezvous.daemon.viewholder"):
            views.update(views.view.confirm(low))
            views.update(views.view.confirm(low))
            views.update(views.view.gone(other.node_id))
        views.close()

    asyncio.run(main())
    assert caplog.text.count("answers again") == 1, caplog.text
    assert f"{low.peer.describe()} answers again: it is a candidate again" in caplog.text
