"""A Join stream that the coordinator ends while the member writes to it, over real gRPC:
grpc.aio then reports its own internal error instead of the coordinator's status
(grpc/grpc#36066); the member says what happened, not "Internal error from Core"."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets

import grpc
import pytest

from rendezvous.coordinator.client import JoinSession, SessionLost
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.v1 import rendezvous_pb2_grpc as pb_grpc

REASON = "the coordinator's own reason"


class EndsAtOnce(pb_grpc.RendezvousServicer):
    async def Join(self, requests, context):  # noqa: N802
        await context.read()
        await context.abort(grpc.StatusCode.FAILED_PRECONDITION, REASON)


def test_a_stream_ended_while_the_member_writes_is_named_as_such():
    async def main() -> list[str]:
        server = grpc.aio.server()
        pb_grpc.add_RendezvousServicer_to_server(EndsAtOnce(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        me = Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.1"), 1, 2)
        said = []
        try:
            for _ in range(20):
                session = JoinSession(f"127.0.0.1:{port}", me, "job", 1, Size.fixed(2), keepalive=None)
                await session.join()

                async def write() -> None:
                    for _ in range(50):
                        await session.heartbeat()

                writing = asyncio.ensure_future(write())
                with pytest.raises(SessionLost) as lost:
                    await session.receive()
                await asyncio.gather(writing, return_exceptions=True)
                said.append(str(lost.value))
                await session.close()
        finally:
            await server.stop(None)
        return said

    said = asyncio.run(main())
    assert all("Internal error from Core" not in s for s in said), said
    assert all(REASON in s or "the coordinator ended the stream" in s for s in said), said
