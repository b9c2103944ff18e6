"""The node's current view of its job (`core.view.PeerView`), and what follows from a change.

A view never changes: `update` replaces it, and is the only way to. What follows from a
change (the coordinator service follows the new target, the progress is reported, the
confirmer asks what needs asking, a waiting Joiner wakes) is done at once for the first
VIEW_BURST changes after a quiet window of `settle` seconds (Timings.view_settle), then at
most once per window while changes keep coming: a node of a job of N nodes that starts at
once hears N adverts within a moment, and each telling costs O(N). A node that just started
sees itself, then its coordinator, then confirms it: none of that waits.

Beside the view, when each peer was last heard from (`core.heard`): peers missed and not
heard for longer than `silent_after` are shown silent, not seen.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional, Sequence

from ..core.heard import Heard
from ..core.peer import Peer
from ..core.unformed import TWIN_ADVICE, describe_twin
from ..core.view import PeerView

log = logging.getLogger(__name__)

VIEW_BURST = 3


class ViewHolder:
    def __init__(self, view: PeerView, settle: float, listeners: Sequence[Callable[[], None]] = (),
                 silent_after: float = 5.0) -> None:
        self._view = view
        self.heard = Heard()
        self.silent_after = silent_after
        self._settle = settle
        self._listeners = list(listeners)
        self.changed = asyncio.Event()  # set at every telling; whoever waits on it clears it
        self._telling: Optional[asyncio.TimerHandle] = None
        self._untold = False
        self._told = 0  # tellings in this settle window

    @property
    def view(self) -> PeerView:
        return self._view

    def listen(self, listener: Callable[[], None]) -> None:
        """Call `listener` at every telling of a change, after those added before."""
        self._listeners.append(listener)

    def update(self, view: PeerView) -> None:
        """Take the new view, and tell the listeners about it (see the module's doc)."""
        before, self._view = self._view, view
        for node_id in before.unreachable.keys() - view.unreachable.keys():
            if node_id in view.others and node_id in view.confirmed:
                # Suspected, then confirmed: by its Status answer or its own signed request.
                log.info("%s answers again: it is a candidate again", view.others[node_id].peer.describe())
        for node_id in view.twins.keys() - before.twins.keys():  # another host with this node's address
            log.warning("%s. %s", describe_twin(view.me, view.twins[node_id]), TWIN_ADVICE)
        self.heard = self.heard.only(a.node_id for a in view.adverts)
        if self._told < VIEW_BURST:
            self._tell()
        else:
            self._untold = True

    def hear(self, *node_ids: str) -> None:
        """A sign of life of these peers (told at once when one was silent: the status changes)."""
        now = time.monotonic()
        node_ids = self._others(node_ids)
        was_silent = set(self.heard.silent(now, self.silent_after)) & set(node_ids)
        self.heard = self.heard.hear(node_ids, now)
        if was_silent:
            log.debug("heard again from %s", ", ".join(sorted(was_silent)))
            self.update(self._view)

    def miss(self, *node_ids: str) -> None:
        """A failed attempt to reach these peers."""
        self.heard = self.heard.miss(self._others(node_ids), time.monotonic())

    def _others(self, node_ids: Sequence[str]) -> tuple[str, ...]:
        """The peers of the view among `node_ids` (the record stays as small as the view),
        never this node: a Join stream vouches for every member, this node included, and
        this node is always seen by itself."""
        return tuple(n for n in node_ids if n in self._view.others)

    def distrust(self, peer: Peer, why: str) -> None:
        """Leave a peer that failed authentication out for good; said once per peer."""
        if peer.node_id in self._view.distrusted:
            return
        log.error(
            "authentication with peer %s at %s failed, leaving it out: %s. It does not hold the "
            "job's token, or this node's --token-file is not the job's", peer.node_id, peer.address, why,
        )
        self.update(self._view.distrust(peer.node_id))

    def close(self) -> None:
        if self._telling is not None:
            self._telling.cancel()

    def _settled(self) -> None:
        self._telling = None
        if self._untold:  # changes keep coming: once a window from now on
            self._told = VIEW_BURST
            self._tell()
        else:  # a quiet window: the next changes are told at once again
            self._told = 0

    def _tell(self) -> None:
        self._untold = False
        self._told += 1
        if self._telling is None:
            self._telling = asyncio.get_running_loop().call_later(self._settle, self._settled)
        self.changed.set()
        for listener in self._listeners:
            listener()
