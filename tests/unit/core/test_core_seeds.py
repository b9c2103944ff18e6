"""Tests of rendezvous.core.seeds: --peer HOST[:PORT]."""

from __future__ import annotations

import pytest

from rendezvous.core.seeds import DEFAULT_PORT, Seed, lonely_hint, parse_seed


@pytest.mark.parametrize(
    "text, seed",
    [
        ("node-0", Seed("node-0", DEFAULT_PORT)),
        ("train.example.com:7000", Seed("train.example.com", 7000)),
        (" 10.0.0.1 ", Seed("10.0.0.1", DEFAULT_PORT)),
        ("10.0.0.1:7000", Seed("10.0.0.1", 7000)),
        ("fd00::1", Seed("fd00::1", DEFAULT_PORT)),
        ("[fd00::1]", Seed("fd00::1", DEFAULT_PORT)),
        ("[fd00::1]:7000", Seed("fd00::1", 7000)),
    ],
)
def test_seeds_with_and_without_a_port(text, seed):
    assert parse_seed(text) == seed


@pytest.mark.parametrize(
    "text", ["", "host:", "host:0", "host:65536", "host:http", "[fd00::1", "[fd00::1]x", "[host]:7",
             "fd00::1::2", "a b", "-host", "host/24", "[fd00::1]:0"],
)
def test_what_is_not_a_seed(text):
    with pytest.raises(ValueError):
        parse_seed(text)


def test_endpoints_bracket_ipv6_addresses():
    assert Seed("seeds", 7000).endpoint("fd00::2") == "[fd00::2]:7000"
    assert Seed("seeds", 7000).endpoint("10.0.0.2") == "10.0.0.2:7000"
    assert str(Seed("fd00::1")) == f"[fd00::1]:{DEFAULT_PORT}"


def test_the_hint_without_seeds_says_multicast_may_be_blocked_and_how_to_give_seeds():
    hint = lonely_hint(10, (), multicast=True)
    assert hint.startswith("no peer seen for 10s: multicast may be blocked") and "--peer HOST" in hint


def test_the_hint_of_a_node_with_neither_multicast_nor_seeds_says_who_can_find_it():
    hint = lonely_hint(10, (), multicast=False)
    assert "with --discovery unicast and no --peer" in hint and "multicast" not in hint
    assert f"TCP port {DEFAULT_PORT}" in hint


def test_the_hint_with_seeds_names_them_and_the_port():
    hint = lonely_hint(10, (Seed("a"), Seed("fd00::1", 7000)), multicast=False)
    assert f"no seed answered (a:{DEFAULT_PORT}, [fd00::1]:7000)" in hint and "multicast" not in hint
    assert "multicast may be blocked" in lonely_hint(10, (Seed("a"),), multicast=True)
