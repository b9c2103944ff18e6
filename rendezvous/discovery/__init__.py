"""How nodes find each other: the interface every discovery mechanism implements.

A discovery advertises this node's `Advert` and reports every rendezvous node it hears
of, of every job, as `Seen` and `Gone` events to one callback on the node's event loop.
`mdns` is the zero-config implementation, `unicast` gossips with seeds where multicast
does not pass, `combined` runs both; tests plug in-memory ones into `Node`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from ..core.advert import Advert
from ..core.adverts import Gossip
from ..core.auth import Keys
from ..core.peer import IPAddress
# The events are plain data, defined beside the view that applies them (`PeerView.apply`).
from ..core.view import DiscoveryEvent, Gone, Hinted, Seen  # noqa: F401

log = logging.getLogger(__name__)


def deliver(on_event: Callable[[DiscoveryEvent], None], event: DiscoveryEvent) -> None:
    try:
        on_event(event)
    except Exception:  # a failing consumer must not end discovery for good
        log.exception("handling %s failed", event)


class Discovery:
    """Advertise one advert (or none: only listen), report what is heard."""

    async def start(self) -> None:
        """Advertise and start listening; AddressError if the address cannot be used."""
        raise NotImplementedError

    async def update(self, advert: Advert) -> None:
        """Announce a changed advert (phase, coordinator)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Say goodbye, so that peers drop this node at once, and stop listening."""
        raise NotImplementedError

    def exchange(self, gossip: Gossip) -> Optional[Gossip]:
        """Another node sent what it knows over gRPC (unicast discovery): what it lacks, or
        None when this discovery does not gossip."""
        return None

    def use_keys(self, keys: Optional[Keys]) -> None:
        """The job's token keys, to sign what this discovery sends over gRPC (unicast)
        and check the answers. Nothing by default."""

    def ask_again(self) -> None:
        """This node has not seen its whole job yet: ask for the nodes not heard of, where
        discovery would otherwise wait for its caches to expire (mDNS). Nothing by default."""


#: Builds a discovery: (address, advert or None, event callback) -> Discovery.
DiscoveryFactory = Callable[[IPAddress, Optional[Advert], Callable[[DiscoveryEvent], None]], Discovery]


async def browse(
    factory: DiscoveryFactory, address: IPAddress, seconds: float,
    enough: Optional[Callable[[list[Advert]], bool]] = None,
) -> list[Advert]:
    """Every valid rendezvous advert heard on `address` within `seconds` (or until what was
    heard is `enough`), the latest of each node, nodes that said goodbye left out; sorted
    by job, then address."""
    adverts: dict[str, Advert] = {}

    def on_event(event: DiscoveryEvent) -> None:
        if isinstance(event, Seen):
            adverts[event.advert.node_id] = event.advert
        elif isinstance(event, Gone):
            adverts.pop(event.node_id, None)

    discovery = factory(address, None, on_event)
    await discovery.start()
    try:
        deadline = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(min(0.05, seconds))
            if enough is not None and enough(list(adverts.values())):
                break
    finally:
        await discovery.close()
    return sorted(adverts.values(), key=lambda a: (a.job, a.peer))
