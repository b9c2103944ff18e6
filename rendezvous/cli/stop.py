"""`rendezvous stop --job NAME`: end a running job from any host.

Finds the job's coordinator as `status --job` does, asks it to stop the job (a Stop
request, signed with --token-file where the job has a token), then waits until every
member it told has ended: its daemon no longer answers. Every member logs who asked and
its `join` exits with JobStopped's status; no restart follows.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pwd
import time
from typing import IO, Optional

from ..core.peer import IPAddress, Peer
from ..errors import NoDaemonError, RendezvousError, RendezvousTimeout
from .finding import Lookup, find_coordinator

log = logging.getLogger(__name__)

# How often the members' daemons are asked whether they are still there.
POLL = 0.1


def user_name() -> str:
    """Who asks, for the members' logs: this process's user."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


async def _gone(peer: Peer, timeout: float, lookup: Lookup) -> bool:
    """Whether the member's daemon has ended: nothing listens at its endpoint any more, or
    another node does (its port taken again). One that is there but does not answer in
    time (stopped, starved, cut off) has not ended."""
    from ..coordinator.client import Unreachable, fetch_status

    try:
        status = await fetch_status(peer.endpoint, timeout, lookup.keys)
    except Unreachable:
        return True
    except RendezvousError:  # something is there: a slow answer, or one not ours to judge
        return False
    return status.node.node_id != peer.node_id


async def stop(job: str, address: IPAddress, lookup: Lookup, timeout: float, reason: str = "",
               grace: Optional[float] = None) -> dict:
    """Stop `job` and wait until its members have ended, within `timeout` seconds in all;
    what happened, as the JSON output shows it."""
    from ..coordinator import stop_job

    began = time.monotonic()

    def left() -> float:
        remaining = timeout - (time.monotonic() - began)
        if remaining <= 0:
            raise RendezvousTimeout(f"job {job!r}: --timeout {timeout:g}s passed before it was stopped")
        return remaining

    endpoint = await find_coordinator(job, address, left(), lookup)
    user = user_name()
    answer = await stop_job(endpoint, job, left(), lookup.keys, user, reason, grace)
    if not answer.coordinating and answer.coordinator is not None and answer.coordinator.endpoint != endpoint:
        log.debug("%s does not coordinate job %r: asking %s", endpoint, job, answer.coordinator.endpoint)
        endpoint = answer.coordinator.endpoint
        # addressed to the node id its own Status gives, not to the one the first node believes
        answer = await stop_job(endpoint, job, left(), lookup.keys, user, reason, grace)
    if not answer.coordinating:
        raise NoDaemonError(f"no node coordinates job {job!r} now: {endpoint} does not, and knows of none that does")
    asked = time.monotonic()
    log.debug("job %r: %s took the stop in round %d (%s), for %d members", job, endpoint, answer.round,
             answer.phase, len(answer.members))
    ended: dict[str, float] = {}
    waiting = list(answer.members)
    while waiting:
        ask = min(1.0, left())
        gone = await asyncio.gather(*(_gone(p, ask, lookup) for p in waiting))
        now = time.monotonic()
        for peer, done in zip(waiting, gone):
            if done:
                ended[peer.node_id] = now - asked
        waiting = [p for p, done in zip(waiting, gone) if not done]
        if waiting:
            if timeout - (now - began) <= POLL:
                still = ", ".join(p.describe() for p in waiting)
                raise RendezvousTimeout(f"job {job!r} took the stop, but within --timeout {timeout:g}s these "
                                        f"members did not end: {still}")
            await asyncio.sleep(POLL)
    return {
        "job": job, "coordinator": endpoint, "round": answer.round, "phase": answer.phase, "user": user,
        "reason": reason,
        "members": [{"node_id": p.node_id, "address": str(p.address), "endpoint": p.endpoint,
                     "ended_after_seconds": round(ended[p.node_id], 3)} for p in answer.members],
        "seconds": round(time.monotonic() - asked, 3),
    }


def describe(result: dict) -> str:
    members = result["members"]
    lines = [f"job {result['job']!r} stopped: asked {result['coordinator']} in round {result['round']} "
             f"({result['phase']}); {len(members)} members ended within {result['seconds']:.2f} s"]
    lines += [f"  {m['endpoint']}  node {m['node_id']}  ended after {m['ended_after_seconds']:.2f} s" for m in members]
    return "\n".join(lines)


def run_stop(given: dict, out: IO[str]) -> None:
    """`rendezvous stop` with its checked options."""
    from ..errors import ConfigError
    from ..host.address import choose_address
    from .finding import lookup_from

    job = given["job"]
    if job is None:
        raise ConfigError("stop needs --job NAME: the job to stop")
    lookup = lookup_from(given, job)
    choice = choose_address(given["address"], given["interface"])
    result = asyncio.run(stop(job, choice.address, lookup, given["timeout"], given["reason"], given["stop_grace"]))
    out.write((json.dumps(result, indent=2) if given["json"] else describe(result)) + "\n")
