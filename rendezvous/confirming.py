"""Adverts confirmed over gRPC before they count (see `PeerView.confirmed`).

Every advert that is new or claims something new (another --expect, a frozen coordinator)
is checked by asking that node's Status, signed when the job has a token. All at once, one
task per node: a node that never answers (a forged advert for an unused address) costs
nothing but its own retries, and never delays the election. A node that fails
authentication is left out for good.

Each request carries this node's own advert: a node that has just started learns of every
peer that heard its announcement from their requests, at once (see StatusRequest.caller).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from .coordinator import StatusUntrusted, fetch_status
from .errors import NoDaemonError

if TYPE_CHECKING:
    from .resources import Resources

log = logging.getLogger(__name__)

# Nodes asked at once at most: a flood of forged adverts costs a bounded number of calls.
MAX_PROBES = 64


class Confirmer:
    def __init__(self, res: "Resources", timeout: float, interval: float) -> None:
        self._res = res
        self._timeout = timeout
        self._interval = interval
        self._tasks: dict[str, asyncio.Task] = {}
        self._closed = False

    def kick(self) -> None:
        """Start confirming every advert that needs it and is not being confirmed."""
        if self._closed:
            return
        for advert in self._res.view.unconfirmed():
            if len(self._tasks) >= MAX_PROBES:
                return
            if advert.node_id not in self._tasks:
                name = f"confirm-{advert.node_id}"
                task = asyncio.get_running_loop().create_task(self._confirm(advert.node_id), name=name)
                self._tasks[advert.node_id] = task
                task.add_done_callback(lambda t, n=advert.node_id: self._done(n, t))

    def _done(self, node_id: str, task: asyncio.Task) -> None:
        self._tasks.pop(node_id, None)
        if not task.cancelled():
            self.kick()  # one that waited for a free slot

    async def _confirm(self, node_id: str) -> None:
        """Ask until the node's Status confirms its current advert, or the advert goes."""
        while True:
            view = self._res.view
            advert = next((a for a in view.unconfirmed() if a.node_id == node_id), None)
            if advert is None:
                return
            try:
                status = await fetch_status(advert.peer.endpoint, self._timeout, self._res.keys, caller=view.me)
            except StatusUntrusted as exc:
                self._res.distrust(advert.peer, str(exc))
                return
            except NoDaemonError as exc:
                log.debug("cannot confirm the advert of %s yet: %s", advert.peer.describe(), exc)
                self._res.update_view(self._res.view.unanswered(node_id))
            else:
                if status.node == advert.peer and status.job == view.me.job:
                    if node_id in view.unreachable:
                        log.info("%s answers again: it is a candidate again", advert.peer.describe())
                    self._res.update_view(self._res.view.confirm(status.as_advert(auth=advert.auth)))
                else:
                    log.debug("%s answers as %s of job %r", advert.peer.endpoint, status.node.describe(), status.job)
            await asyncio.sleep(self._interval)

    def close(self) -> None:
        self._closed = True
        for task in list(self._tasks.values()):
            task.cancel()
