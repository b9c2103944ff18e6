"""While the command runs: knock at every member's TensorFlow port until each answers, and
name one that stays silent (rendezvous.core.reach); the command's end is its exit, or that."""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Optional

from ..core.peer import Peer
from ..core.reach import Reach, blocked_reason
from ..core.round import ROUND_FAILED
from ..core.tf_config import Membership
from ..host.knock import knock


async def watch_tf_ports(me: Peer, membership: Membership, window: float, interval: float = 1.0) -> Optional[str]:
    """The reason to fail this node's command when another member's TensorFlow port stays
    silent for `window` seconds after this node's own listens; None once every port answered
    (or with a window of 0, or alone)."""
    others = {p.tf_endpoint: p for p in membership.members if p.node_id != me.node_id}
    mine = [p.tf_endpoint for p in membership.members if p.node_id == me.node_id]
    if window <= 0 or not others or not mine:
        return None
    reach = Reach(window)
    while True:
        # the others only once this node's own worker listens: a command that is no
        # TensorFlow worker (it never does) costs one knock a second, not one per member
        endpoints = reach.to_knock(tuple(others)) if reach.own_since is not None else ()
        if reach.own_since is not None and not endpoints:
            return None
        started = time.monotonic()
        timeout = max(interval, 0.5)
        own, *found = await asyncio.gather(*(knock(e, timeout) for e in (mine[0], *endpoints)))
        now = time.monotonic()
        reach = reach.saw(own, dict(zip(endpoints, found)), now)
        blocked = reach.blocked(now)
        if blocked is not None:
            holder = others[blocked]
            return blocked_reason(blocked, f"rank {membership.rank_of(holder.node_id)}, {holder.describe()}", window)
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


async def command_end(exited: Callable[[], Awaitable[int]], me: Peer, membership: Membership, window: float) -> tuple[int, str]:
    """How the command ended: (its exit code, ""), or (ROUND_FAILED, why) when another
    member's TensorFlow port was found blocked first (the command still runs then: the
    round's end stops it). A fault of the watch never fails the command."""
    command = asyncio.ensure_future(exited())
    watch = asyncio.ensure_future(watch_tf_ports(me, membership, window))
    try:
        done, _ = await asyncio.wait({command, watch}, return_when=asyncio.FIRST_COMPLETED)
        if command not in done and watch.exception() is None and watch.result():
            return ROUND_FAILED, watch.result() or ""
        return await command, ""
    finally:
        command.cancel()
        watch.cancel()
