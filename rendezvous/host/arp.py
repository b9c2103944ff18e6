"""Whether another host on the link holds this node's IPv4 address (RFC 5227's address
conflict detection, as NetworkManager does it).

Two hosts given one address never hear each other: each one's kernel drops the packets
that come from its own address. Only ARP, below IP, shows the other: a probe (who has this
address? asked from 0.0.0.0) is answered by the other host's kernel, whether or not a daemon
runs there; and a probe of the other host, or its ARP requests, seen while this node
listens, name the address from another hardware address. This needs a packet
socket (CAP_NET_RAW, as root has): without one, nothing is found here, and the node relies
on what its peers tell it (core.unformed).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import struct
from typing import Callable, Optional

log = logging.getLogger(__name__)

ETH_P_ARP = 0x0806
_ARP = struct.Struct("!HHBBH6s4s6s4s")  # Ethernet / IPv4 ARP: htype ptype hlen plen op sha spa tha tpa
_BROADCAST = b"\xff" * 6


def probe_frame(hardware: bytes, address: ipaddress.IPv4Address) -> bytes:
    """An ARP probe for `address`: a request from `hardware` with sender address 0.0.0.0,
    which changes no neighbour's cache."""
    return _ARP.pack(1, 0x0800, 6, 4, 1, hardware, bytes(4), bytes(6), address.packed)


def other_holder(frame: bytes, hardware: bytes, address: ipaddress.IPv4Address) -> Optional[str]:
    """The hardware address (aa:bb:...) of another host that `frame` shows holding
    `address`: it says the address is its own (a reply to a probe, its own requests), or
    it probes for it itself; None for anything else, this host's own frames included."""
    if len(frame) < _ARP.size:
        return None
    htype, ptype, hlen, plen, op, sha, spa, _tha, tpa = _ARP.unpack_from(frame)
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4) or sha == hardware:
        return None
    claims = spa == address.packed
    probes = op == 1 and spa == bytes(4) and tpa == address.packed
    return sha.hex(":") if claims or probes else None


# How long a probe listens for answers: a host on the link answers within milliseconds; a
# second leaves room for a loaded one. Only while listening does every ARP frame on the link
# cost this process a wakeup (a node that asks hundreds of unused addresses makes many).
LISTEN = 1.0


class ArpWatch:
    """Probes for this node's address on its interface (`probe`) and listens to ARP there
    for LISTEN seconds; `on_conflict` gets each other host's hardware address once."""

    def __init__(self, interface: str, address: ipaddress.IPv4Address, on_conflict: Callable[[str], None]) -> None:
        self._interface = interface
        self._address = address
        self._on_conflict = on_conflict
        self._socket: Optional[socket.socket] = None
        self._seen: set[str] = set()
        self._closing: Optional[asyncio.TimerHandle] = None
        self._unable = False  # no packet socket for this process: not tried again

    def probe(self) -> None:
        if self._socket is not None or self._unable:
            return
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ARP))
        except (OSError, AttributeError) as exc:  # no CAP_NET_RAW, or no packet sockets here
            log.debug("cannot watch ARP for %s on %s: %s", self._address, self._interface, exc)
            self._unable = True
            return
        try:
            sock.bind((self._interface, ETH_P_ARP))
            hardware = sock.getsockname()[4]
            sock.setblocking(False)
            sock.sendto(probe_frame(hardware, self._address), (self._interface, ETH_P_ARP, 0, 1, _BROADCAST))
        except OSError as exc:
            log.debug("cannot probe ARP for %s on %s: %s", self._address, self._interface, exc)
            sock.close()
            return
        self._socket = sock
        loop = asyncio.get_running_loop()
        loop.add_reader(sock.fileno(), self._readable, hardware)
        self._closing = loop.call_later(LISTEN, self.close)

    def _readable(self, hardware: bytes) -> None:
        assert self._socket is not None
        while True:
            try:
                frame = self._socket.recv(2048)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.debug("ARP watch on %s ended: %s", self._interface, exc)
                self.close()
                return
            other = other_holder(frame, hardware, self._address)
            if other is not None and other not in self._seen:
                self._seen.add(other)
                self._on_conflict(other)

    def close(self) -> None:
        if self._closing is not None:
            self._closing.cancel()
            self._closing = None
        if self._socket is not None:
            asyncio.get_running_loop().remove_reader(self._socket.fileno())
            self._socket.close()
            self._socket = None
