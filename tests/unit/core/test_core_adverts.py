"""Tests of rendezvous.core.adverts: the adverts a node learns from seeds and peers."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.advert import Advert, Phase
from rendezvous.core.adverts import AdvertStore, Gossip, Record
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size

TTL = 10.0


def advert(n: int, phase: Phase = Phase.WAITING) -> Advert:
    peer = Peer(node_id=f"{n:08x}", address=ipaddress.ip_address(f"10.0.0.{n}"), port=29630, tf_port=9000)
    return Advert(peer=peer, job="job", expect=Size.fixed(3), phase=phase)


A, B = advert(1), advert(2)
A_FROZEN = advert(1, Phase.FROZEN)


def store(*records: Record, now: float = 0.0) -> AdvertStore:
    return AdvertStore(TTL).merge(records, now).store


def test_a_new_node_is_seen_and_kept():
    changes = AdvertStore(TTL).merge([Record(A, 1), Record(B, 5)], 0.0)
    assert changes.seen == (A, B) and changes.gone == ()
    assert sorted(changes.store.adverts(), key=lambda a: a.node_id) == [A, B]


def test_a_higher_serial_wins_and_a_changed_advert_is_seen_again():
    changes = store(Record(A, 1)).merge([Record(A_FROZEN, 2)], 1.0)
    assert changes.seen == (A_FROZEN,)
    assert changes.store.adverts() == [A_FROZEN]


def test_an_older_or_equal_serial_learned_second_hand_changes_nothing():
    newer = store(Record(A_FROZEN, 7))
    for serial in (6, 7):
        changes = newer.merge([Record(A, serial)], 1.0)
        assert changes.seen == () and changes.store == newer


def test_a_higher_serial_with_the_same_advert_is_a_sign_of_life_not_a_change():
    changes = store(Record(A, 1), now=0.0).merge([Record(A, 2)], 8.0)
    assert changes.seen == ()
    assert changes.store.expire(15.0).gone == ()  # heard at 8: alive until 18
    assert changes.store.expire(18.5).gone == (A.node_id,)


def test_a_node_not_heard_of_for_ttl_is_gone_and_forgotten():
    known = store(Record(A, 1), now=0.0).merge([Record(B, 1)], 5.0).store
    assert known.expire(TTL).gone == ()  # exactly ttl: still there
    changes = known.expire(TTL + 1)
    assert changes.gone == (A.node_id,)
    assert changes.store.adverts() == [B]
    assert changes.store.expire(TTL + 1) == type(changes)(changes.store)  # nothing more to expire


def test_a_goodbye_removes_the_node_and_spreads_as_a_record():
    changes = store(Record(A, 1), Record(B, 1)).merge([Record(A, 2, goodbye=True)], 1.0)
    assert changes.gone == (A.node_id,) and changes.seen == ()
    assert changes.store.adverts() == [B]
    assert Record(A, 2, goodbye=True) in changes.store.records()


def test_an_older_advert_does_not_bring_back_a_node_that_said_goodbye():
    left = store(Record(A, 3, goodbye=True))
    changes = left.merge([Record(A, 2)], 1.0)
    assert changes.seen == () and changes.store.adverts() == []


def test_a_goodbye_of_an_unknown_node_is_kept_but_reports_nothing():
    changes = AdvertStore(TTL).merge([Record(A, 4, goodbye=True)], 0.0)
    assert changes.gone == () and changes.seen == ()
    assert changes.store.records() == [Record(A, 4, goodbye=True)]


def test_a_goodbye_is_forgotten_after_ttl_without_being_reported_again():
    left = store(Record(A, 1)).merge([Record(A, 2, goodbye=True)], 0.0).store
    changes = left.expire(TTL + 1)
    assert changes.gone == () and changes.store.records() == []


def test_a_node_that_comes_back_after_its_goodbye_is_seen_again():
    left = store(Record(A, 1)).merge([Record(A, 2, goodbye=True)], 0.0).store
    assert left.merge([Record(A, 3)], 1.0).seen == (A,)


def test_seen_and_goodbye_in_one_batch_report_only_the_last():
    changes = AdvertStore(TTL).merge([Record(A, 1), Record(A, 2, goodbye=True)], 0.0)
    assert changes.seen == () and changes.gone == ()


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 20), st.booleans()), max_size=30))
def test_any_order_of_delivery_ends_with_each_nodes_highest_serial(items):
    records = [Record(advert(n), serial, goodbye) for n, serial, goodbye in items]
    forward = AdvertStore(TTL).merge(records, 0.0).store
    backward = AdvertStore(TTL)
    for record in reversed(records):
        backward = backward.merge([record], 0.0).store
    best = {r.node_id: max(x.serial for x in records if x.node_id == r.node_id) for r in records}
    for result in (forward, backward):
        assert {r.node_id: r.serial for r in result.records()} == best


def test_the_answer_to_an_exchange_holds_only_what_the_sender_lacks():
    seed = store(Record(A, 3), Record(B, 5))
    answer = seed.answer(Gossip(known={A.node_id: 3, B.node_id: 4}))
    assert answer.records == (Record(B, 5),)
    assert answer.known == {A.node_id: 3, B.node_id: 5}
    assert seed.answer(Gossip()).records == (Record(A, 3), Record(B, 5))  # a first exchange: all
    assert seed.answer(Gossip(known=seed.digest())).records == ()  # in step: nothing


def test_goodbyes_are_in_the_digest_so_that_they_are_not_sent_back():
    left = store(Record(A, 2, goodbye=True))
    assert left.digest() == {A.node_id: 2}
    assert left.newer_than({A.node_id: 1}) == [Record(A, 2, goodbye=True)]


# -- untrusted senders -----------------------------------------------------------------------


def at(address: str, n: int, alternate: str | None = None) -> Advert:
    peer = Peer(node_id=f"{n:012x}", address=ipaddress.ip_address(address), port=29630, tf_port=9000)
    alt = ipaddress.ip_address(alternate) if alternate else None
    return Advert(peer=peer, job="job", expect=Size.fixed(3), alternate=alt)


def test_an_untrusted_sender_brings_in_only_its_own_adverts():
    relayed, own = Record(at("10.0.0.9", 1), 1), Record(at("10.0.0.5", 2), 1)
    dual = Record(at("fd00::5", 3, alternate="10.0.0.5"), 1)
    assert AdvertStore(TTL).admit([relayed, own, dual], "10.0.0.5") == [own, dual]


def test_an_address_speaks_for_at_most_max_per_address_nodes_and_newer_records_of_them_pass():
    from rendezvous.core.adverts import MAX_PER_ADDRESS

    mine = [Record(at("10.0.0.5", n), 1) for n in range(MAX_PER_ADDRESS + 3)]
    admitted = AdvertStore(TTL).admit(mine, "10.0.0.5")
    assert admitted == mine[:MAX_PER_ADDRESS]
    full = AdvertStore(TTL).merge(admitted, 0.0).store
    newer = Record(mine[0].advert, 2)
    assert full.admit([newer, mine[-1]], "10.0.0.5") == [newer]


def test_a_store_holds_at_most_max_nodes_nodes(monkeypatch):
    from rendezvous.core import adverts

    monkeypatch.setattr(adverts, "MAX_NODES", 3)
    merged = AdvertStore(TTL).merge([Record(advert(n), 1) for n in range(1, 6)], 0.0)
    assert len(merged.store.entries) == 3 and len(merged.seen) == 3
