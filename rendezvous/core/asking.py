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
one then probably is not.
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
    waiting = [a for a in electable if a.node_id not in asking]
    if not waiting:
        return Asks((), None)  # an answer or a failure chooses again
    started = [asking[a.node_id] for a in electable if a.node_id in asking]
    due = max(started) + hedge if started else now
    if due > now:
        return Asks((), due)
    if free <= 0:
        return Asks((), None)  # a finished ask chooses again
    return Asks((waiting[0],), now + hedge if len(waiting) > 1 else None)
