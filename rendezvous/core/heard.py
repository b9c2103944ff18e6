"""When this node last heard from each peer, for what its own status says.

A confirmed peer is not asked again while nothing changes, and mDNS keeps the adverts of a
silent host for many minutes: a node cut off from the others would go on counting them as
seen. So every sign of life is noted (`hear`: a Status answer, an advert, the Join stream's
traffic, which vouches for the round's members as the coordinator ends the round when one
is silent), and every failed attempt to reach a peer (`miss`: a Status call unanswered, the
Join stream lost). A peer missed since it was last heard, for longer than `after`, is silent:
not counted as seen. Only what the status shows depends on this, never the election.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from .record import field, record


@record
class Heard:
    last: Mapping[str, float] = field(default_factory=dict)  # node id -> when last heard
    missed: Mapping[str, float] = field(default_factory=dict)  # node id -> first miss since

    def hear(self, node_ids: Iterable[str], now: float) -> "Heard":
        ids = set(node_ids)
        if not ids:
            return self
        return Heard({**self.last, **{n: now for n in ids}},
                     {n: t for n, t in self.missed.items() if n not in ids})

    def miss(self, node_ids: Iterable[str], now: float) -> "Heard":
        new = {n: now for n in node_ids if n not in self.missed}
        return Heard(self.last, {**self.missed, **new}) if new else self

    def only(self, node_ids: Iterable[str]) -> "Heard":
        """Forget every peer but these (the view's): the record stays as small as the view."""
        keep = set(node_ids)
        if keep.issuperset(self.last) and keep.issuperset(self.missed):
            return self
        return Heard({n: t for n, t in self.last.items() if n in keep},
                     {n: t for n, t in self.missed.items() if n in keep})

    def silent(self, now: float, after: float) -> dict[str, float]:
        """The peers missed since last heard, and not heard for longer than `after`:
        node id -> seconds since last heard (since the first miss, if never heard)."""
        ages = {n: now - self.last.get(n, t) for n, t in self.missed.items()}
        return {n: age for n, age in ages.items() if age > after}

    def stale(self, node_ids: Iterable[str], now: float, after: float) -> list[str]:
        """Those of `node_ids` not heard for `after` seconds or more (never heard: not
        stale, as nothing was expected of them yet), to ask again."""
        return sorted(n for n in node_ids if n in self.last and now - self.last[n] >= after)

    def next_stale(self, node_ids: Iterable[str], now: float, after: float) -> Optional[float]:
        """When the first of `node_ids` heard of, and not stale yet, becomes stale."""
        times = [self.last[n] + after for n in node_ids if n in self.last and self.last[n] + after > now]
        return min(times) if times else None
