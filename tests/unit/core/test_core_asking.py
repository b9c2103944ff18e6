"""Tests of rendezvous.core.asking: which adverts a node asks for their Status, and when."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.advert import Advert
from rendezvous.core.asking import Asks, choose_asks
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size

HEDGE = 0.25
LIMIT = 8


def advert(last_octet: int) -> Advert:
    peer = Peer(node_id=f"{last_octet:012x}", address=ipaddress.ip_address(f"10.0.0.{last_octet}"), port=7000, tf_port=9000)
    return Advert(peer=peer, job="job", expect=Size.fixed(3))


ME = advert(50)
BELOW = [advert(n) for n in (3, 7, 20)]  # would be elected while this node coordinates
ABOVE = [advert(n) for n in (60, 70, 80)]


def choose(wanted, target=ME.peer, asking=None, now=10.0, limit=LIMIT) -> Asks:
    return choose_asks(sorted(wanted, key=lambda a: a.peer), target, asking or {}, now, HEDGE, limit)


def test_a_node_that_coordinates_asks_every_peer_above_it_at_once():
    assert choose(ABOVE) == Asks(tuple(ABOVE), None)


def test_up_to_the_limit_of_asks_in_flight():
    asks = choose(ABOVE, asking={"other": 9.0}, limit=2)
    assert asks.start == (ABOVE[0],)
    assert choose(ABOVE, asking={"a": 9.0, "b": 9.0}, limit=2) == Asks((), None)


def test_asks_in_flight_are_not_started_again():
    asks = choose(ABOVE, asking={ABOVE[0].node_id: 9.9})
    assert asks.start == tuple(ABOVE[1:])


def test_peers_that_would_be_elected_are_asked_one_at_a_time_lowest_first():
    assert choose(BELOW + ABOVE) == Asks((BELOW[0],), 10.0 + HEDGE)


def test_the_next_one_waits_for_the_hedge():
    asking = {BELOW[0].node_id: 9.9}
    assert choose(BELOW + ABOVE, asking=asking) == Asks((), 9.9 + HEDGE)
    later = choose(BELOW, asking=asking, now=9.9 + HEDGE)
    assert later == Asks((BELOW[1],), 9.9 + 2 * HEDGE)


def test_the_hedge_runs_from_the_latest_ask():
    asking = {BELOW[0].node_id: 9.0, BELOW[1].node_id: 9.9}
    assert choose(BELOW, asking=asking) == Asks((), 9.9 + HEDGE)
    assert choose(BELOW, asking=asking, now=10.2) == Asks((BELOW[2],), None)


def test_an_answer_or_a_failure_lets_the_next_be_asked_at_once():
    # the lowest answered (confirmed: no longer wanted) or failed (backing off: not due)
    assert choose(BELOW[1:] + ABOVE) == Asks((BELOW[1],), 10.0 + HEDGE)


def test_nothing_else_is_asked_while_one_would_be_elected():
    asking = {BELOW[0].node_id: 9.9}
    # until its ask has gone unanswered for the hedge
    assert choose([BELOW[0]] + ABOVE, asking=asking) == Asks((), 9.9 + HEDGE)


def test_a_slow_one_at_a_time_lets_the_peers_above_be_asked_beside_it():
    # adverts forged below every real node, each asked until its call times out: the real
    # peers above are asked too, one place kept for the one at a time
    asking = {BELOW[0].node_id: 9.0}
    assert choose(BELOW + ABOVE, asking=asking, now=9.0 + HEDGE) == Asks(tuple(ABOVE) + (BELOW[1],), 9.0 + 2 * HEDGE)
    assert choose(BELOW + ABOVE, asking=asking, now=9.0 + HEDGE, limit=4).start == (ABOVE[0], ABOVE[1], BELOW[1])
    # the one at a time holds half of the places at most: with 3, one
    assert choose(BELOW + ABOVE, asking=asking, now=9.0 + HEDGE, limit=3).start == (ABOVE[0], ABOVE[1])
    assert choose(BELOW + ABOVE, asking=asking, now=9.0 + HEDGE, limit=2).start == (ABOVE[0],)


def test_a_peer_heard_after_the_one_at_a_time_took_half_of_the_places_gets_the_others():
    # hundreds of adverts forged below, each asked in turn after the hedge, none answering
    # before its call times out; then a real peer above is heard
    forged = [advert(n) for n in range(1, 40)]
    asking = {a.node_id: 9.0 + i * HEDGE for i, a in enumerate(forged[: LIMIT // 2])}
    now = 9.0 + LIMIT * HEDGE
    assert choose(forged, asking=asking, now=now) == Asks((), None)  # no more of them: half of the places
    assert choose(forged + ABOVE, asking=asking, now=now) == Asks(tuple(ABOVE), None)
    # and a place a forged ask frees goes to the peers above first
    full = {**asking, **{f"other{i}": 9.0 for i in range(LIMIT - LIMIT // 2 - 1)}}
    assert choose(forged + ABOVE, asking=full, now=now).start == (ABOVE[0],)


def test_peers_below_the_target_count_when_another_node_is_the_target():
    target = BELOW[1].peer  # confirmed and followed: only a lower one could change that
    assert choose([BELOW[0], BELOW[2], *ABOVE], target=target) == Asks((BELOW[0],), None)
    assert choose([BELOW[2], *ABOVE], target=target) == Asks((BELOW[2], *ABOVE), None)


def test_following_an_endpoint_no_advert_names_asks_all_at_once():
    assert choose(BELOW + ABOVE, target=None).start == tuple(BELOW + ABOVE)


def test_the_limit_holds_for_the_one_at_a_time_too():
    full = {f"n{i}": 0.0 for i in range(LIMIT)}
    assert choose(BELOW, asking=full) == Asks((), None)


octets = st.lists(st.integers(1, 254).filter(lambda n: n != 50), unique=True, max_size=12)


@given(octets, st.data(), st.floats(0, 20))
def test_never_more_than_the_limit_and_never_twice(wanted_octets, data, now):
    wanted = sorted((advert(n) for n in wanted_octets), key=lambda a: a.peer)
    in_flight = data.draw(st.lists(st.sampled_from(wanted), unique=True) if wanted else st.just([]))
    asking = {a.node_id: data.draw(st.floats(0, now)) for a in in_flight}
    limit = data.draw(st.integers(1, 10))
    asks = choose_asks(wanted, ME.peer, asking, now, HEDGE, limit)
    started = {a.node_id for a in asks.start}
    assert not started & set(asking)
    assert len(asks.start) <= max(0, limit - len(asking))
    electable = [a for a in wanted if a.peer < ME.peer]
    if electable:
        waiting = [a for a in electable if a.node_id not in asking]
        chain = [a for a in asks.start if a in electable]
        chained = [a for a in electable if a.node_id in asking]
        assert len(chain) <= 1
        assert not chain or chain[0] == waiting[0]
        assert not chain or len(chained) < max(1, limit // 2)  # half of the places at most
        # the peers above only beside a one-at-a-time unanswered for the hedge, one place kept
        # for it while it may take one
        if len(chain) < len(asks.start):
            assert any(asking[a.node_id] + HEDGE <= now for a in chained)
            kept = 1 if len(chained) < max(1, limit // 2) else 0
            assert len(asks.start) - len(chain) <= max(0, limit - len(asking) - kept)
    if asks.wake is not None:
        assert asks.wake > now or asks.start
