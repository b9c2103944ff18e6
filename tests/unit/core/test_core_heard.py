"""core.heard: when peers were last heard from, and which are silent for the status."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.heard import Heard

AFTER = 5.0


def test_a_peer_heard_recently_is_not_silent_even_when_missed():
    heard = Heard().hear(["b"], 10.0).miss(["b"], 12.0)
    assert heard.silent(14.0, AFTER) == {}
    assert heard.silent(15.5, AFTER) == {"b": 5.5}


def test_a_peer_never_missed_is_never_silent():
    """Nothing was expected of it (a waiting peer nobody asks): its old advert still counts."""
    assert Heard().hear(["b"], 0.0).silent(1000.0, AFTER) == {}


def test_hearing_again_ends_the_silence():
    heard = Heard().hear(["b", "c"], 0.0).miss(["b", "c"], 1.0)
    assert set(heard.silent(10.0, AFTER)) == {"b", "c"}
    assert heard.hear(["b"], 10.0).silent(10.0, AFTER) == {"c": 10.0}


def test_a_peer_missed_but_never_heard_is_silent_from_its_first_miss():
    heard = Heard().miss(["b"], 3.0).miss(["b"], 7.0)
    assert heard.silent(8.5, AFTER) == {"b": 5.5}


def test_stale_peers_and_when_the_next_one_goes_stale():
    heard = Heard().hear(["b"], 0.0).hear(["c"], 3.0)
    assert heard.stale(["b", "c", "never"], 4.0, AFTER) == []
    assert heard.next_stale(["b", "c", "never"], 4.0, AFTER) == 5.0
    assert heard.stale(["b", "c"], 5.0, AFTER) == ["b"]
    assert heard.next_stale(["b", "c"], 5.0, AFTER) == 8.0
    assert heard.next_stale(["b", "c"], 9.0, AFTER) is None


def test_nothing_heard_or_missed_changes_nothing():
    heard = Heard().hear(["b"], 1.0)
    assert heard.hear([], 2.0) is heard
    assert heard.miss(["b"], 2.0).miss(["b"], 3.0) == heard.miss(["b"], 2.0)


events = st.lists(st.tuples(st.sampled_from(["hear", "miss"]), st.sampled_from("abc"),
                            st.floats(0, 100, allow_nan=False)), max_size=30)


@given(events, st.floats(0, 200, allow_nan=False))
def test_silent_peers_were_missed_and_not_heard_for_longer_than_after(steps, later):
    heard, last_heard, missed_since = Heard(), {}, {}
    now = 0.0
    for kind, node, dt in steps:
        now += dt
        if kind == "hear":
            heard, last_heard[node] = heard.hear([node], now), now
            missed_since.pop(node, None)
        else:
            heard = heard.miss([node], now)
            missed_since.setdefault(node, now)
    now += later
    silent = heard.silent(now, AFTER)
    for node, age in silent.items():
        assert node in missed_since and age > AFTER
        assert age == now - last_heard.get(node, missed_since[node])
    for node in set(missed_since) - set(silent):
        assert now - last_heard.get(node, missed_since[node]) <= AFTER


def test_only_the_views_peers_are_remembered():
    heard = Heard().hear(["a", "b"], 1.0).miss(["b", "c"], 2.0)
    kept = heard.only(["b"])
    assert dict(kept.last) == {"b": 1.0} and dict(kept.missed) == {"b": 2.0}
    assert kept.only(["b", "z"]) is kept  # nothing to forget: the same record
