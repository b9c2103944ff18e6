"""The Join stream of a coordinator's own member, inside the process.

The node that coordinates a round is also one of its members. Its member used to reach its
own servicer over TCP: a connection to itself, an HTTP/2 handshake at the start, and the
server's keepalive pings on it every few seconds for as long as the node waits, which cost
a waiting daemon more CPU than all of its own work. Here the two ends of that stream are
two queues.

Everything else is as over gRPC: the servicer runs its same `Join` handler on a context
that offers what it uses (`peer`, `read`, `write`, `abort`), and the member's
`JoinSession` reads and writes a call that behaves like grpc.aio's: `read` gives
`grpc.aio.EOF` at a clean end and raises `AioRpcError` after an abort. Messages cross as
copies, serialized and parsed as on the wire: neither end holds an object the other
might still change (a broadcast message is one object, shared by every member's stream).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Optional, Protocol, TypeVar, Union

import grpc

from ..core.peer import Peer
from ..v1 import rendezvous_pb2 as pb

log = logging.getLogger(__name__)

_Message = TypeVar("_Message", pb.PeerMessage, pb.CoordinatorMessage)


class JoinHandler(Protocol):
    async def Join(self, request_iterator: None, context: "LocalContext") -> None: ...  # noqa: N802


def _copy(message: _Message) -> _Message:
    """The message as the other end would parse it off the wire."""
    return type(message).FromString(message.SerializeToString())


class _End:
    """The handler returned (OK) or aborted (its status): the member's reads end here."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        self.details = details


class LocalContext:
    """The servicer's end: the part of grpc.aio.ServicerContext that `Join` uses."""

    def __init__(self, caller: Peer, inbox: asyncio.Queue, outbox: asyncio.Queue) -> None:
        self._peer = f"ipv{caller.address.version}:{caller.host}:0"  # as gRPC names a caller
        self._inbox = inbox
        self._outbox = outbox
        self.status: Optional[_End] = None

    def peer(self) -> str:
        return self._peer

    async def read(self) -> pb.PeerMessage:
        return await self._inbox.get()

    async def write(self, message: pb.CoordinatorMessage) -> None:
        self._outbox.put_nowait(_copy(message))

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        self.status = _End(code, details)
        raise grpc.aio.AbortError(details)


class LocalCall:
    """The member's end: the part of a grpc.aio stream-stream call that JoinSession uses.
    Starts the servicer's handler at once, as a call starts it on the server."""

    def __init__(self, handler: JoinHandler, caller: Peer) -> None:
        self._to_server: asyncio.Queue[pb.PeerMessage] = asyncio.Queue()
        self._to_member: asyncio.Queue[Union[pb.CoordinatorMessage, _End]] = asyncio.Queue()
        context = LocalContext(caller, self._to_server, self._to_member)
        self._task = asyncio.ensure_future(self._serve(handler, context))

    async def _serve(self, handler: JoinHandler, context: LocalContext) -> None:
        end = _End(grpc.StatusCode.CANCELLED, "the member closed the stream")
        try:
            await handler.Join(None, context)
            end = _End(grpc.StatusCode.OK, "")
        except grpc.aio.AbortError:
            end = context.status or _End(grpc.StatusCode.UNKNOWN, "aborted")
        except Exception as exc:  # a bug in the handler: gRPC would log it and end the call
            log.exception("the Join handler of this node's own member failed")
            end = _End(grpc.StatusCode.UNKNOWN, f"{type(exc).__name__}: {exc}")
        finally:
            self._to_member.put_nowait(end)

    async def write(self, message: pb.PeerMessage) -> None:
        if self._task.done():
            raise RuntimeError("the stream has ended")
        self._to_server.put_nowait(_copy(message))

    async def read(self) -> Union[pb.CoordinatorMessage, object]:
        item = await self._to_member.get()
        if not isinstance(item, _End):
            return item
        self._to_member.put_nowait(item)  # every later read ends the same way
        if item.code is grpc.StatusCode.OK:
            return grpc.aio.EOF
        raise grpc.aio.AioRpcError(item.code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=item.details)

    def cancel(self) -> bool:
        return self._task.cancel()

    async def wait_closed(self) -> None:
        """Until the handler has ended (a cancelled one has run its cleanup: the member left)."""
        await asyncio.gather(self._task, return_exceptions=True)
