"""A knock at a TCP port: does anything answer there? (rendezvous.core.reach says what
follows from it.)"""

from __future__ import annotations

import asyncio

from ..core.reach import Knock


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """`10.0.0.2:2222` or `[fd00::2]:2222` -> (host, port)."""
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


async def knock(endpoint: str, timeout: float) -> Knock:
    """Connect to `endpoint` and close at once: OPEN, REFUSED (the host answered: nothing
    listens, or a filter rejects), or SILENT (no answer within `timeout`: dropped)."""
    host, port = split_endpoint(endpoint)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (asyncio.TimeoutError, TimeoutError):
        return Knock.SILENT
    except OSError:
        return Knock.REFUSED
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return Knock.OPEN
