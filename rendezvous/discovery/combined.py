"""--discovery mdns|unicast|both: the discovery a node's options ask for, behind one interface.

With both, every advert heard either way reaches the same view: the view already ignores
one it has seen, so a node heard over mDNS and through a seed counts once.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Callable, Optional, Sequence

from ..config.timings import Timings
from ..core.advert import Advert
from ..core.adverts import Gossip
from ..core.auth import Keys
from ..core.peer import IPAddress
from ..core.seeds import Seed
from . import Discovery, DiscoveryEvent, DiscoveryFactory


class Combined(Discovery):
    """Several discoveries as one: started, updated and closed together."""

    def __init__(self, parts: Sequence[Discovery]) -> None:
        self._parts = tuple(parts)

    async def start(self) -> None:
        for part in self._parts:
            await part.start()

    async def update(self, advert: Advert) -> None:
        await asyncio.gather(*(p.update(advert) for p in self._parts))

    async def close(self) -> None:
        await asyncio.gather(*(p.close() for p in self._parts))

    def exchange(self, gossip: Gossip) -> Optional[Gossip]:
        answers = [a for a in (p.exchange(gossip) for p in self._parts) if a is not None]
        return answers[0] if answers else None

    def use_keys(self, keys: Optional[Keys]) -> None:
        for part in self._parts:
            part.use_keys(keys)

    def ask_again(self) -> None:
        for part in self._parts:
            part.ask_again()


def discovery_factory(mode: str, seeds: Sequence[Seed], timings: Timings = Timings()) -> DiscoveryFactory:
    """What builds the discovery of `mode` (mdns, unicast or both) for these seeds."""
    from .mdns import MdnsDiscovery  # zeroconf only where it is used
    from .unicast import UnicastDiscovery

    makers: list[DiscoveryFactory] = []
    if mode in ("mdns", "both"):
        makers.append(partial(MdnsDiscovery, timings=timings))
    if mode in ("unicast", "both"):
        makers.append(partial(UnicastDiscovery, seeds=seeds, timings=timings))

    def make(address: IPAddress, advert: Optional[Advert], on_event: Callable[[DiscoveryEvent], None]) -> Discovery:
        parts = [m(address, advert, on_event) for m in makers]
        return parts[0] if len(parts) == 1 else Combined(parts)

    return make
