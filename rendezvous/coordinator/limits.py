"""What anyone who reaches a daemon's port may hold before proving anything.

Every node serves on a port any host of the network can reach, and a request is only
checked (job, token, claimed address) once it has arrived whole. Until then a caller holds
a connection (a descriptor), a call (memory in gRPC and a task here) or both. So:

* connections: the descriptor limit is raised to its hard limit at start, connections in
  total are capped below it (`grpc.max_allowed_incoming_connections`), one that does not
  finish the HTTP/2 handshake in time is closed (`grpc.server_handshake_timeout_ms`) and one
  with no call open is closed after a while (`_wire.MAX_IDLE_MS`). gRPC has no cap of
  connections per source address: the daemon shuts down those of an address over its
  share itself (connections.py);
* calls: at most MAX_CALLS_PER_SOURCE open calls from one address, of every RPC, and a
  unary request must arrive whole within the handshake time. gRPC only runs a unary
  method once its request has arrived, so such calls are served as streams here: they are
  counted, and timed, from the moment they open; a Join stream's first message waits the
  same way. Of the calls waiting for their request, at most MAX_WAITING: when they are
  that many, a new call from an address that holds its share of them is refused, and one
  from another address ends the oldest call of the address that holds the most, so that
  calls held open from many addresses cannot keep an honest one, whose request comes at
  once, from being served;
* memory: headers and messages are bounded in size, and once a burst of calls is over the
  cycles they left are collected and the C allocator is asked to give freed memory back
  (`trim_memory`), which glibc otherwise keeps in its arenas. (gRPC's poller is chosen
  for the same reason, before gRPC is imported: rendezvous.cli.startup.)
"""

from __future__ import annotations

import asyncio
import gc
import logging
import resource
from collections import Counter
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import grpc

from ..config.timings import Timings
from . import _wire
from ._guard import source_of
from .connections import descriptors

log = logging.getLogger(__name__)

# Open calls from one address at most, of every RPC: a node holds a Join stream and a few
# short calls, a host runs a few nodes. (Join streams have their own, lower cap.)
MAX_CALLS_PER_SOURCE = 128
# Calls waiting for their request (or a Join stream for its first message) at most, from
# all addresses: an honest request arrives in one packet, so this many waiting means
# someone holds them (see `_first` for who gets in then). Under 50,000 held calls from 160
# addresses, 256 left 57 MB resident after the attack and 128 left 53 (1,024 left 94 MB,
# when gRPC still polled with epoll1).
MAX_WAITING = 128
# Descriptors kept free of connections: the node's own files, channels and the command's pipes.
FD_RESERVE = 256
# Connections at most, whatever the descriptor limit: twice the largest job, each member
# holding one to its coordinator.
MAX_CONNECTIONS = 8192
# Header block (metadata) bytes a call may send: ours send a few dozen.
MAX_METADATA_BYTES = 8 * 1024
# Bytes a connection reads at a time (see `server_options`).
READ_CHUNK_BYTES = 2048
# A burst of at least this many calls (refused ones included) is followed by a trim of the
# allocator once it is over.
TRIM_AFTER = 256
# Resident memory grown by this much since the lowest seen is trimmed, whatever held it.
TRIM_GROWTH = 16 * 1024 * 1024
# Descriptors closed since the last look that are a burst of connections ending: what they
# held is trimmed once resident memory is a quarter of TRIM_GROWTH above the lowest seen.
CLOSED_BURST = 32


def raise_fd_limit() -> int:
    """Raise this process's soft descriptor limit to its hard limit; the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard:
        return soft if soft != resource.RLIM_INFINITY else MAX_CONNECTIONS + FD_RESERVE
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:
        log.debug("cannot raise the descriptor limit from %d to %d: %s", soft, hard, exc)
        return soft
    return hard


def max_connections(fd_limit: int) -> int:
    """Connections in total at most under a descriptor limit of `fd_limit`."""
    return max(16, min(MAX_CONNECTIONS, fd_limit - FD_RESERVE))


def server_options(keepalive: float, handshake: float, fd_limit: int) -> list[tuple[str, int]]:
    ms = max(1, int(handshake * 1000))
    return [
        *_wire.server_options(keepalive),
        ("grpc.max_allowed_incoming_connections", max_connections(fd_limit)),
        ("grpc.server_handshake_timeout_ms", ms),
        ("grpc.max_metadata_size", MAX_METADATA_BYTES),
        ("grpc.absolute_max_metadata_size", 2 * MAX_METADATA_BYTES),
        # Requests are small: reading them in small chunks keeps what each connection
        # holds small, and what stays with the allocator once it is closed (3,000 idle
        # connections left 23 MB behind with the defaults, 13.5 MB with these).
        ("grpc.experimental.tcp_read_chunk_size", READ_CHUNK_BYTES),
        ("grpc.experimental.tcp_min_read_chunk_size", 256),
        ("grpc.experimental.tcp_max_read_chunk_size", READ_CHUNK_BYTES),
    ]


def new_server(keepalive: float = Timings.keepalive, handshake: float = Timings.handshake) -> grpc.aio.Server:
    """A gRPC server with this module's limits; raises the descriptor limit first."""
    fd_limit = raise_fd_limit()
    calls = CallLimits(handshake)
    calls.floor = rss_bytes()  # before anyone could connect
    try:
        asyncio.get_running_loop().call_later(handshake, calls.watch_memory)
    except RuntimeError:
        pass  # no loop yet: only bursts of calls trim
    return grpc.aio.server(options=server_options(keepalive, handshake, fd_limit), interceptors=(calls,))


_libc: Any = None


def trim_memory() -> bool:
    """Free what ended calls left in reference cycles, then give the C heap's free memory
    back to the system (glibc's malloc_trim); False where there is no such call.

    A call held for seconds outlives the young generations' collections, so the cycles it
    leaves when it ends (its task, context and aborted exception) wait for a full one,
    which comes seldom: 50,000 held calls left some 30,000 such objects, and the gRPC
    calls they hold."""
    global _libc
    gc.collect()
    if _libc is None:
        import ctypes  # first use only: a daemon that is never attacked needn't load ctypes.util
        import ctypes.util

        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    if not _libc:
        return False
    _libc.malloc_trim(0)
    return True


def rss_bytes() -> int:
    """This process's resident memory (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


class _Wait:
    """A unary call waiting for its request, ended (its task cancelled) when its time is up
    or a newer call needs its place; `why` says which, as the abort's code and details."""

    DEADLINE = (grpc.StatusCode.DEADLINE_EXCEEDED, "the request did not arrive in time")
    ROOM = (grpc.StatusCode.RESOURCE_EXHAUSTED,
            "too many calls waiting for their request: this address holds the most, and this one waited longest")

    __slots__ = ("task", "source", "why")

    def __init__(self, task: Optional[asyncio.Task], source: str) -> None:
        self.task = task
        self.source = source
        self.why: Optional[tuple[grpc.StatusCode, str]] = None

    def end(self, why: tuple[grpc.StatusCode, str]) -> None:
        if self.why is None and self.task is not None:
            self.why = why
            self.task.cancel()

    def uncancel(self) -> None:
        """The cancellation was this one's, and is handled: a later await runs normally."""
        if self.task is not None and hasattr(self.task, "uncancel"):  # Python 3.11+
            self.task.uncancel()


class CallLimits(grpc.aio.ServerInterceptor):
    """Counts open calls per source address and refuses those over MAX_CALLS_PER_SOURCE with
    RESOURCE_EXHAUSTED; serves unary requests as streams so that a request that never
    arrives is counted, and ended after `handshake` seconds."""

    def __init__(self, handshake: float) -> None:
        self._handshake = handshake
        self.open: Counter[str] = Counter()  # open calls by source address
        self._total = 0
        # Unary calls whose request has not arrived, by source address, oldest first.
        self._waiting: dict[str, dict[_Wait, None]] = {}
        self._waiting_total = 0
        self.refused = 0
        self._calls = 0  # calls since the last trim, refused ones included
        self._trim: Optional[asyncio.TimerHandle] = None
        self.floor: Optional[int] = None  # the lowest resident bytes seen

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return handler
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(
                self._stream(handler.stream_stream), handler.request_deserializer, handler.response_serializer
            )
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(handler.stream_unary), handler.request_deserializer, handler.response_serializer
            )
        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(
                self._unary_stream(handler.unary_stream), handler.request_deserializer, handler.response_serializer
            )
        return grpc.stream_unary_rpc_method_handler(
            self._unary_unary(handler.unary_unary), handler.request_deserializer, handler.response_serializer
        )

    # -- counting --------------------------------------------------------------------

    async def _enter(self, context: grpc.aio.ServicerContext) -> str:
        source = source_of(context)
        self._calls += 1
        if self.open[source] >= MAX_CALLS_PER_SOURCE:
            self._refuse()
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many calls from this address")
        self.open[source] += 1
        self._total += 1
        return source

    def _leave(self, source: str) -> None:
        self.open[source] -= 1
        self._total -= 1
        if not self.open[source]:
            del self.open[source]
        self._after_call()

    def _refuse(self) -> None:
        self.refused += 1
        self._after_call()

    def _after_call(self) -> None:
        """Trim once a burst of calls is over and has stayed over for the handshake time:
        an attack comes in waves, and a trim costs a walk over the heap."""
        if self._total or self._calls < TRIM_AFTER:
            return
        if self._trim is not None:
            self._trim.cancel()
        self._trim = asyncio.get_running_loop().call_later(self._handshake, self._trim_now)

    def _trim_now(self) -> None:
        self._trim = None
        if not self._total:
            log.debug("%d calls since the last trim, %d refused: trimming the heap", self._calls, self.refused)
            self._calls = 0
            trim_memory()

    def watch_memory(self, backoff: Optional[float] = None, due: float = 0.0, fds: int = 0) -> None:
        """Trim when resident memory is TRIM_GROWTH above the lowest seen: idle connections
        make no calls, and the buffers gRPC frees when it closes them stay with the
        allocator until then. Looks every handshake time. After a trim that freed nothing
        (memory really in use) the next waits twice as long, up to 16 handshake times.
        Connections closed in a burst since the last look (CLOSED_BURST descriptors fewer)
        are trimmed after at once, from a quarter of TRIM_GROWTH: an attack's connections
        may end in parts, the later ones after a trim has taken memory below TRIM_GROWTH."""
        loop = asyncio.get_running_loop()
        backoff = backoff or self._handshake
        rss, now, open_now = rss_bytes(), loop.time(), len(descriptors())
        self.floor = rss if self.floor is None else min(self.floor, rss)
        grown = rss - self.floor
        closed = fds - open_now >= CLOSED_BURST
        if (grown > TRIM_GROWTH and now >= due) or (closed and grown > TRIM_GROWTH // 4):
            trim_memory()
            after = rss_bytes()
            log.debug("trimmed the heap: %d -> %d MiB resident", rss >> 20, after >> 20)
            backoff = self._handshake if rss - after > TRIM_GROWTH // 4 else min(2 * backoff, 16 * self._handshake)
            due = now + backoff
        loop.call_later(self._handshake, self.watch_memory, backoff, due, open_now)

    @property
    def waiting(self) -> int:
        """Unary calls waiting for their request."""
        return self._waiting_total

    async def _request(self, context: grpc.aio.ServicerContext, source: str) -> Any:
        """The one request of a unary call (see `_first`)."""
        request = await self._first(context, source)
        if request is grpc.aio.EOF:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no request")
        return request

    async def _first(self, context: grpc.aio.ServicerContext, source: str) -> Any:
        """A call's first message (or EOF), within the handshake time. If MAX_WAITING calls
        wait already, one from an address that holds its share of them (or more) is
        refused, and one from another address ends the oldest of the address that holds
        the most: an honest node's call, whose message comes at once, always gets in."""
        if self._waiting_total >= MAX_WAITING:
            self._refuse()
            if len(self._waiting.get(source, ())) * len(self._waiting) >= MAX_WAITING:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many calls waiting for their request")
            heaviest = max(self._waiting.values(), key=len)
            oldest = next(iter(heaviest))
            self._forget(oldest)
            oldest.end(_Wait.ROOM)
        wait = _Wait(asyncio.current_task(), source)
        self._waiting.setdefault(source, {})[wait] = None
        self._waiting_total += 1
        timer = asyncio.get_running_loop().call_later(self._handshake, wait.end, _Wait.DEADLINE)
        try:
            return await context.read()
        except asyncio.CancelledError:
            if wait.why is None:
                raise  # cancelled from elsewhere: the call ends
            wait.uncancel()
            await context.abort(*wait.why)
        finally:
            timer.cancel()
            self._forget(wait)

    def _forget(self, wait: "_Wait") -> None:
        waits = self._waiting.get(wait.source)
        if waits is None or wait not in waits:
            return
        del waits[wait]
        self._waiting_total -= 1
        if not waits:
            del self._waiting[wait.source]

    # -- the four kinds of RPC ---------------------------------------------------------

    def _unary_unary(self, method: Callable) -> Callable:
        async def behaviour(requests: AsyncIterator, context: grpc.aio.ServicerContext) -> Any:
            source = await self._enter(context)
            try:
                return await method(await self._request(context, source), context)
            finally:
                self._leave(source)

        return behaviour

    def _unary_stream(self, method: Callable) -> Callable:
        async def behaviour(requests: AsyncIterator, context: grpc.aio.ServicerContext) -> None:
            source = await self._enter(context)
            try:
                await _respond(method(await self._request(context, source), context), context)
            finally:
                self._leave(source)

        return behaviour

    def _unary(self, method: Callable) -> Callable:
        async def behaviour(requests: AsyncIterator, context: grpc.aio.ServicerContext) -> Any:
            source = await self._enter(context)
            try:
                return await method(requests, context)
            finally:
                self._leave(source)

        return behaviour

    def _stream(self, method: Callable) -> Callable:
        async def behaviour(requests: AsyncIterator, context: grpc.aio.ServicerContext) -> None:
            source = await self._enter(context)
            try:
                await _respond(method(requests, _FirstRead(context, self._first, source)), context)
            finally:
                self._leave(source)

        return behaviour


class _FirstRead:
    """A streaming call's context whose first `read()` waits as a unary request does, among
    the calls waiting for their first message (CallLimits._first): a Join stream that never
    sends its join holds a place there, not one of its own. Everything else is the call's."""

    def __init__(self, context: grpc.aio.ServicerContext, first: Callable, source: str) -> None:
        self._context = context
        self._first: Optional[Callable] = first
        self._source = source

    async def read(self) -> Any:
        if self._first is None:
            return await self._context.read()
        first, self._first = self._first, None
        return await first(self._context, self._source)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


async def _respond(result: Any, context: grpc.aio.ServicerContext) -> None:
    """Run a response-streaming method, written either way grpc.aio allows: an async
    generator of responses, or a coroutine that writes them itself."""
    if hasattr(result, "__aiter__"):
        async for response in result:
            await context.write(response)
    else:
        await result
