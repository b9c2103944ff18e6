"""Tests of rendezvous.core.peer: peers as ordered values, and the election."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core.peer import (
    NODE_ID_PATTERN,
    Peer,
    describe_peers,
    elect_coordinator,
    parse_address,
    parse_grpc_peer,
    same_host,
)
from rendezvous.core.record import FrozenError

ip = ipaddress.ip_address


def peer(address: str, port: int = 7000, node_id: str = "aaaaaaaa", tf_port: int = 9000) -> Peer:
    return Peer(node_id=node_id, address=ip(address), port=port, tf_port=tf_port)


# --------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------

node_ids = st.from_regex(r"[0-9a-f]{8,32}", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)
ipv4s = st.ip_addresses(v=4)
ipv6s = st.ip_addresses(v=6)
addresses = st.one_of(ipv4s, ipv6s)
peers = st.builds(Peer, node_id=node_ids, address=addresses, port=ports, tf_port=ports)


# --------------------------------------------------------------------------
# parse_address
# --------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["10.0.0.1", "192.168.1.10", "0.0.0.0", "::1", "fe80::1", "2001:db8::20"])
def test_parse_address_accepts_numeric_addresses(text):
    assert parse_address(text) == ip(text)


@pytest.mark.parametrize(
    "text", ["", "localhost", "example.com", "10.0.0.256", "10.0.0", "10.0.0.1.2", " 10.0.0.1", "10.0.0.1:80", "[::1]", "::g"]
)
def test_parse_address_refuses_names_and_junk_naming_the_input(text):
    with pytest.raises(ValueError) as info:
        parse_address(text)
    assert repr(text) in str(info.value)


# --------------------------------------------------------------------------
# Peer validation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("node_id", ["0" * 8, "f" * 32, "0123456789abcdef", "deadbeef"])
def test_valid_node_ids(node_id):
    assert peer("10.0.0.1", node_id=node_id).node_id == node_id


@pytest.mark.parametrize(
    "node_id", ["", "a" * 7, "a" * 33, "DEADBEEF", "deadbeeg", "dead beef", "dead-beef", " deadbeef", "deadbeef "]
)
def test_invalid_node_ids_are_refused(node_id):
    with pytest.raises(ValueError) as info:
        peer("10.0.0.1", node_id=node_id)
    assert repr(node_id) in str(info.value)


def test_node_id_with_a_trailing_newline_is_refused():
    # "8-32 lowercase hex digits": a trailing newline is not a hex digit. (`$` in the
    # pattern also matches just before a final "\n", so re.match lets it through.)
    with pytest.raises(ValueError):
        peer("10.0.0.1", node_id="deadbeef\n")


def test_node_id_pattern_matches_exactly_the_documented_ids():
    assert NODE_ID_PATTERN.match("deadbeef")
    assert not NODE_ID_PATTERN.match("deadbee")


def test_address_must_be_an_ipaddress_object():
    with pytest.raises(TypeError):
        Peer(node_id="deadbeef", address="10.0.0.1", port=1, tf_port=2)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["port", "tf_port"])
@pytest.mark.parametrize("value", [0, -1, 65536, 100000])
def test_ports_out_of_range_are_refused_naming_field_and_value(field, value):
    kwargs = {"node_id": "deadbeef", "address": ip("10.0.0.1"), "port": 1, "tf_port": 1, field: value}
    with pytest.raises(ValueError) as info:
        Peer(**kwargs)
    assert field in str(info.value)
    assert str(value) in str(info.value)


@pytest.mark.parametrize("value", [1, 65535])
def test_port_bounds_are_accepted(value):
    p = Peer(node_id="deadbeef", address=ip("10.0.0.1"), port=value, tf_port=value)
    assert (p.port, p.tf_port) == (value, value)


def test_peer_is_frozen_and_hashable():
    p = peer("10.0.0.1")
    with pytest.raises(FrozenError):
        p.port = 1  # type: ignore[misc]
    assert {p, peer("10.0.0.1")} == {p}
    assert p == peer("10.0.0.1")
    assert p != peer("10.0.0.1", tf_port=9001)


# --------------------------------------------------------------------------
# Ordering: numeric, not string order
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "low, high",
    [
        ("10.0.0.9", "10.0.0.10"),
        ("10.0.0.10", "10.0.0.100"),
        ("10.0.0.9", "10.0.0.100"),
        ("9.255.255.255", "10.0.0.0"),
        ("9.0.0.1", "10.0.0.1"),
        ("192.168.1.2", "192.168.1.10"),
        ("192.168.1.99", "192.168.1.100"),
        ("2.0.0.0", "10.0.0.0"),
        ("10.0.0.255", "10.0.1.0"),
        ("fe80::9", "fe80::10"),
        ("2001:db8::a", "2001:db8::1:0"),
    ],
)
def test_numeric_address_order_where_string_order_differs(low, high):
    a, b = peer(low, node_id="ffffffff", port=65535), peer(high, node_id="00000000", port=1)
    assert a < b and b > a
    assert a <= b and b >= a
    assert not b < a
    assert sorted([b, a]) == [a, b]
    assert elect_coordinator([b, a]) == a


def test_sorting_a_mixed_list_is_numeric():
    texts = ["10.0.0.100", "10.0.0.10", "9.1.1.1", "10.0.0.9", "192.168.1.10", "192.168.1.2", "10.0.0.1"]
    ordered = sorted(peer(t, node_id=f"{i:08x}") for i, t in enumerate(texts))
    assert [str(p.address) for p in ordered] == [
        "9.1.1.1",
        "10.0.0.1",
        "10.0.0.9",
        "10.0.0.10",
        "10.0.0.100",
        "192.168.1.2",
        "192.168.1.10",
    ]
    # and string order would have been different
    assert sorted(texts)[0] == "10.0.0.1" and sorted(texts)[-1] == "9.1.1.1"


def test_same_address_orders_by_port_numerically():
    a = peer("10.0.0.1", port=9, node_id="ffffffff")
    b = peer("10.0.0.1", port=10, node_id="00000000")
    c = peer("10.0.0.1", port=100, node_id="00000000")
    assert sorted([c, b, a]) == [a, b, c]


def test_same_address_and_port_orders_by_node_id():
    a = peer("10.0.0.1", node_id="0000000a")
    b = peer("10.0.0.1", node_id="000000ff")
    c = peer("10.0.0.1", node_id="ff000000")
    assert sorted([c, a, b]) == [a, b, c]


def test_address_wins_over_port_and_node_id():
    low = peer("10.0.0.2", port=65535, node_id="ffffffff")
    high = peer("10.0.0.10", port=1, node_id="00000000")
    assert low < high


def test_tf_port_does_not_order_peers():
    a = peer("10.0.0.1", tf_port=1)
    b = peer("10.0.0.1", tf_port=2)
    assert not a < b and not b < a
    assert a.sort_key == b.sort_key


@pytest.mark.parametrize("v6", ["::1", "::", "::ffff:0.0.0.1", "fe80::1", "2001:db8::1"])
def test_every_ipv4_sorts_before_every_ipv6(v6):
    # ::1 is numerically 1, far below 10.0.0.1; IPv4 still comes first
    v4 = peer("255.255.255.255", port=65535, node_id="ffffffff")
    six = peer(v6, port=1, node_id="00000000")
    assert v4 < six
    assert elect_coordinator([six, v4]) == v4


def test_comparison_with_non_peer_is_not_supported():
    with pytest.raises(TypeError):
        peer("10.0.0.1") < 5  # noqa: B015
    assert peer("10.0.0.1") != "10.0.0.1"


@settings(deadline=None)
@given(st.lists(ipv4s, min_size=1, max_size=20, unique=True))
def test_ipv4_order_agrees_with_dotted_quad_octets(addrs):
    ps = [Peer(node_id=f"{i:08x}", address=a, port=1, tf_port=1) for i, a in enumerate(addrs)]
    octets = lambda p: tuple(int(x) for x in str(p.address).split("."))  # noqa: E731
    assert [octets(p) for p in sorted(ps)] == sorted(octets(p) for p in ps)


@settings(deadline=None)
@given(st.lists(ipv6s, min_size=1, max_size=20, unique=True))
def test_ipv6_order_agrees_with_packed_bytes(addrs):
    ps = [Peer(node_id=f"{i:08x}", address=a, port=1, tf_port=1) for i, a in enumerate(addrs)]
    assert [p.address.packed for p in sorted(ps)] == sorted(p.address.packed for p in ps)


@settings(deadline=None)
@given(peers, peers)
def test_order_is_total_and_consistent(a, b):
    if a.sort_key == b.sort_key:
        assert not a < b and not b < a
    else:
        assert (a < b) != (b < a)
        assert (a < b) == (b > a)
    if a.address.version != b.address.version:
        assert (a < b) == (a.address.version == 4)


@settings(deadline=None)
@given(peers, peers, peers)
def test_order_is_transitive(a, b, c):
    if a < b and b < c:
        assert a < c


# --------------------------------------------------------------------------
# Endpoints
# --------------------------------------------------------------------------


def test_ipv4_endpoints():
    p = peer("10.0.0.7", port=7000, tf_port=9000)
    assert p.host == "10.0.0.7"
    assert p.endpoint == "10.0.0.7:7000"
    assert p.tf_endpoint == "10.0.0.7:9000"


@pytest.mark.parametrize("text, host", [("::1", "[::1]"), ("2001:db8::20", "[2001:db8::20]"), ("fe80::1", "[fe80::1]")])
def test_ipv6_endpoints_are_bracketed(text, host):
    p = peer(text, port=7000, tf_port=9000)
    assert p.host == host
    assert p.endpoint == f"{host}:7000"
    assert p.tf_endpoint == f"{host}:9000"


def test_describe_names_address_and_node_id():
    assert peer("10.0.0.7", node_id="deadbeef").describe() == "10.0.0.7 (deadbeef)"
    assert peer("::1", node_id="deadbeef").describe() == "::1 (deadbeef)"


# --------------------------------------------------------------------------
# Election
# --------------------------------------------------------------------------


def test_elect_single_peer():
    p = peer("10.0.0.5")
    assert elect_coordinator([p]) == p


def test_elect_lowest_numeric_address():
    ps = [peer("10.0.0.10", node_id="00000001"), peer("10.0.0.9", node_id="00000002"), peer("10.0.0.100", node_id="00000003")]
    assert elect_coordinator(ps).address == ip("10.0.0.9")


def test_elect_accepts_any_iterable():
    ps = [peer("10.0.0.2", node_id="00000001"), peer("10.0.0.1", node_id="00000002")]
    assert elect_coordinator(p for p in ps) == ps[1]
    assert elect_coordinator(frozenset(ps)) == ps[1]


def test_elect_among_no_peers_is_a_value_error():
    with pytest.raises(ValueError, match="no peers"):
        elect_coordinator([])


@settings(deadline=None)
@given(st.lists(peers, min_size=1, max_size=12))
def test_elected_is_not_above_anyone(ps):
    chosen = elect_coordinator(ps)
    assert chosen in ps
    assert all(not p < chosen for p in ps)


@settings(deadline=None)
@given(st.lists(peers, min_size=1, max_size=12, unique_by=lambda p: p.node_id), st.randoms())
def test_election_does_not_depend_on_input_order(ps, rnd):
    shuffled = list(ps)
    rnd.shuffle(shuffled)
    assert elect_coordinator(shuffled) == elect_coordinator(ps)


# --------------------------------------------------------------------------
# describe_peers
# --------------------------------------------------------------------------


def test_describe_peers_sorted_numerically():
    ps = [peer("10.0.0.10", node_id="0000000a"), peer("10.0.0.9", node_id="00000009")]
    assert describe_peers(ps) == "10.0.0.9 (00000009), 10.0.0.10 (0000000a)"


def test_describe_no_peers():
    assert describe_peers([]) == "none"


# --------------------------------------------------------------------------
# the caller's address (gRPC's context.peer()) against the claimed one
# --------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text, address",
    [
        ("ipv4:10.0.0.1:5000", "10.0.0.1"),
        ("ipv6:[::1]:5000", "::1"),
        ("ipv6:%5B::ffff:10.0.0.1%5D:5000", "::ffff:10.0.0.1"),
        ("ipv6:[fe80::1%eth0]:5000", "fe80::1"),
    ],
)
def test_parse_grpc_peer(text, address):
    assert parse_grpc_peer(text) == ipaddress.ip_address(address)


@pytest.mark.parametrize("text", ["unix:/tmp/sock", "ipv4:host:1", "", "ipv4:", "ipv6:[zz]:1"])
def test_parse_grpc_peer_refuses_anything_but_an_ip_caller(text):
    with pytest.raises(ValueError):
        parse_grpc_peer(text)


@given(st.text(max_size=80))
def test_parse_grpc_peer_raises_only_value_error(text):
    try:
        parse_grpc_peer(text)
    except ValueError:
        pass


@pytest.mark.parametrize(
    "claimed, source, same",
    [
        ("10.0.0.1", "10.0.0.1", True),
        ("10.0.0.1", "::ffff:10.0.0.1", True),
        ("127.0.0.5", "127.0.0.1", True),  # loopback: the kernel picks 127.0.0.1
        ("10.0.0.1", "10.0.0.2", False),
        ("10.0.0.1", "127.0.0.1", False),
        ("127.0.0.1", "10.0.0.1", False),
    ],
)
def test_same_host(claimed, source, same):
    assert same_host(ipaddress.ip_address(claimed), ipaddress.ip_address(source)) is same
