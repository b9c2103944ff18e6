"""Connections per source address, which gRPC cannot cap.

gRPC caps the server's connections only in total (`grpc.max_allowed_incoming_connections`,
see limits.py). One host that opens that many connections and finishes the HTTP/2 handshake
on each holds every place until the idle limit closes them (a minute), and no other node can
connect meanwhile: 8,500 such connections from one host held a job of three from forming for
as long as they were held (47 s).

So the daemon counts its own sockets. Whenever more descriptors are open than one address
may hold connections, the connections to the server's port are counted by the address
they come from, and those of an address over MAX_PER_SOURCE are shut down: shutdown(2),
not close(2), so that gRPC sees the caller's end of the stream and closes the descriptor
itself. Of an address's connections, the lowest-numbered descriptors are kept.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Optional

from ..core.peer import parse_address, unmapped
from ._guard import RateLimitedWarnings

log = logging.getLogger(__name__)

# Connections from one address at most: a node holds one or two to a peer, a host runs a
# few nodes, and on loopback every node's connections come from 127.0.0.1.
MAX_PER_SOURCE = 256
# Descriptors a daemon holds besides connections from one address (its files, its own
# channels, the command's pipes): below MAX_PER_SOURCE plus these, no address can be over.
OTHER_DESCRIPTORS = 64


def descriptors() -> list[int]:
    """The descriptors this process has open (none where /proc is missing)."""
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return []


def _source(fd: int, port: int) -> Optional[str]:
    """The caller's address if `fd` is a connection to this process's `port`."""
    try:
        s = socket.socket(fileno=fd)
    except OSError:  # closed meanwhile, or not a socket
        return None
    try:
        if s.family not in (socket.AF_INET, socket.AF_INET6) or s.type != socket.SOCK_STREAM:
            return None
        if s.getsockname()[1] != port:
            return None
        address = parse_address(s.getpeername()[0].split("%")[0])
    except (OSError, ValueError):  # the listening socket, or one not connected (yet)
        return None
    finally:
        s.detach()
    return str(unmapped(address))


def over_cap(port: int, fds: list[int]) -> dict[str, list[int]]:
    """Of the descriptors `fds`, the connections to `port` beyond MAX_PER_SOURCE per
    caller's address, by address: all but its MAX_PER_SOURCE lowest-numbered."""
    by_source: dict[str, list[int]] = {}
    for fd in sorted(fds):
        source = _source(fd, port)
        if source is not None:
            by_source.setdefault(source, []).append(fd)
    return {source: found[MAX_PER_SOURCE:] for source, found in by_source.items() if len(found) > MAX_PER_SOURCE}


def shut_down(fd: int, port: int, source: str) -> bool:
    """Shut down the connection `fd` if it is still one from `source` to `port`."""
    if _source(fd, port) != source:
        return False
    s = socket.socket(fileno=fd)
    try:
        s.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False
    finally:
        s.detach()


class ConnectionCap:
    """Looks every `every` seconds; counts the connections to `port` only when more
    descriptors are open than MAX_PER_SOURCE plus OTHER_DESCRIPTORS."""

    def __init__(self, port: int, every: float) -> None:
        self.port = port
        self.every = every
        self._warnings = RateLimitedWarnings(log, interval=60.0)  # an address named once a minute

    def look(self) -> None:
        fds = descriptors()
        if len(fds) <= MAX_PER_SOURCE + OTHER_DESCRIPTORS:
            return
        for source, excess in over_cap(self.port, fds).items():
            shut = sum(shut_down(fd, self.port, source) for fd in excess)
            if shut:
                self._warnings.warn("shut", source, "shut down %d connections from %s: at most %d per address",
                                    shut, source, MAX_PER_SOURCE)

    def watch(self) -> None:
        """Look now and every `every` seconds on the running loop."""
        self.look()
        asyncio.get_running_loop().call_later(self.every, self.watch)

