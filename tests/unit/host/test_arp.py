"""Tests of rendezvous.host.arp's frames: which ARP frames show another host holding this
node's address (the packet socket itself is exercised in the netns twin test)."""

from __future__ import annotations

import ipaddress
import struct

from rendezvous.host.arp import other_holder, probe_frame

ADDRESS = ipaddress.IPv4Address("10.0.0.2")
MINE = bytes.fromhex("020000000001")
THEIRS = bytes.fromhex("020000000002")


def frame(op: int, sha: bytes, spa: str, tpa: str) -> bytes:
    return struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, sha, ipaddress.IPv4Address(spa).packed, bytes(6),
                       ipaddress.IPv4Address(tpa).packed)


def test_a_probe_asks_for_the_address_from_nobody():
    assert probe_frame(MINE, ADDRESS) == frame(1, MINE, "0.0.0.0", "10.0.0.2")


def test_another_host_answering_using_or_probing_for_the_address_holds_it():
    assert other_holder(frame(2, THEIRS, "10.0.0.2", "0.0.0.0"), MINE, ADDRESS) == "02:00:00:00:00:02"
    assert other_holder(frame(1, THEIRS, "10.0.0.2", "10.0.0.1"), MINE, ADDRESS) == "02:00:00:00:00:02"
    assert other_holder(frame(1, THEIRS, "0.0.0.0", "10.0.0.2"), MINE, ADDRESS) == "02:00:00:00:00:02"


def test_this_hosts_own_frames_other_addresses_and_junk_say_nothing():
    assert other_holder(frame(2, MINE, "10.0.0.2", "0.0.0.0"), MINE, ADDRESS) is None
    assert other_holder(frame(1, THEIRS, "10.0.0.3", "10.0.0.2"), MINE, ADDRESS) is None  # asks for us: fine
    assert other_holder(frame(2, THEIRS, "10.0.0.3", "10.0.0.2"), MINE, ADDRESS) is None
    assert other_holder(b"\x00" * 10, MINE, ADDRESS) is None
