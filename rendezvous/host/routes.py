"""The route tables this node's address is chosen by: one row as a :class:`Route`, the text
of ``/proc/net/route`` and ``/proc/net/ipv6_route`` parsed, and the default route of an IP
version. Pure: the reading is :func:`rendezvous.host.address.read_routes`."""

from __future__ import annotations

import ipaddress
from typing import Sequence, Union

from ..core.peer import IPAddress
from ..core.record import record

RTF_UP = 0x0001
RTF_REJECT = 0x0200  # an unreachable route, such as the IPv6 default one on lo


@record
class Route:
    """One row of the IPv4 route table (``/proc/net/route``) or the IPv6 one."""

    interface: str
    destination: Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
    gateway: IPAddress = ipaddress.IPv4Address(0)
    metric: int = 0
    flags: int = RTF_UP

    @property
    def is_default(self) -> bool:
        return self.destination.prefixlen == 0 and self.flags & (RTF_UP | RTF_REJECT) == RTF_UP



def parse_routes(text: str) -> list[Route]:
    """Parse the text of ``/proc/net/route`` (hex, host byte order = little endian)."""
    routes: list[Route] = []
    lines = text.splitlines()
    if not lines:
        return routes
    header = lines[0].split()
    try:
        col = {name: header.index(name) for name in ("Iface", "Destination", "Gateway", "Flags", "Metric", "Mask")}
    except ValueError:
        col = {"Iface": 0, "Destination": 1, "Gateway": 2, "Flags": 3, "Metric": 6, "Mask": 7}
    for line in lines[1:]:
        fields = line.split()
        if len(fields) <= max(col.values()):
            continue
        try:
            dest = _hex_ipv4(fields[col["Destination"]])
            mask = _hex_ipv4(fields[col["Mask"]])
            gateway = _hex_ipv4(fields[col["Gateway"]])
            flags = int(fields[col["Flags"]], 16)
            metric = int(fields[col["Metric"]])
            network = ipaddress.IPv4Network(f"{dest}/{mask}", strict=False)
        except ValueError:
            continue
        routes.append(Route(fields[col["Iface"]], network, gateway, metric, flags))
    return routes


def parse_ipv6_routes(text: str) -> list[Route]:
    """Parse the text of ``/proc/net/ipv6_route``: destination, its prefix length, source,
    its prefix length, next hop, metric, refcount, use, flags, interface (hex, no header)."""
    routes: list[Route] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 10:
            continue
        try:
            dest = ipaddress.IPv6Address(int(fields[0], 16))
            network = ipaddress.IPv6Network(f"{dest}/{int(fields[1], 16)}", strict=False)
            gateway = ipaddress.IPv6Address(int(fields[4], 16))
            metric, flags = int(fields[5], 16), int(fields[8], 16)
        except ValueError:
            continue
        routes.append(Route(fields[9], network, gateway, metric, flags))
    return routes


def _hex_ipv4(value: str) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(value, 16).to_bytes(4, "little"))


def default_route(routes: Sequence[Route], version: int = 4) -> Route | None:
    """The default route of IP `version` with the lowest metric (the first one on a tie)."""
    best: Route | None = None
    for route in routes:
        if route.destination.version != version:
            continue
        if route.is_default and (best is None or route.metric < best.metric):
            best = route
    return best
