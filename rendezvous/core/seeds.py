"""Seeds: the nodes a node asks first where multicast does not pass (`--peer HOST[:PORT]`).

Every node listens on DEFAULT_PORT unless told otherwise, so a seed is usually just a host:
an address, or a DNS name whose every address is a seed.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Iterable, Sequence

from .numbers import parse_whole
from .record import record

#: The rendezvous gRPC port of every node unless --port says otherwise; a seed without a
#: port is asked there.
DEFAULT_PORT = 29630

# A DNS name: labels of letters, digits, '-' and '_' (as /etc/hosts and cloud DNS allow).
_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?")


@record
class Seed:
    host: str  # an IP address or a DNS name, without brackets
    port: int = DEFAULT_PORT

    def endpoint(self, address: str) -> str:
        """`address:port` of one address `host` resolved to, IPv6 in brackets."""
        return f"[{address}]:{self.port}" if ":" in address else f"{address}:{self.port}"

    def __str__(self) -> str:
        return self.endpoint(self.host)


def parse_seed(text: str) -> Seed:
    """`host`, `host:port`, `10.0.0.1`, `fd00::1`, `[fd00::1]:7000`; ValueError if not one."""
    text = text.strip()
    host, port = text, DEFAULT_PORT
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"not HOST[:PORT]: {text!r}")
        if rest:
            port = _port(rest[1:], text)
        _ipv6(host, text)
    elif text.count(":") == 1:
        host, _, rest = text.partition(":")
        port = _port(rest, text)
    elif ":" in text:
        _ipv6(text, text)  # a bare IPv6 address: no port
    if not host or not (_NAME.fullmatch(host) or ":" in host):
        raise ValueError(f"not a host name or IP address: {text!r}")
    return Seed(host, port)


def parse_seeds(texts: Iterable[str]) -> tuple[Seed, ...]:
    return tuple(parse_seed(t) for t in texts)


def _port(text: str, whole: str) -> int:
    port = parse_whole(text)
    if port is None or not 1 <= port <= 65535:
        raise ValueError(f"port must be from 1 to 65535: {whole!r}")
    return port


def _ipv6(host: str, whole: str) -> None:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        raise ValueError(f"not an IPv6 address: {whole!r} (write [ADDRESS]:PORT)") from None


def lonely_hint(seconds: float, seeds: Sequence[Seed], multicast: bool) -> str:
    """What a node that has seen no peer for `seconds` says: where discovery may fail, and
    what to do about it."""
    if seeds:
        where = ", ".join(map(str, seeds))
        blocked = "multicast may be blocked on this network and " if multicast else ""
        return (
            f"no peer seen for {seconds:g}s: {blocked}no seed answered ({where}); check that they "
            f"run rendezvous join with --peer and that TCP port {DEFAULT_PORT} (or the one given) "
            "passes between the nodes"
        )
    if not multicast:
        return (
            f"no peer seen for {seconds:g}s: with --discovery unicast and no --peer, this node "
            "learns only of the nodes whose --peer names it; check that they do and that TCP port "
            f"{DEFAULT_PORT} (or the one given) passes between the nodes, or give this node a seed too"
        )
    return (
        f"no peer seen for {seconds:g}s: multicast may be blocked on this network (cloud VPCs "
        "and many routed networks drop it). Give every node a seed: rendezvous join --peer HOST, "
        "where HOST is one node of the job or a name that resolves to several"
    )
