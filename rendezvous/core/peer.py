"""Peers as ordered values, and the election of the coordinator."""

from __future__ import annotations

import ipaddress
import re
from functools import cached_property, total_ordering
from typing import Iterable, Optional, Union

from .numbers import parse_whole
from .record import record

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

NODE_ID_PATTERN = re.compile(r"[0-9a-f]{8,32}")


def parse_address(text: str) -> IPAddress:
    """Parse a numeric IP address; host names are refused (they hang on bad DNS)."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"not a numeric IP address: {text!r}") from None


def parse_endpoint(text: str) -> tuple[IPAddress, int]:
    """Parse `a.b.c.d:port` or `[v6]:port`; host names are refused like in parse_address."""
    host, sep, port_text = text.rpartition(":")
    port = parse_whole(port_text, max_digits=5)
    if not sep or port is None:
        raise ValueError(f"not an address:port endpoint: {text!r}")
    if host.startswith("[") and host.endswith("]"):
        address = parse_address(host[1:-1])
        if address.version != 6:
            raise ValueError(f"brackets around an IPv4 address: {text!r}")
    else:
        address = parse_address(host)
        if address.version != 4:
            raise ValueError(f"an IPv6 endpoint needs brackets: {text!r}")
    _check_port("port", port)
    return address, port


def parse_grpc_peer(text: str) -> IPAddress:
    """The address in gRPC's name of a caller, `ipv4:10.0.0.1:5000` or `ipv6:[::1]:5000`
    (percent-encoded in some gRPC versions); ValueError for anything else (a Unix socket)."""
    scheme, _, rest = text.replace("%5B", "[").replace("%5D", "]").partition(":")
    if scheme not in ("ipv4", "ipv6"):
        raise ValueError(f"not an IP caller: {text!r}")
    host = rest.rpartition(":")[0]
    return parse_address(host[1:-1].split("%")[0] if host.startswith("[") else host)


def unmapped(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv4-mapped IPv6 one (::ffff:a.b.c.d) stands for; any other as is."""
    return getattr(address, "ipv4_mapped", None) or address


def same_host(claimed: IPAddress, source: IPAddress) -> bool:
    """Whether a connection from `source` can come from the node at `claimed`: the same
    address (an IPv4-mapped IPv6 one counts as IPv4), or both on loopback, where the
    kernel picks 127.0.0.1 as the source whatever 127.x address a node advertises."""
    claimed, source = unmapped(claimed), unmapped(source)
    return claimed == source or (claimed.is_loopback and source.is_loopback)


def _check_port(name: str, value: int) -> None:
    if not 0 < value < 65536:
        raise ValueError(f"{name} must be in 1..65535, got {value!r}")


@total_ordering
@record
class Peer:
    """One node of a job: who it is, where its rendezvous server listens, its TF port,
    and the address of its data network (`--data-interface`), where its TensorFlow
    worker is reached instead of `address` when it has one.

    Peers order by address in numeric order (so 10.0.0.9 < 10.0.0.10), then gRPC port,
    then node id; IPv4 sorts before IPv6. The data address does not change the order.
    """

    node_id: str
    address: IPAddress
    port: int
    tf_port: int
    data_address: Optional[IPAddress] = None

    def __post_init__(self) -> None:
        if not isinstance(self.node_id, str) or not NODE_ID_PATTERN.fullmatch(self.node_id):
            raise ValueError(f"node id must be 8-32 lowercase hex digits, got {self.node_id!r}")
        if not isinstance(self.address, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
            raise TypeError(f"address must be an ipaddress object, got {self.address!r}")
        if self.data_address is not None and not isinstance(self.data_address, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
            raise TypeError(f"data_address must be an ipaddress object, got {self.data_address!r}")
        _check_port("port", self.port)
        _check_port("tf_port", self.tf_port)

    @cached_property  # views sort dozens of peers many times over
    def sort_key(self) -> tuple[int, int, int, str]:
        return (self.address.version, int(self.address), self.port, self.node_id)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Peer):
            return NotImplemented
        return self.sort_key < other.sort_key

    @property
    def host(self) -> str:
        """The address as it appears in a host:port endpoint."""
        return f"[{self.address}]" if self.address.version == 6 else str(self.address)

    @property
    def endpoint(self) -> str:
        """host:port of the rendezvous gRPC server."""
        return f"{self.host}:{self.port}"

    @property
    def tf_endpoint(self) -> str:
        """host:port of the TensorFlow worker, as it appears in TF_CONFIG: on the data
        network when the node has one."""
        data = self.data_address
        host = self.host if data is None else f"[{data}]" if data.version == 6 else str(data)
        return f"{host}:{self.tf_port}"

    def describe(self) -> str:
        return f"{self.address} ({self.node_id})"


def elect_coordinator(peers: Iterable[Peer]) -> Peer:
    """The coordinator is the lowest peer in numeric address order."""
    try:
        return min(peers)
    except ValueError:
        raise ValueError("cannot elect a coordinator among no peers") from None


def describe_peers(peers: Iterable[Peer]) -> str:
    text = ", ".join(p.describe() for p in sorted(peers))
    return text or "none"


def shared_address(address: IPAddress, holders: str) -> str:
    """What to say of an address that several nodes have (`holders`: "2 nodes", "more than
    one member"): on different hosts, they break each other's connections."""
    return (f"{address} is the address of {holders}: if they are not on one host, two hosts are "
            "configured with the same address")
