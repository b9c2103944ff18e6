"""rendezvous.host.interfaces: the machine's addresses, read with getifaddrs, are ifaddr's."""

from __future__ import annotations

import json
import sys

import pytest

from netns import Network
from rendezvous.host import interfaces


def grouped(pairs) -> dict[str, list[str]]:
    """Interface name -> its addresses, names in the order they first come."""
    table: dict[str, list[str]] = {}
    for name, iface in pairs:
        table.setdefault(name, []).append(str(iface))
    return table


def test_the_same_addresses_as_ifaddr_in_the_same_order():
    ours, theirs = grouped(interfaces.read()), grouped(interfaces._read_ifaddr())
    assert ours == theirs
    assert list(ours) == list(theirs)
    assert "127.0.0.1/8" in ours["lo"]


# Both readers' raw pairs, read inside a namespace.
COMPARE = """
import json
from rendezvous.host import interfaces
print(json.dumps([[(name, str(iface)) for name, iface in read()] for read in (interfaces.read, interfaces._read_ifaddr)]))
"""


@pytest.mark.netns
def test_aliases_ipv6_only_interfaces_and_point_to_point_addresses_as_ifaddr_reads_them():
    with Network(1) as net:
        host = net.hosts[0]
        for argv in (["addr", "add", "10.213.0.50/24", "dev", "eth0", "label", "eth0:1"],
                     ["link", "add", "d0", "type", "veth", "peer", "name", "d0p"], ["link", "set", "d0", "up"],
                     ["addr", "add", "fd99::5/64", "dev", "d0", "nodad"],
                     ["link", "add", "d1", "type", "veth", "peer", "name", "d1p"], ["link", "set", "d1", "up"],
                     ["addr", "add", "10.9.9.1", "peer", "10.9.9.2/32", "dev", "d1"]):
            host.run(["ip", *argv], check=True)
        done = host.run([sys.executable, "-c", COMPARE], capture_output=True, text=True, check=True)
    ours, theirs = (grouped(pairs) for pairs in json.loads(done.stdout))
    assert ours == theirs
    assert list(ours) == list(theirs)
    assert "10.213.0.50/24" in ours["eth0:1"]
    assert "fd99::5/64" in ours["d0"] and not any("." in a for a in ours["d0"])
    assert ours["d1"] == ["10.9.9.1/32"]
