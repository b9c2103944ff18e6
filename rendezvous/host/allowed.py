"""`--allow-host`: the addresses of the hosts that may take part in a job (under Slurm, the
step's nodes), resolved once at startup, and this node's own address among them.

A name stands for every address it resolves to. A name that resolves to nothing stops the
daemon: the job could never form without that host, and a typo should not wait forever.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Callable, Optional, Sequence

from ..core.peer import IPAddress
from ..errors import AddressError
from .address import AddressChoice, choose_address, read_adapters

log = logging.getLogger(__name__)

Resolver = Callable[..., list]


def resolve_hosts(names: Sequence[str], resolve: Resolver = socket.getaddrinfo) -> frozenset[IPAddress]:
    """Every address of every host in `names`; AddressError naming one that does not resolve."""
    found: set[IPAddress] = set()
    for name in names:
        try:
            answers = resolve(name, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise AddressError(f"--allow-host {name}: does not resolve to an address ({exc})") from None
        for answer in answers:
            text = str(answer[4][0]).split("%", 1)[0]
            found.add(ipaddress.ip_address(text))
    log.debug("hosts allowed in the job: %s", ", ".join(map(str, sorted(found, key=lambda a: (a.version, a)))))
    return frozenset(found)


def choose_allowed_address(address: Optional[str], interface: Optional[str],
                           allowed: Optional[frozenset[IPAddress]]) -> AddressChoice:
    """This node's address, as `choose_address` picks it; when the pick is not one of the
    `allowed` hosts' and no address or interface was given, this node's own address among
    them (a cluster's node names may resolve to another network than the default route's).
    Peers refuse a node whose address they do not allow: that one is named in a warning."""
    choice = choose_address(address, interface)
    if not allowed or choice.address in allowed:
        return choice
    if address is None and interface is None:
        mine = sorted((i.ip for ips in read_adapters().values() for i in ips if i.ip in allowed),
                      key=lambda a: (a.version, a))
        if mine:
            picked = choose_address(str(mine[0]))
            log.info("using %s, this host's address among the hosts allowed (--allow-host), not %s",
                     picked.address, choice.address)
            return picked
    log.warning("this node's address %s is not one of the hosts allowed (--allow-host): its peers will refuse "
                "it; give --address or --interface on the network those names resolve to", choice.address)
    return choice
