"""Bounded attacks on a daemon's port, run from a test's or a benchmark's own host; each stops
by itself and prints one JSON line of what it did.

    attack.py exchange ENDPOINT JOB ADVERTS PER_CALL    forged adverts of JOB at addresses
                                                        below every host's, PER_CALL per
                                                        Exchange, 25 calls at a time
    attack.py idle ENDPOINT COUNT SECONDS               COUNT TCP connections that send
                                                        nothing, held SECONDS
    attack.py open ENDPOINT COUNT SECONDS               COUNT connections that finish the
                                                        HTTP/2 handshake (the preface and
                                                        settings) and make no call, held
                                                        SECONDS
    attack.py held ENDPOINT COUNT SECONDS [SOURCES]     COUNT Status calls that send a 5-byte
                                                        message prefix and never finish, held
                                                        SECONDS, from SOURCES local addresses
                                                        (the host's extra ones, `ip addr add`)
    attack.py joins ENDPOINT COUNT SECONDS [SOURCES]    COUNT Join streams that never send
                                                        their first message, as held
"""

from __future__ import annotations

import asyncio
import json
import resource
import secrets
import socket
import sys
import time

import grpc

from rendezvous.coordinator._wire import advert_to_pb
from rendezvous.core.advert import Advert
from rendezvous.core.peer import Peer, parse_address
from rendezvous.core.size import Size
from rendezvous.v1 import rendezvous_pb2 as pb

EXCHANGE = "/rendezvous.v1.Rendezvous/Exchange"
# HTTP/2: the preface, an empty SETTINGS frame, then a HEADERS frame opening stream 1 (HPACK
# literals without indexing) for a POST of Status, then a DATA frame holding only the gRPC
# length prefix of a message that never follows.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def _literal(name: bytes, value: bytes) -> bytes:
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def held_status_frames(stream: int, authority: bytes) -> bytes:
    """A Status call whose request stops after its length prefix."""
    return _headers(stream, authority, b"Status") + _frame(0, 0, stream, b"\x00\x00\x00\x00\x40")


def silent_join_frames(stream: int, authority: bytes) -> bytes:
    """A Join stream opened, and nothing sent on it."""
    return _headers(stream, authority, b"Join")


def _headers(stream: int, authority: bytes, method: bytes) -> bytes:
    headers = b"".join((
        _literal(b":method", b"POST"), _literal(b":scheme", b"http"),
        _literal(b":path", b"/rendezvous.v1.Rendezvous/" + method), _literal(b":authority", authority),
        _literal(b"content-type", b"application/grpc"), _literal(b"te", b"trailers"),
    ))
    return _frame(1, 0x4, stream, headers)


def forged(job: str, count: int) -> list[pb.AdvertRecord]:
    """Adverts of `job` at addresses below any test host's (10.0.x.y)."""
    found = []
    for i in range(count):
        peer = Peer(secrets.token_hex(6), parse_address(f"10.0.{i // 250 % 250}.{i % 250 + 1}"), 4000, 4001)
        found.append(advert_to_pb(Advert(peer=peer, job=job, expect=Size.fixed(3)), serial=1))
    return found


async def exchange_flood(endpoint: str, job: str, adverts: int, per_call: int) -> dict:
    records = forged(job, adverts)
    calls = [records[i:i + per_call] for i in range(0, len(records), per_call)]
    codes: dict[str, int] = {}
    took: list[float] = []
    # 8 calls per connection: the server refuses streams over its cap of 16 per connection
    # that arrive before its settings do
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.use_local_subchannel_pool", 1)]
    channels = [grpc.aio.insecure_channel(endpoint, options=options) for _ in range(4)]
    gate = asyncio.Semaphore(25)

    async def one(n: int, batch: list[pb.AdvertRecord]) -> None:
        call = channels[n % len(channels)].unary_unary(
            EXCHANGE, request_serializer=pb.Adverts.SerializeToString, response_deserializer=pb.Adverts.FromString
        )
        request = pb.Adverts(header=pb.Header(protocol_version=1, sender_node_id=secrets.token_hex(6)), adverts=batch)
        async with gate:
            started = time.monotonic()
            try:
                await call(request, timeout=60)
                code = "OK"
            except grpc.aio.AioRpcError as exc:
                code = exc.code().name
            took.append(time.monotonic() - started)
            codes[code] = codes.get(code, 0) + 1

    try:
        await asyncio.gather(*(one(n, batch) for n, batch in enumerate(calls)))
    finally:
        await asyncio.gather(*(c.close() for c in channels))
    took.sort()
    return {"calls": len(calls), "codes": codes, "median_s": took[len(took) // 2] if took else None,
            "max_s": took[-1] if took else None}


def _connect(host: str, port: int, source: str = "") -> socket.socket:
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    if source:
        s.bind((source, 0))
    s.setblocking(False)
    try:
        s.connect((host, port))
    except BlockingIOError:
        pass
    return s


async def idle(endpoint: str, count: int, seconds: float, handshake: bool = False) -> dict:
    """`count` connections that send nothing, or (`handshake`) only HTTP/2's preface. Says
    `{"opened": N}` on a line of its own once they are open, before it holds them."""
    host, port = endpoint.rsplit(":", 1)
    held = []
    refused = 0
    for _ in range(count):
        try:
            s = _connect(host.strip("[]"), int(port))
            if handshake and _wait_connected(s):
                await asyncio.get_running_loop().sock_sendall(s, PREFACE)
            held.append(s)
        except OSError:
            refused += 1
        if len(held) % 100 == 0:
            await asyncio.sleep(0)
    print(json.dumps({"opened": len(held)}), flush=True)
    await asyncio.sleep(seconds)
    open_ = sum(1 for s in held if _alive(s))
    for s in held:
        s.close()
    return {"connections": len(held), "refused": refused, "still_open": open_}


def _alive(s: socket.socket) -> bool:
    """Whether the server still holds the connection: what it sent is read, up to its end."""
    try:
        while s.recv(65536):
            pass
        return False  # the end of the stream: closed by the server
    except BlockingIOError:
        return True
    except OSError:
        return False


async def held(endpoint: str, count: int, seconds: float, sources: list[str], frames=held_status_frames) -> dict:
    """`count` held calls, 16 per connection (the server's cap of streams), connections
    spread over `sources`; `frames` opens one."""
    host, port = endpoint.rsplit(":", 1)
    per_connection = 16
    held_sockets = []
    for n in range(0, count, per_connection):
        source = sources[(n // per_connection) % len(sources)] if sources else ""
        try:
            s = _connect(host.strip("[]"), int(port), source)
        except OSError:
            continue
        data = PREFACE + b"".join(
            frames(2 * i + 1, endpoint.encode()) for i in range(min(per_connection, count - n))
        )
        if _wait_connected(s):
            await asyncio.get_running_loop().sock_sendall(s, data)
        held_sockets.append(s)
    await asyncio.sleep(seconds)
    for s in held_sockets:
        s.close()
    return {"calls": count, "connections": len(held_sockets)}


def _wait_connected(s: socket.socket, timeout: float = 5.0) -> bool:
    import select

    poller = select.poll()  # select() cannot take descriptors above 1023
    poller.register(s, select.POLLOUT)
    return bool(poller.poll(timeout * 1000)) and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0


def sent(host: str, port: int, source: str, data: bytes) -> socket.socket:
    """A blocking connection from `source` that has sent `data` (for tests that hold a few
    such connections themselves); AssertionError if it cannot connect."""
    s = _connect(host, port, source)
    assert _wait_connected(s), f"no connection to {host}:{port}"
    s.setblocking(True)
    s.sendall(data)
    return s


def main(argv: list[str]) -> None:
    kind, endpoint, *rest = argv
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # thousands of connections
    except (ValueError, OSError):
        pass
    if kind == "exchange":
        result = asyncio.run(exchange_flood(endpoint, rest[0], int(rest[1]), int(rest[2])))
    elif kind in ("idle", "open"):
        result = asyncio.run(idle(endpoint, int(rest[0]), float(rest[1]), handshake=kind == "open"))
    else:
        frames = silent_join_frames if kind == "joins" else held_status_frames
        sources = rest[2].split(",") if len(rest) > 2 else []
        result = asyncio.run(held(endpoint, int(rest[0]), float(rest[1]), sources, frames))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
