"""Which of the adverts that need a Status to ask now (`rendezvous.daemon.confirmer` makes the calls).

A Status call costs both nodes a connection and each answer a change of the view. In a job
whose nodes start at once, every node believes it coordinates until it has confirmed a
lower one, and a coordinating node asks every peer (`PeerView._could_matter`): asked all at
once, 8 nodes made 24-47 calls, where one answer from the lowest would have settled each
node's election. So the adverts that would be elected, those below the current target,
are asked one at a time, lowest first: the lowest usually answers within milliseconds, and
its answer makes the others above it matter no more. One that has not answered within
`hedge` seconds lets the next be asked too, so a node that is gone, or an advert forged for
an unused address, holds the rest up no longer than that. While any advert would be
elected, nothing else is asked: the others matter to a node that coordinates, which this
one then probably is not. Unless that one-at-a-time goes slowly: once an ask of it has gone
unanswered for `hedge` seconds, the adverts above are asked beside it, keeping one place for
it. Hundreds of adverts forged below every real node (each asked in turn until its call
times out) would otherwise keep a coordinating node from ever asking its real peers, whose
answers and whose own requests (StatusRequest.caller) are what lets each find the other.
For the same reason the one-at-a-time never holds more than half of the places: a peer
heard after the forged adverts filled them is asked as soon as one of them times out.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from .advert import Advert
from .peer import Peer
from .record import record


@record
class Asks:
    start: tuple[Advert, ...]  # to ask now
    wake: Optional[float]  # when to choose again (a hedge runs out), or None


def choose_asks(
    wanted: Sequence[Advert],
    target: Optional[Peer],
    asking: Mapping[str, float],
    now: float,
    hedge: float,
    limit: int,
) -> Asks:
    """`wanted`: the adverts that need a Status and may be asked now (due, not backing
    off), lowest first, those being asked included; `target`: the peer this node would
    join (itself while it coordinates), None when it follows an endpoint no advert names;
    `asking`: node id -> when its ask started, for every ask in flight; at most `limit`
    asks in flight."""
    free = limit - len(asking)
    electable = [a for a in wanted if target is not None and a.peer < target]
    if not electable:
        return Asks(tuple(a for a in wanted if a.node_id not in asking)[: max(0, free)], None)
    started = [asking[a.node_id] for a in electable if a.node_id in asking]
    room = max(1, limit // 2) - len(started)  # places the one at a time may still take
    others = [a for a in wanted if a not in electable and a.node_id not in asking]
    slow_at = min(started) + hedge if started and others else None  # when the one at a time counts as slow
    kept = 1 if room > 0 else 0  # one place kept for the one at a time, while it may take one
    extra = tuple(others[: max(0, free - kept)]) if slow_at is not None and slow_at <= now else ()
    free -= len(extra)
    later = slow_at if slow_at is not None and slow_at > now else None
    waiting = [a for a in electable if a.node_id not in asking]
    if not waiting:
        return Asks(extra, later)  # an answer or a failure chooses again
    due = max(started) + hedge if started else now
    if due > now:
        return Asks(extra, _first(due, later))
    if free <= 0 or room <= 0:
        return Asks(extra, later)  # a finished ask chooses again
    return Asks(extra + (waiting[0],), _first(now + hedge if len(waiting) > 1 else None, later))


def _first(*times: Optional[float]) -> Optional[float]:
    known = [t for t in times if t is not None]
    return min(known) if known else None
