"""--allow-host: names resolved to every address, and this node's own address among them."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from rendezvous.errors import AddressError
from rendezvous.host.address import choose_address
from rendezvous.host.allowed import choose_allowed_address, resolve_hosts


def answers(*addresses: str) -> list:
    return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in addresses]


def test_every_address_of_every_name_is_allowed() -> None:
    table = {"h1": answers("10.0.0.1"), "svc": answers("10.0.0.2", "10.0.0.3", "fd00::1%eth0")}
    allowed = resolve_hosts(["h1", "svc"], lambda name, port, **kw: table[name])
    assert allowed == {ipaddress.ip_address(a) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "fd00::1")}


def test_a_name_that_does_not_resolve_stops_the_daemon_naming_it() -> None:
    def fail(name, port, **kw):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(AddressError, match="--allow-host h9: does not resolve"):
        resolve_hosts(["h9"], fail)


def test_without_an_address_given_the_node_takes_its_own_among_the_allowed() -> None:
    loopback = frozenset({ipaddress.ip_address("127.0.0.1")})
    assert choose_allowed_address(None, None, loopback).address == ipaddress.ip_address("127.0.0.1")
    assert choose_allowed_address(None, None, None) == choose_address()


def test_an_address_given_is_kept_with_a_warning_when_it_is_not_allowed(caplog) -> None:
    elsewhere = frozenset({ipaddress.ip_address("192.0.2.7")})
    choice = choose_allowed_address("127.0.0.1", None, elsewhere)
    assert choice.address == ipaddress.ip_address("127.0.0.1")
    assert "its peers will refuse it" in caplog.text
