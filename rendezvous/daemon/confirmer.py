"""Adverts confirmed over gRPC before they count (see `PeerView.confirmed`).

An advert that is new or claims something new is checked by asking that node's Status,
signed when the job has a token, when it could change what this node does
(`PeerView.unconfirmed`). Which to ask when is `core.asking`'s rule: those that would be
elected one at a time, lowest first (the election needs only the lowest that answers),
the rest at once, up to a bound. One that does not answer is asked again later and later:
a node that never answers (a forged advert for an unused address) costs only its own
retries and never holds a place another node needs, and a job of dozens of nodes on a busy
network does not drown in its own retries. A node that fails authentication is left out
for good.

Each request carries this node's own advert: a node that has just started learns of every
peer that heard its announcement from their requests, at once (see StatusRequest.caller).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional

from ..coordinator import StatusUntrusted, TokenNeeded, fetch_status
from ..core.advert import Advert
from ..core.asking import choose_asks
from ..core.auth import Keys
from ..errors import NoDaemonError
from .viewholder import ViewHolder

log = logging.getLogger(__name__)

# Nodes asked at once at most: a flood of forged adverts costs a bounded number of calls.
MAX_PROBES = 8
# A node never confirmed that does not answer is asked again after the interval, doubled at
# every further silence up to this many intervals: forged adverts cost ever fewer calls. A
# node that answered before (a coordinator cut off for a while) is asked every interval, so
# it is a candidate again within one interval of its coming back; a fresh advert of either
# is asked at once.
MAX_BACKOFF = 8


class Confirmer:
    def __init__(self, views: ViewHolder, keys: Optional[Keys], timeout: float, interval: float, hedge: float) -> None:
        self._views = views
        self._keys = keys
        self._timeout = timeout
        self._interval = interval
        self._hedge = hedge
        self._tasks: dict[str, asyncio.Task] = {}
        self._started: dict[str, float] = {}  # node id -> loop time its ask in flight started
        self._next_ask: dict[str, float] = {}  # node id -> loop time it may be asked again
        self._backoff: dict[str, float] = {}  # node id -> its wait after its last silence
        self._asked: dict[str, Advert] = {}  # node id -> the advert last asked about
        self._timer: Optional[asyncio.TimerHandle] = None
        self._closed = False

    def kick(self) -> None:
        """Ask what needs asking, is not being asked and whose time has come (`core.asking`);
        come back when the next one's time comes."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        later: list[float] = []
        view = self._views.view
        wanted = view.unconfirmed(now)
        wanted += self._stale(now, {a.node_id for a in wanted}, later)
        needed = {a.node_id for a in wanted}
        for mapping in (self._next_ask, self._backoff, self._asked):  # forget nodes that need no asking
            for node_id in set(mapping) - needed:
                del mapping[node_id]
        due = []
        for advert in wanted:
            node_id = advert.node_id
            fresh = self._asked.get(node_id, advert) != advert
            if fresh:  # it announced itself anew: no wait left over from its old advert
                self._next_ask.pop(node_id, None)
                self._backoff.pop(node_id, None)
            if node_id not in self._tasks and self._next_ask.get(node_id, now) > now:
                later.append(self._next_ask[node_id])
            else:
                due.append(advert)
        asks = choose_asks(due, view.target(now).peer, self._started, now, self._hedge, MAX_PROBES)
        for advert in asks.start:
            node_id = advert.node_id
            task = loop.create_task(self._ask(advert), name=f"confirm-{node_id}")
            self._tasks[node_id] = task
            self._started[node_id] = now
            task.add_done_callback(lambda t, n=node_id: self._done(n, t))
        if asks.wake is not None:
            later.append(asks.wake)
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(min(later), self.kick) if later else None

    def _stale(self, now: float, wanted: set[str], later: list[float]) -> list[Advert]:
        """Confirmed peers not heard from for `silent_after` (`core.heard`): the coordinator
        this node follows, or every peer when this node coordinates, so that its status shows
        a peer cut off as silent. A running round's traffic vouches for its members, so a
        healthy round asks nobody."""
        view, heard, after = self._views.view, self._views.heard, self._views.silent_after
        target = view.target(now).peer
        ids = [n for n in view.confirmed if n in view.others and n not in wanted
               and (target == view.me.peer or (target is not None and n == target.node_id))]
        wake = heard.next_stale(ids, now, after)
        if wake is not None:
            later.append(wake)
        return [view.others[n] for n in heard.stale(ids, now, after)]

    def _done(self, node_id: str, task: asyncio.Task) -> None:
        self._tasks.pop(node_id, None)
        self._started.pop(node_id, None)
        if not task.cancelled():
            self.kick()  # its place is free for another

    async def _ask(self, advert: Advert) -> None:
        """Ask the advertised node's Status once; when to ask again if its advert still
        needs it. (An advert that changed meanwhile is asked again at the next kick.)"""
        node_id, view = advert.node_id, self._views.view
        self._asked[node_id] = advert
        try:
            status = await fetch_status(advert.peer.endpoint, self._timeout, self._keys, caller=view.me, about=advert)
        except StatusUntrusted as exc:
            self._views.distrust(advert.peer, str(exc))
            return
        except TokenNeeded:
            # A node of a job with a token tells an unsigned request only that: its advert
            # counts as it is, so that this node, lacking the token, says so and ends.
            if advert.auth and advert.job == view.me.job:
                self._views.update(self._views.view.confirm(advert))
            self._next_ask[node_id] = asyncio.get_running_loop().time() + self._interval
            return
        except NoDaemonError as exc:
            log.debug("cannot confirm the advert of %s yet: %s", advert.peer.describe(), exc)
            if node_id in view.confirmed:  # it answered before: ask as often as documented
                wait = self._interval
            else:
                wait = self._backoff[node_id] = min(2 * self._backoff.get(node_id, self._interval / 2),
                                                    MAX_BACKOFF * self._interval)
            self._next_ask[node_id] = asyncio.get_running_loop().time() + wait
            self._views.miss(node_id)
            self._views.update(self._views.view.unanswered(node_id))
            return
        self._backoff.pop(node_id, None)
        self._next_ask[node_id] = asyncio.get_running_loop().time() + self._interval
        if status.node == advert.peer and status.job == view.me.job:
            # A suspected peer that answers is a candidate again (`ViewHolder.update` says so).
            self._views.hear(node_id)
            self._views.update(self._views.view.confirm(status.as_advert(auth=advert.auth)))
        elif status.job == view.me.job and status.node.node_id != node_id:
            log.info("%s answers as %s: %s no longer runs there", advert.peer.endpoint, status.node.node_id, node_id)
            self._views.update(self._views.view.answered_as(node_id, status.as_advert(auth=advert.auth)))
        else:
            log.debug("%s answers as %s of job %r", advert.peer.endpoint, status.node.describe(), status.job)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._tasks.values()):
            task.cancel()
