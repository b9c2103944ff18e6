"""Limits before authentication, over real gRPC on loopback: open calls per source address,
unary requests that never arrive, the descriptor limit, and Exchange's untrusted senders."""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import platform
import resource
import secrets
import socket
import subprocess
import sys
import weakref

import grpc
import pytest
from grpc_health.v1 import health

import attack
from rendezvous.config.options import Timings
from rendezvous.coordinator import CoordinatorService, limits, serve
from rendezvous.coordinator.client import exchange
from rendezvous.coordinator._wire import advert_to_pb
from rendezvous.core.advert import Advert
from rendezvous.core.auth import derive_keys
from rendezvous.core.adverts import MAX_PER_ADDRESS, AdvertStore, Gossip, Record
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import Target
from rendezvous.v1 import rendezvous_pb2 as pb

JOB = "limits"
STATUS = "/rendezvous.v1.Rendezvous/Status"
EXCHANGE = "/rendezvous.v1.Rendezvous/Exchange"
TIMINGS = Timings(handshake=0.5)
SERVER = "127.0.0.1"


async def start(keys=None, handshake=TIMINGS.handshake):
    """A node's server with the limits, and its service; Exchange answered by an advert store."""
    server = limits.new_server(TIMINGS.keepalive, handshake)
    port = server.add_insecure_port(f"{SERVER}:0")
    me = Peer(secrets.token_hex(6), ipaddress.ip_address(SERVER), port, port + 1)
    stores = [AdvertStore(10.0)]

    def exchange(gossip: Gossip) -> Gossip:
        store = stores[-1]
        records = gossip.records if gossip.source is None else store.admit(gossip.records, gossip.source)
        stores.append(store.merge(records, 0.0).store)
        return stores[-1].answer(gossip)

    service = CoordinatorService(
        me, JOB, Size.fixed(2), lambda: Target(me.endpoint, me),
        lambda: NodeStatus(node=me, job=JOB, expect=Size.fixed(2)), TIMINGS, keys=keys,
        liveness_timeout=5.0, policy=Policy(max_restarts=3), settle=0.0, exchange=exchange,
    )
    service.stores = stores  # what the Exchange calls brought in, newest last
    await serve(server, service, health.aio.HealthServicer())
    return server, me, service


def channel(me: Peer) -> grpc.aio.Channel:
    """A channel with a connection of its own."""
    return grpc.aio.insecure_channel(me.endpoint, options=[("grpc.use_local_subchannel_pool", 1)])


def held_call(ch: grpc.aio.Channel, timeout: float):
    """A Status call whose request never comes: opened as a stream that sends nothing."""
    return ch.stream_unary(STATUS, request_serializer=bytes, response_deserializer=bytes)(_never(), timeout=timeout)


async def _never():
    await asyncio.Event().wait()
    yield b""


def test_a_unary_call_whose_request_never_comes_ends_after_the_handshake_time():
    async def main():
        server, me, _ = await start()
        try:
            async with channel(me) as ch:
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await held_call(ch, timeout=40 * TIMINGS.handshake)
            assert failed.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
            assert "did not arrive in time" in failed.value.details()
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_calls_over_the_cap_of_one_address_are_refused_and_a_call_after_them_is_served():
    async def main():
        server, me, _ = await start()
        per_connection = 16  # _wire.server_options' max_concurrent_streams
        channels = [channel(me) for _ in range(limits.MAX_CALLS_PER_SOURCE // per_connection + 1)]
        try:
            calls = [held_call(ch, timeout=40 * TIMINGS.handshake) for ch in channels for _ in range(per_connection)]
            codes = []
            for call in calls:
                try:
                    await call
                    codes.append(grpc.StatusCode.OK)
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
            refused = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
            assert refused == len(calls) - limits.MAX_CALLS_PER_SOURCE, codes
            assert codes.count(grpc.StatusCode.DEADLINE_EXCEEDED) == limits.MAX_CALLS_PER_SOURCE
            status = channels[0].unary_unary(STATUS, request_serializer=bytes, response_deserializer=pb.StatusResponse.FromString)
            answer = await status(pb.StatusRequest().SerializeToString(), timeout=40 * TIMINGS.handshake)
            assert answer.self.node_id == me.node_id
        finally:
            await asyncio.gather(*(ch.close() for ch in channels))
            await server.stop(None)

    asyncio.run(main())


def held_elsewhere(me: Peer, count: int, source: str, frames=attack.held_status_frames) -> socket.socket:
    """`count` Status calls whose request never comes (or other calls `frames` opens), from
    another loopback address (tests/support/attack.py's HTTP/2 frames on a socket bound to
    `source`)."""
    return attack.sent(SERVER, me.port, source,
                       attack.PREFACE + b"".join(frames(2 * i + 1, me.endpoint.encode()) for i in range(count)))


@pytest.fixture
def made(monkeypatch) -> list:
    """Four places for calls waiting for their request; the CallLimits made, in order."""
    monkeypatch.setattr(limits, "MAX_WAITING", 4)
    made = []

    class Recorded(limits.CallLimits):
        def __init__(self, handshake: float) -> None:
            super().__init__(handshake)
            made.append(self)

    monkeypatch.setattr(limits, "CallLimits", Recorded)
    return made


async def answered(ch: grpc.aio.Channel, me: Peer, timeout: float) -> None:
    """An honest Status call, served."""
    status = ch.unary_unary(STATUS, request_serializer=bytes, response_deserializer=pb.StatusResponse.FromString)
    answer = await status(pb.StatusRequest().SerializeToString(), timeout=timeout)
    assert answer.self.node_id == me.node_id


def test_join_streams_that_never_send_their_join_wait_among_the_calls_waiting_for_their_request(made):
    """A Join stream's first message waits as a unary request does: streams held silent
    from one address fill the places, and an honest call from another address still gets
    in (10,000 silent Join streams from 160 addresses each had a place of their own)."""
    held_for = 60.0  # the server's handshake time: the silent streams outlast the test

    async def main():
        server, me, _ = await start(handshake=held_for)
        held = held_elsewhere(me, limits.MAX_WAITING + 2, "127.0.0.5", frames=attack.silent_join_frames)
        try:
            deadline = asyncio.get_running_loop().time() + held_for
            while made[0].refused < 2:  # the two over the four places
                assert asyncio.get_running_loop().time() < deadline, f"{made[0].waiting} streams wait"
                await asyncio.sleep(0.01)
            assert made[0].waiting == limits.MAX_WAITING
            async with channel(me) as ch:
                await answered(ch, me, timeout=held_for)
            assert made[0].waiting == limits.MAX_WAITING - 1  # a silent stream made room
        finally:
            held.close()
            await server.stop(None)

    asyncio.run(main())


def test_when_as_many_calls_wait_as_allowed_an_address_over_its_share_is_refused_and_another_gets_in(made):
    """Calls held open from one address fill the calls waiting for their request: an honest
    call from another address, whose request comes at once, is served (the held address's
    oldest call ends to make room); calls held from the second address too get in up to its
    share, and the next one is refused."""
    held_for = 60.0  # the server's handshake time: the held calls outlast the test

    async def main():
        server, me, _ = await start(handshake=held_for)
        held = held_elsewhere(me, limits.MAX_WAITING, "127.0.0.5")
        try:
            deadline = asyncio.get_running_loop().time() + held_for
            while made[0].waiting < limits.MAX_WAITING:
                assert asyncio.get_running_loop().time() < deadline, "the held calls never arrived"
                await asyncio.sleep(0.01)
            async with channel(me) as ch:
                await answered(ch, me, timeout=held_for)
                mine = []
                for _ in range(3):
                    mine.append(asyncio.ensure_future(held_call(ch, timeout=1.0)))
                    await asyncio.sleep(0.05)  # in this order
                codes = []
                for call in mine:
                    with pytest.raises(grpc.aio.AioRpcError) as failed:
                        await call
                    codes.append(failed.value.code().name)
                    if failed.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
                        assert failed.value.details() == "too many calls waiting for their request"
            # two of the four places for each of the two addresses: the third is refused, the
            # first two wait until the caller gives up
            assert codes == ["DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"], codes
            assert len(made[0]._waiting["127.0.0.5"]) == 2, made[0]._waiting
        finally:
            held.close()
            await server.stop(None)

    asyncio.run(main())


def test_the_server_raises_the_descriptor_limit_to_the_hard_limit_and_caps_connections_below_it():
    code = (
        "import resource\n"
        "from rendezvous.coordinator import limits\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(512, hard), hard))\n"
        "print(limits.raise_fd_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
    )
    raised, soft, hard = map(int, subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    if hard != resource.RLIM_INFINITY:
        assert raised == soft == hard
    options = dict(limits.server_options(5.0, 5.0, 1024))
    assert options["grpc.max_allowed_incoming_connections"] == 1024 - limits.FD_RESERVE
    assert options["grpc.server_handshake_timeout_ms"] == 5000
    assert options["grpc.max_metadata_size"] == limits.MAX_METADATA_BYTES


def test_trim_memory_frees_what_ended_calls_left_in_cycles_and_trims_glibc_heap():
    class Call:
        pass

    call = Call()
    call.itself = call  # a cycle: only the cyclic collector frees it
    gone = weakref.ref(call)
    enabled = gc.isenabled()
    gc.disable()  # no collection of its own meanwhile
    try:
        del call
        assert gone() is not None
        trimmed = limits.trim_memory()
    finally:
        if enabled:
            gc.enable()
    assert gone() is None
    assert trimmed is (platform.libc_ver()[0] == "glibc")


# -- Exchange from untrusted senders -----------------------------------------------------------


def advert(address: str, node_id: str = "", job: str = JOB) -> Advert:
    peer = Peer(node_id or secrets.token_hex(6), ipaddress.ip_address(address), 4000, 4001)
    return Advert(peer=peer, job=job, expect=Size.fixed(3))


def flood(own: int, others: int, source: str = SERVER) -> pb.Adverts:
    """An Exchange of `own` adverts at the sender's address after `others` forged elsewhere."""
    records = [advert(f"10.9.{i // 250}.{i % 250 + 1}") for i in range(others)] + [advert(source) for _ in range(own)]
    return pb.Adverts(header=pb.Header(protocol_version=1, sender_node_id="x"),
                      adverts=[advert_to_pb(a, serial=1) for a in records])


async def exchange_raw(me: Peer, request: pb.Adverts) -> pb.Adverts:
    async with channel(me) as ch:
        call = ch.unary_unary(EXCHANGE, request_serializer=pb.Adverts.SerializeToString, response_deserializer=pb.Adverts.FromString)
        return await call(request, timeout=40 * TIMINGS.handshake)


def test_an_exchange_without_a_token_brings_in_only_its_senders_own_adverts_a_bounded_number():
    async def main():
        server, me, service = await start()
        try:
            await exchange_raw(me, flood(own=MAX_PER_ADDRESS + 5, others=400))
            assert {str(a.peer.address) for a in service.stores[-1].adverts()} == {SERVER}
            assert len(service.stores[-1].adverts()) == MAX_PER_ADDRESS
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_with_a_token_an_unsigned_exchange_brings_nothing_in_and_a_signed_one_everything():
    keys = derive_keys(b"0123456789abcdef0123456789", JOB)

    async def main():
        server, me, service = await start(keys)
        try:
            answer = await exchange_raw(me, flood(own=2, others=3))
            assert not answer.header.auth.mac and not service.stores[-1].adverts()
            gossip = Gossip(tuple(Record(advert(f"10.9.0.{i}"), 1) for i in range(1, 4)))
            async with channel(me) as ch:
                await exchange(ch, gossip, "x", 40 * TIMINGS.handshake, keys)
            assert len(service.stores[-1].adverts()) == 3
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_both_kinds_of_response_streams_pass_the_limits():
    """Health's Watch writes its responses itself; FetchFiles is an async generator."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async def main():
        server, me, _ = await start()
        try:
            async with channel(me) as ch:
                watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""), timeout=40 * TIMINGS.handshake)
                first = await watch.read()
                watch.cancel()
                assert first.status == health_pb2.HealthCheckResponse.SERVING
                fetch = ch.unary_stream("/rendezvous.v1.Rendezvous/FetchFiles", request_serializer=pb.FetchRequest.SerializeToString,
                                        response_deserializer=bytes)
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    async for _ in fetch(pb.FetchRequest(header=pb.Header(protocol_version=1, job=JOB)), timeout=40 * TIMINGS.handshake):
                        pass
                assert failed.value.code() is grpc.StatusCode.FAILED_PRECONDITION  # no --sync-dir
        finally:
            await server.stop(None)

    asyncio.run(main())


def trims_at(monkeypatch, rss_mib: int, descriptors: list[int]) -> list[int]:
    """Which of the memory watch's looks trim, the lowest resident memory seen being 100 MiB
    and the memory `rss_mib` at every look (a trim frees nothing), with these descriptors
    open at each look; a look every handshake time."""
    trims: list[int] = []

    class Loop:
        """The loop as watch_memory uses it: a clock, and the next look it asks for."""

        now = 0.0
        look = 0
        next_look: tuple = ()

        def time(self) -> float:
            return self.now

        def call_later(self, delay, callback, *args):
            self.now += delay
            self.next_look = args

    loop = Loop()
    open_now = iter(descriptors)
    monkeypatch.setattr(limits.asyncio, "get_running_loop", lambda: loop)
    monkeypatch.setattr(limits, "rss_bytes", lambda: rss_mib << 20)
    monkeypatch.setattr(limits, "descriptors", lambda: range(next(open_now)))
    monkeypatch.setattr(limits, "trim_memory", lambda: trims.append(loop.look) or True)
    calls = limits.CallLimits(handshake=5.0)
    calls.floor = 100 << 20
    calls.watch_memory()
    for loop.look in range(1, len(descriptors)):
        calls.watch_memory(*loop.next_look)
    return trims


def test_memory_is_trimmed_again_as_soon_as_connections_close_whatever_the_backoff(monkeypatch):
    """A trim that frees nothing (memory in use) puts the next one off, but connections
    closing free their buffers to the allocator: a burst of descriptors fewer than at the
    last look trims at once."""
    # the first look trims and frees nothing, so the next trim is 2 handshake times later
    # (the third look), then 4: the fourth look is within that, but sees 2,950 descriptors
    # closed; after it, 8
    assert trims_at(monkeypatch, 200, [3000, 3000, 3000, 50, 50, 50]) == [0, 2, 3]


def test_connections_closing_in_a_burst_are_trimmed_after_from_a_quarter_of_the_growth(monkeypatch):
    """An attack's connections may end in parts: the later ones leave memory a trim has
    already taken below TRIM_GROWTH, which alone would never be trimmed again."""
    grown = 100 + limits.TRIM_GROWTH // 2 // (1 << 20)
    assert trims_at(monkeypatch, grown, [3000, 3000, 400, 400, 390]) == [2]
