"""Tests of rendezvous.host.address: the pure selection over plain data, plus two real reads."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.host.address import (
    EXCLUDED_PREFIXES,
    AddressChoice,
    Route,
    choose_address,
    default_route,
    excluded_prefix,
    is_usable_ipv4,
    is_usable_ipv6,
    parse_ipv6_routes,
    parse_routes,
    read_adapters,
    select_address,
)
from rendezvous.errors import AddressError, RendezvousError
from rendezvous.core.record import FrozenError

ip = ipaddress.ip_address


def default(iface: str, metric: int = 0, gateway: str = "0.0.0.0", flags: int = 0x3) -> Route:
    return Route(iface, ipaddress.IPv4Network("0.0.0.0/0"), ipaddress.IPv4Address(gateway), metric, flags)


def link(iface: str, net: str, metric: int = 0) -> Route:
    return Route(iface, ipaddress.IPv4Network(net), ipaddress.IPv4Address(0), metric, 0x1)


LAPTOP = {
    "lo": ["127.0.0.1/8", "::1/128"],
    "eth0": ["192.168.1.20/24", "fe80::1/64", "2001:db8::20/64"],
    "docker0": ["172.17.0.1/16"],
}


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def test_address_error_is_a_rendezvous_error_with_exit_code_5():
    assert issubclass(AddressError, RendezvousError)
    assert AddressError.exit_code == 5


def test_choice_is_frozen():
    choice = select_address(LAPTOP, [default("eth0")])
    with pytest.raises(FrozenError):
        choice.address = ip("10.0.0.1")  # type: ignore[misc]


# --------------------------------------------------------------------------
# /proc/net/route parsing
# --------------------------------------------------------------------------

ROUTE_TEXT = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0
eth0\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
"""


def test_parse_routes_decodes_little_endian_hex():
    routes = parse_routes(ROUTE_TEXT)
    assert [r.interface for r in routes] == ["wlan0", "eth0", "eth0", "docker0"]
    assert routes[0].gateway == ip("192.168.1.1")
    assert routes[0].metric == 600
    assert routes[0].is_default
    assert routes[1].gateway == ip("10.0.0.1")
    assert routes[2].destination == ipaddress.IPv4Network("10.0.0.0/24")
    assert not routes[2].is_default
    assert routes[3].destination == ipaddress.IPv4Network("172.17.0.0/16")


def test_parse_routes_ignores_junk_lines_and_empty_text():
    assert parse_routes("") == []
    text = ROUTE_TEXT.splitlines()[0] + "\nshort line\neth0\tZZZZZZZZ\t0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
    assert parse_routes(text) == []


def test_parse_routes_real_file_shape():
    # The header of the real file has trailing blanks and a "Gateway " column name.
    text = (
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT   \n"
        "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0      \n"
    )
    (route,) = parse_routes(text)
    assert route == default("eth0", 0, "192.0.2.1")


def test_default_route_lowest_metric_wins_first_on_tie():
    routes = parse_routes(ROUTE_TEXT)
    assert default_route(routes).interface == "eth0"
    assert default_route([default("a", 5), default("b", 5)]).interface == "a"
    assert default_route([link("eth0", "10.0.0.0/24")]) is None
    assert default_route([]) is None


def test_default_route_that_is_down_is_ignored():
    assert default_route([default("eth0", 0, flags=0x2), default("eth1", 50)]).interface == "eth1"


# --------------------------------------------------------------------------
# Automatic choice
# --------------------------------------------------------------------------


def test_default_route_interface_is_chosen():
    choice = select_address(LAPTOP, [default("eth0")])
    assert choice == AddressChoice(ip("192.168.1.20"), "eth0", "interface eth0 carries the default route")


def test_lowest_metric_default_route_decides_the_interface():
    adapters = {"eth0": ["10.0.0.5/24"], "wlan0": ["192.168.1.5/24"]}
    routes = [default("eth0", 600), default("wlan0", 100)]
    assert select_address(adapters, routes).interface == "wlan0"
    routes = [default("eth0", 100), default("wlan0", 600)]
    assert select_address(adapters, routes).interface == "eth0"


def test_address_in_the_gateways_subnet_is_preferred():
    adapters = {"eth0": ["172.16.5.5/24", "10.1.2.3/16"]}
    choice = select_address(adapters, [default("eth0", gateway="10.1.0.1")])
    assert choice.address == ip("10.1.2.3")
    # Without a gateway: the first usable one.
    assert select_address(adapters, [default("eth0")]).address == ip("172.16.5.5")


def test_default_route_on_excluded_interface_falls_back():
    adapters = {"lo": ["127.0.0.1/8"], "docker0": ["172.17.0.1/16"], "eth1": ["10.9.0.2/24"]}
    choice = select_address(adapters, [default("docker0")])
    assert choice.address == ip("10.9.0.2")
    assert choice.interface == "eth1"
    assert "docker0" in choice.reason and "first" in choice.reason


def test_default_route_on_loopback_falls_back():
    adapters = {"lo": ["127.0.0.1/8"], "eth0": ["10.0.0.2/24"]}
    choice = select_address(adapters, [default("lo")])
    assert choice.interface == "eth0"


def test_no_default_route_falls_back_to_first_usable_interface():
    adapters = {
        "lo": ["127.0.0.1/8"],
        "veth1234": ["10.200.0.1/24"],
        "ens3": ["fe80::1/64"],
        "ens4": ["169.254.3.4/16"],
        "ens5": ["10.0.0.7/24"],
        "ens6": ["10.0.1.7/24"],
    }
    choice = select_address(adapters, [link("ens5", "10.0.0.0/24")])
    assert choice.address == ip("10.0.0.7")
    assert choice.interface == "ens5"
    assert "no IPv4 default route" in choice.reason


def test_default_route_interface_without_usable_ipv4_falls_back():
    adapters = {"eth0": ["169.254.1.1/16", "2001:db8::1/64"], "eth1": ["192.168.7.7/24"]}
    choice = select_address(adapters, [default("eth0")])
    assert choice.interface == "eth1"


def test_default_route_on_interface_missing_from_adapters_falls_back():
    choice = select_address({"eth1": ["192.168.7.7/24"]}, [default("ppp0")])
    assert choice.interface == "eth1"
    assert "ppp0" in choice.reason


IPV6_ROUTE_TEXT = """\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 00000400 00000003 00000000 00000003     eth0
00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
junk
"""


def default6(iface: str, metric: int = 1024) -> Route:
    return Route(iface, ipaddress.IPv6Network("::/0"), ipaddress.IPv6Address(0), metric, 0x3)


def test_parse_ipv6_routes_reads_the_default_route_and_its_next_hop():
    routes = parse_ipv6_routes(IPV6_ROUTE_TEXT)
    assert [r.interface for r in routes] == ["eth0", "eth0", "lo"]
    assert routes[1].gateway == ip("fd00::1") and routes[1].metric == 1024
    # the unreachable default route on lo (RTF_REJECT) is no default route
    assert default_route(routes, 6) == routes[1] and default_route(routes) is None


def test_an_ipv6_only_host_uses_a_ula_or_global_address_of_the_ipv6_default_route():
    adapters = {"lo": ["127.0.0.1/8", "::1/128"], "eth0": ["fe80::2/64", "fd00::2/64", "2001:db8::2/64"]}
    choice = select_address(adapters, [default6("eth0")])
    assert choice.address == ip("fd00::2") and "IPv6 default route" in choice.reason


def test_ipv4_wins_over_ipv6_on_a_dual_stack_host():
    assert select_address(LAPTOP, [default6("eth0"), default("eth0")]).address == ip("192.168.1.20")


DUAL = {"lo": ["127.0.0.1/8", "::1/128"], "eth0": ["192.168.1.20/24", "fe80::1/64", "2a01:4f8::20/64"]}


def test_a_dual_stack_host_also_knows_its_ipv6_address_on_the_same_interface():
    choice = select_address(DUAL, [default6("eth0"), default("eth0")])
    assert choice.address == ip("192.168.1.20") and choice.alternate == ip("2a01:4f8::20")
    assert select_address(LAPTOP, [default("eth0")]).alternate is None  # 2001:db8::/32 is for documentation


def test_the_alternate_may_be_on_the_ipv6_default_routes_interface():
    adapters = {"eth0": ["10.0.0.2/24"], "eth1": ["fe80::3/64", "fd00::3/64"]}
    choice = select_address(adapters, [default("eth0"), default6("eth1")])
    assert (choice.interface, choice.alternate) == ("eth0", ip("fd00::3"))


def test_the_alternate_is_never_link_local_loopback_or_on_an_excluded_interface():
    adapters = {"lo": ["::1/128"], "eth0": ["10.0.0.2/24", "fe80::2/64"], "docker0": ["fd00::9/64"]}
    assert select_address(adapters, [default("eth0"), default6("docker0")]).alternate is None
    assert select_address(adapters, [default("eth0"), default6("lo")]).alternate is None


def test_an_ipv6_only_host_has_no_alternate():
    adapters = {"eth0": ["fe80::2/64", "fd00::2/64"]}
    assert select_address(adapters, [default6("eth0")]).alternate is None


def test_an_ipv6_primary_takes_a_usable_ipv4_of_its_interface_as_alternate():
    adapters = {"eth0": ["169.254.0.2/16", "fd00::2/64"], "eth1": ["10.1.0.2/24"]}
    choice = select_address(adapters, [default6("eth0")])
    assert (choice.address, choice.alternate) == (ip("fd00::2"), None)  # link-local IPv4 is no alternate
    # the IPv4 default route is on an interface that is gone
    choice = select_address({"eth0": ["fd00::2/64", "10.1.0.2/24"]}, [default("eth1"), default6("eth0")])
    assert (choice.address, choice.alternate) == (ip("fd00::2"), ip("10.1.0.2"))


def test_an_interface_given_gives_its_ipv6_address_as_alternate():
    choice = select_address(DUAL, [], interface="eth0")
    assert (choice.address, choice.alternate) == (ip("192.168.1.20"), ip("2a01:4f8::20"))


@pytest.mark.parametrize("address", ["192.168.1.20", "2a01:4f8::20"])
def test_an_address_given_pins_the_family(address):
    assert select_address(DUAL, [default6("eth0"), default("eth0")], address=address).alternate is None


def test_an_ipv6_default_route_without_a_usable_ipv6_address_falls_back_to_ipv4():
    adapters = {"eth0": ["fe80::2/64"], "eth1": ["192.168.7.7/24"]}
    assert select_address(adapters, [default6("eth0")]).interface == "eth1"


def test_global_ipv4_is_usable():
    choice = select_address({"eth0": ["8.8.4.4/24"]}, [default("eth0")])
    assert choice.address == ip("8.8.4.4")


def test_ipv6_only_host_needs_an_explicit_choice():
    adapters = {"lo": ["127.0.0.1/8", "::1/128"], "eth0": ["2001:db8::5/64", "fe80::5/64"]}
    with pytest.raises(AddressError) as e:
        select_address(adapters, [])
    msg = str(e.value)
    assert "eth0: no private or global IPv4 address (2001:db8::5, fe80::5)" in msg
    assert "--address" in msg and "--interface" in msg
    assert select_address(adapters, [], interface="eth0").address == ip("2001:db8::5")


def test_nothing_usable_lists_every_candidate_and_why():
    adapters = {
        "lo": ["127.0.0.1/8"],
        "docker0": ["172.17.0.1/16"],
        "br-0123456789ab": ["172.18.0.1/16"],
        "virbr0": ["192.168.122.1/24"],
        "eth0": [],
    }
    with pytest.raises(AddressError) as e:
        select_address(adapters, [default("docker0")])
    msg = str(e.value)
    assert "the default route is on docker0" in msg
    assert "lo: loopback" in msg
    assert "docker0: container/VM/tunnel interface (name starts with 'docker')" in msg
    assert "br-0123456789ab: container/VM/tunnel interface (name starts with 'br-')" in msg
    assert "virbr0: container/VM/tunnel interface (name starts with 'virbr')" in msg
    assert "eth0: no private or global IPv4 address (no address)" in msg
    assert "--address IP or --interface NAME" in msg


def test_no_adapters_at_all():
    with pytest.raises(AddressError, match="no network interface at all"):
        select_address({}, [])


@pytest.mark.parametrize(
    "name",
    [
        "docker0",
        "br-5f3e2a1b9c0d",
        "veth9a8b7c6",
        "virbr0",
        "vnet3",
        "cni0",
        "flannel.1",
        "cali123abc",
        "cilium_host",
        "weave",
        "kube-ipvs0",
        "vxlan.calico",
        "lxcbr0",
        "lxdbr0",
        "podman0",
        "tun0",
        "tap0",
        "wg0",
        "tailscale0",
    ],
)
def test_excluded_interface_names_are_never_picked_automatically(name):
    assert excluded_prefix(name) is not None
    adapters = {name: ["10.50.0.1/24"], "eth0": ["192.168.0.9/24"]}
    assert select_address(adapters, [default(name)]).interface == "eth0"
    with pytest.raises(AddressError, match="container/VM/tunnel"):
        select_address({name: ["10.50.0.1/24"]}, [default(name)])
    # ... but they are taken when asked for.
    assert select_address(adapters, [], interface=name).address == ip("10.50.0.1")
    assert select_address(adapters, [], address="10.50.0.1").interface == name


@pytest.mark.parametrize(
    "name", ["eth0", "ens3", "enp0s31f6", "eno1", "wlan0", "wlp2s0", "bond0", "br0", "ib0", "em1", "team0"]
)
def test_ordinary_interface_names_are_not_excluded(name):
    assert excluded_prefix(name) is None
    assert select_address({name: ["10.1.1.1/24"]}, [default(name)]).interface == name


def test_excluded_prefixes_are_lowercase_and_unique():
    assert len(set(EXCLUDED_PREFIXES)) == len(EXCLUDED_PREFIXES)
    assert all(p == p.lower() and p for p in EXCLUDED_PREFIXES)


def test_loopback_adapter_with_another_name_is_excluded():
    adapters = {"lo0": ["127.0.0.1/8", "::1/128"], "en0": ["192.168.0.3/24"]}
    assert select_address(adapters, [default("lo0")]).interface == "en0"


@pytest.mark.parametrize(
    "value,usable",
    [
        ("10.0.0.1", True),
        ("172.16.0.1", True),
        ("192.168.0.1", True),
        ("100.64.0.1", True),
        ("8.8.8.8", True),
        ("127.0.0.1", False),
        ("169.254.0.1", False),
        ("224.0.0.251", False),
        ("0.0.0.0", False),
        ("240.0.0.1", False),
        ("::1", False),
        ("2001:db8::1", False),
    ],
)
def test_is_usable_ipv4(value, usable):
    assert is_usable_ipv4(ip(value)) is usable


# --------------------------------------------------------------------------
# --address
# --------------------------------------------------------------------------


def test_address_given_is_found_on_its_interface():
    choice = select_address(LAPTOP, [default("eth0")], address="192.168.1.20")
    assert choice == AddressChoice(ip("192.168.1.20"), "eth0", "given with --address, on interface eth0")


def test_address_given_wins_over_default_route():
    adapters = {"eth0": ["10.0.0.1/24"], "eth1": ["10.0.1.1/24"]}
    assert select_address(adapters, [default("eth0")], address="10.0.1.1").interface == "eth1"


def test_address_on_excluded_interface_is_accepted_when_asked():
    choice = select_address(LAPTOP, [default("eth0")], address="172.17.0.1")
    assert choice.interface == "docker0"


@pytest.mark.parametrize("value", ["127.0.0.1", "127.0.0.2", "127.0.0.17", "127.255.255.254"])
def test_loopback_address_is_allowed_when_asked(value):
    # Linux routes all of 127.0.0.0/8 to lo though only 127.0.0.1 is listed.
    choice = select_address(LAPTOP, [], address=value)
    assert choice.address == ip(value)
    assert choice.interface == "lo"
    assert "--address" in choice.reason


def test_loopback_address_outside_lo_networks_is_refused():
    adapters = {"lo": ["127.0.0.1/32"], "eth0": ["10.0.0.1/24"]}
    with pytest.raises(AddressError, match="127.0.0.2"):
        select_address(adapters, [], address="127.0.0.2")


def test_ipv6_loopback_address():
    assert select_address(LAPTOP, [], address="::1").interface == "lo"


def test_ipv6_global_address():
    choice = select_address(LAPTOP, [], address="2001:db8::20")
    assert choice.address == ip("2001:db8::20")
    assert choice.interface == "eth0"


def test_ipv6_link_local_address_gets_its_zone():
    choice = select_address(LAPTOP, [], address="fe80::1")
    assert str(choice.address) == "fe80::1%eth0"
    assert choice.interface == "eth0"
    assert str(select_address(LAPTOP, [], address="fe80::1%eth0").address) == "fe80::1%eth0"


def test_ipv6_link_local_address_with_wrong_zone_is_refused():
    with pytest.raises(AddressError, match="not assigned"):
        select_address(LAPTOP, [], address="fe80::1%wlan0")


def test_address_objects_are_accepted():
    assert select_address(LAPTOP, [], address=ip("192.168.1.20")).interface == "eth0"


def test_address_with_surrounding_blanks():
    assert select_address(LAPTOP, [], address=" 192.168.1.20 ").interface == "eth0"


@pytest.mark.parametrize(
    "value", ["eth0", "192.168.1", "192.168.1.300", "10.0.0.1/24", "localhost", "1.2.3.4.5", "::g", "-"]
)
def test_invalid_address_error_names_the_value(value):
    with pytest.raises(AddressError) as e:
        select_address(LAPTOP, [], address=value)
    assert repr(value) in str(e.value)
    assert "not a valid IP address" in str(e.value)


def test_empty_address_is_an_error():
    with pytest.raises(AddressError, match="--address is empty"):
        select_address(LAPTOP, [], address="")


@pytest.mark.parametrize("value", ["10.0.0.99", "8.8.8.8", "2001:db8::99", "fe80::99"])
def test_address_not_on_this_machine_names_it_and_lists_local_ones(value):
    with pytest.raises(AddressError) as e:
        select_address(LAPTOP, [default("eth0")], address=value)
    msg = str(e.value)
    assert value in msg and "not assigned" in msg
    assert "eth0 (192.168.1.20, fe80::1, 2001:db8::20)" in msg


@pytest.mark.parametrize("value,word", [("0.0.0.0", "unspecified"), ("::", "unspecified"), ("224.0.0.251", "multicast")])
def test_wildcard_and_multicast_addresses_are_refused(value, word):
    with pytest.raises(AddressError, match=word) as e:
        select_address(LAPTOP, [], address=value)
    assert value in str(e.value)


# --------------------------------------------------------------------------
# --interface
# --------------------------------------------------------------------------


def test_interface_given_takes_its_first_ipv4():
    adapters = {"br0": ["fe80::1/64", "10.2.0.1/24", "10.3.0.1/24"], "eth0": ["10.0.0.1/24"]}
    choice = select_address(adapters, [default("eth0")], interface="br0")
    assert choice == AddressChoice(ip("10.2.0.1"), "br0", "interface br0 given with --interface")


def test_interface_given_ipv6_when_no_ipv4_skipping_link_local():
    adapters = {"eth0": ["fe80::1/64", "fd00::7/64", "2001:db8::7/64"]}
    choice = select_address(adapters, [], interface="eth0")
    assert choice.address == ip("fd00::7")
    assert "no IPv4" in choice.reason


def test_interface_with_only_link_local_ipv6_is_an_error():
    adapters = {"eth0": ["fe80::1/64"], "eth1": ["10.0.0.1/24"]}
    with pytest.raises(AddressError) as e:
        select_address(adapters, [], interface="eth0")
    msg = str(e.value)
    assert "eth0" in msg and "no usable address" in msg and "eth1 (10.0.0.1)" in msg


def test_interface_without_any_address_is_an_error():
    with pytest.raises(AddressError, match="eth9 has no usable address"):
        select_address({"eth9": [], "lo": ["127.0.0.1/8"]}, [], interface="eth9")


def test_unknown_interface_error_names_it_and_lists_existing_ones():
    with pytest.raises(AddressError) as e:
        select_address(LAPTOP, [], interface="eth7")
    msg = str(e.value)
    assert "'eth7' does not exist" in msg
    assert "lo (127.0.0.1, ::1)" in msg and "eth0 (" in msg and "docker0 (172.17.0.1)" in msg


def test_loopback_interface_when_asked():
    choice = select_address(LAPTOP, [default("eth0")], interface="lo")
    assert choice.address == ip("127.0.0.1")


def test_empty_interface_is_an_error():
    with pytest.raises(AddressError, match="--interface is empty"):
        select_address(LAPTOP, [], interface="")


# --------------------------------------------------------------------------
# Both
# --------------------------------------------------------------------------


def test_address_and_interface_consistent():
    choice = select_address(LAPTOP, [], address="192.168.1.20", interface="eth0")
    assert choice.address == ip("192.168.1.20")
    assert choice.interface == "eth0"
    assert "--address" in choice.reason and "--interface" in choice.reason


def test_address_and_interface_consistent_loopback_range():
    assert select_address(LAPTOP, [], address="127.0.0.3", interface="lo").interface == "lo"


def test_address_and_interface_inconsistent():
    with pytest.raises(AddressError) as e:
        select_address(LAPTOP, [], address="192.168.1.20", interface="docker0")
    msg = str(e.value)
    assert "192.168.1.20" in msg and "eth0" in msg and "docker0" in msg


def test_address_and_unknown_interface():
    with pytest.raises(AddressError, match="'wlan9' does not exist"):
        select_address(LAPTOP, [], address="192.168.1.20", interface="wlan9")


def test_bad_address_with_interface_reports_the_address():
    with pytest.raises(AddressError, match="not a valid IP"):
        select_address(LAPTOP, [], address="nope", interface="eth0")


# --------------------------------------------------------------------------
# Input forms and properties
# --------------------------------------------------------------------------


def test_adapter_addresses_may_be_strings_without_prefix_or_objects():
    adapters = {
        "eth0": ["10.0.0.1", ipaddress.ip_interface("10.0.1.1/24"), ip("10.0.2.1")],
        "lo": ["127.0.0.1/8"],
    }
    assert select_address(adapters, [default("eth0")]).address == ip("10.0.0.1")
    assert select_address(adapters, [], address="10.0.2.1").interface == "eth0"


def test_select_address_does_not_mutate_its_input():
    adapters = {k: list(v) for k, v in LAPTOP.items()}
    routes = [default("eth0")]
    select_address(adapters, routes)
    assert adapters == LAPTOP and routes == [default("eth0")]


names = st.sampled_from(["eth0", "eth1", "wlan0", "lo", "docker0", "br-abc", "veth0", "tun0", "br0"])
ipv4s = st.ip_addresses(v=4)
ipv6s = st.ip_addresses(v=6)


@given(
    adapters=st.dictionaries(names, st.lists(st.one_of(ipv4s, ipv6s), max_size=4), max_size=6),
    route_ifaces=st.lists(st.tuples(names, st.integers(0, 1000)), max_size=4),
)
def test_automatic_choice_is_always_a_usable_local_ipv4_or_an_address_error(adapters, route_ifaces):
    routes = [default(name, metric) for name, metric in route_ifaces]
    try:
        choice = select_address(adapters, routes)
    except AddressError as e:
        assert "--address" in str(e)
        return
    assert choice.interface in adapters
    assert choice.address in adapters[choice.interface]
    assert is_usable_ipv4(choice.address)
    assert excluded_prefix(choice.interface) is None and choice.interface != "lo"
    best = default_route(routes)
    if best is not None and best.interface == choice.interface:
        assert "default route" in choice.reason
    assert choice.alternate is None or is_usable_ipv6(choice.alternate)


@given(adapters=st.dictionaries(names, st.lists(st.one_of(ipv4s, ipv6s), max_size=4), max_size=6), data=st.data())
def test_any_assigned_address_is_accepted_with_address(adapters, data):
    candidates = [(n, a) for n, ips in adapters.items() for a in ips if not (a.is_unspecified or a.is_multicast)]
    if not candidates:
        return
    name, addr = data.draw(st.sampled_from(candidates))
    choice = select_address(adapters, [], address=str(addr))
    assert str(choice.address).split("%")[0] == str(addr)
    assert addr in adapters[choice.interface]


# --------------------------------------------------------------------------
# Real machine (read-only)
# --------------------------------------------------------------------------


def test_real_loopback_address_is_accepted():
    choice = choose_address(address="127.0.0.1")
    assert choice.address == ip("127.0.0.1")
    assert choice.interface is not None
    assert "--address" in choice.reason


def test_real_unknown_address_is_refused():
    # TEST-NET-3, reserved for documentation: never assigned to a real machine.
    with pytest.raises(AddressError, match="203.0.113.254"):
        choose_address(address="203.0.113.254")


def test_real_adapters_include_loopback():
    adapters = read_adapters()
    assert any(a.ip == ip("127.0.0.1") for ips in adapters.values() for a in ips)
