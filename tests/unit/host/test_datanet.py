"""Tests of rendezvous.host.datanet: which address and interface --data-interface and
--data-address name, and what a bad one says (exit status 5, the interfaces listed)."""

from __future__ import annotations

import ipaddress

import pytest

from rendezvous.errors import AddressError
from rendezvous.host.datanet import choose_data_address, select_data_address

ADAPTERS = {
    "lo": ["127.0.0.1/8"],
    "eth0": ["10.0.0.2/24"],
    "eth1": ["fe80::1/64", "192.168.9.2/24", "fd00:9::2/64"],
    "ib0": ["fe80::2/64", "fd00:7::2/64"],
    "eth2": [],
}


def test_neither_option_no_data_network():
    assert select_data_address(ADAPTERS) is None
    assert choose_data_address() is None


@pytest.mark.parametrize("address, interface, chosen, on", [
    (None, "eth1", "192.168.9.2", "eth1"),  # IPv4 first
    (None, "ib0", "fd00:7::2", "ib0"),  # else IPv6 that is not link-local
    ("192.168.9.2", None, "192.168.9.2", "eth1"),
    ("fd00:9::2", "eth1", "fd00:9::2", "eth1"),
])
def test_the_data_address_and_its_interface(address, interface, chosen, on):
    choice = select_data_address(ADAPTERS, address, interface)
    assert choice is not None and (choice.address, choice.interface) == (ipaddress.ip_address(chosen), on)


@pytest.mark.parametrize("address, interface, says", [
    ("192.168.9.99", None, "--data-address 192.168.9.99 is not assigned to any interface of this machine"),
    (None, "eth9", "--data-interface 'eth9' does not exist"),
    (None, "eth2", "--data-interface eth2 has no usable address"),
    ("192.168.9.2", "eth0", "--data-address 192.168.9.2 is on interface eth1, not on --data-interface eth0"),
    ("192.168.9.2", "eth9", "--data-interface 'eth9' does not exist"),
    ("eth1", None, "--data-address 'eth1' is not a valid IP address"),
    ("0.0.0.0", None, "--data-address 0.0.0.0 cannot be reached"),
    ("fe80::1", None, "--data-address fe80::1 cannot be reached"),
])
def test_a_bad_data_network_is_refused_listing_the_interfaces(address, interface, says):
    with pytest.raises(AddressError) as info:
        select_data_address(ADAPTERS, address, interface)
    assert str(info.value).startswith(says)
    assert info.value.exit_code == 5
    if "valid IP" not in says:
        assert "eth0 (10.0.0.2)" in str(info.value) and "eth1 (fe80::1, 192.168.9.2, fd00:9::2)" in str(info.value)


def test_this_machines_loopback_is_a_data_address_it_has():
    choice = choose_data_address("127.0.0.1")
    assert choice is not None and choice.interface == "lo"
    choice = select_data_address(ADAPTERS, "127.0.0.7")  # lo holds 127.0.0.0/8
    assert choice is not None and (str(choice.address), choice.interface) == ("127.0.0.7", "lo")
    with pytest.raises(AddressError, match="not assigned to any interface"):
        choose_data_address("192.0.2.77")
