"""Connections per source address: the daemon shuts down those of an address over its cap,
which gRPC cannot do (real sockets on loopback addresses, a real gRPC server)."""

from __future__ import annotations

import asyncio
import logging
import select
import socket

import attack
from rendezvous.coordinator import connections
from rendezvous.coordinator.server import bind_server

HANDSHAKE = 0.5  # the server's; connections are counted every fifth of it


def handshaked(port: int, source: str) -> socket.socket:
    """A connection from `source` that sends HTTP/2's preface and settings, then nothing."""
    s = attack.sent("127.0.0.1", port, source, attack.PREFACE)
    s.setblocking(False)
    return s


def ended(s: socket.socket) -> bool:
    """Whether the server ended the connection: what it sent is read up to the end."""
    try:
        while select.select([s], [], [], 0)[0]:
            if not s.recv(65536):
                return True
    except ConnectionError:
        return True
    return False


def test_connections_of_an_address_over_its_cap_are_shut_down_and_the_others_kept(monkeypatch, caplog):
    monkeypatch.setattr(connections, "MAX_PER_SOURCE", 8)
    monkeypatch.setattr(connections, "OTHER_DESCRIPTORS", 0)
    caplog.set_level(logging.WARNING, logger=connections.__name__)

    async def main():
        server, port = bind_server("127.0.0.1", 0, handshake=HANDSHAKE)
        await server.start()
        flood = [handshaked(port, "127.0.0.5") for _ in range(40)]
        honest = [handshaked(port, "127.0.0.6") for _ in range(3)]
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 100 * HANDSHAKE
            while sum(map(ended, flood)) < 40 - 8:
                assert loop.time() < deadline, f"{sum(map(ended, flood))} of the flood's connections ended"
                await asyncio.sleep(HANDSHAKE / 10)
            await asyncio.sleep(HANDSHAKE)  # another look or two: nothing more is shut down
            return [ended(s) for s in flood], [ended(s) for s in honest]
        finally:
            for s in flood + honest:
                s.close()
            await server.stop(None)

    flood, honest = asyncio.run(main())
    assert flood.count(False) == 8
    assert honest == [False, False, False]
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning == "shut down 32 connections from 127.0.0.5: at most 8 per address"


def test_nothing_is_counted_while_fewer_descriptors_are_open_than_one_address_may_hold(monkeypatch):
    looked = []
    monkeypatch.setattr(connections, "over_cap", lambda *args: looked.append(args) or {})
    cap = connections.ConnectionCap(port=1, every=1.0)
    cap.look()
    assert looked == []  # a test process holds far fewer than 256 + 64 descriptors
    monkeypatch.setattr(connections, "MAX_PER_SOURCE", 0)
    monkeypatch.setattr(connections, "OTHER_DESCRIPTORS", 0)
    cap.look()
    assert len(looked) == 1
