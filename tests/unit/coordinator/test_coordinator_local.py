"""The coordinator's own member on its in-process Join stream (coordinator.local): the real
servicer and the real JoinSession, with queues instead of a TCP connection between them."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets

import grpc
import pytest

from patience import HANG

from rendezvous.config.timings import Timings
from rendezvous.coordinator import CoordinatorService, JoinSession
from rendezvous.coordinator.client import SessionLost, Untrusted
from rendezvous.coordinator.local import LocalCall
from rendezvous.core.auth import derive_keys
from rendezvous.core.member import Aborted, Frozen, Released, Waiting
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import Target
from rendezvous.v1 import rendezvous_pb2 as pb

JOB = "local"
TIMINGS = Timings(handshake=0.3, end_grace=0.1)


def peer(address: str) -> Peer:
    return Peer(secrets.token_hex(6), ipaddress.ip_address(address), 50051, 50052)


def service_of(me: Peer, expect: int = 1, keys=None) -> CoordinatorService:
    return CoordinatorService(
        me, JOB, Size.fixed(expect), lambda: Target(me.endpoint, me),
        lambda: NodeStatus(node=me, job=JOB, expect=Size.fixed(expect)), TIMINGS,
        liveness_timeout=5.0, policy=Policy(), settle=0.0, keys=keys,
    )


def session_of(me: Peer, service, expect: int = 1, keys=None) -> JoinSession:
    return JoinSession(me.endpoint, me, JOB, 1, Size.fixed(expect), 5.0, keys=keys, local=service)


async def next_of(session: JoinSession, kind: type):
    while not isinstance(event := await asyncio.wait_for(session.receive(), HANG), kind):
        pass
    return event


@pytest.mark.parametrize("address", ["10.0.0.1", "fd00::1"])
@pytest.mark.parametrize("keyed", [False, True], ids=["open", "token"])
def test_the_own_member_joins_is_frozen_and_released_in_process(address, keyed):
    async def scenario():
        me = peer(address)
        keys = derive_keys(b"s" * 32, JOB) if keyed else None
        service = service_of(me, keys=keys)
        session = session_of(me, service, keys=keys)
        try:
            await session.join()
            frozen = await next_of(session, Frozen)
            assert [p.node_id for p in frozen.membership.members] == [me.node_id]
            assert frozen.liveness_timeout == 5.0  # the coordinator's, which rules the round
            await session.ready(frozen.digest)
            await next_of(session, Released)
            assert service.round.running
        finally:
            await session.close()

    asyncio.run(scenario())


def test_a_member_with_another_token_is_refused_as_over_grpc():
    async def scenario():
        me = peer("10.0.0.1")
        service = service_of(me, keys=derive_keys(b"a" * 32, JOB))
        session = session_of(me, service, keys=derive_keys(b"b" * 32, JOB))
        try:
            await session.join()
            with pytest.raises(Untrusted, match="UNAUTHENTICATED"):
                await next_of(session, Frozen)
        finally:
            await session.close()

    asyncio.run(scenario())


def test_closing_the_session_is_the_members_leave_once_close_returns():
    async def scenario():
        me = peer("10.0.0.1")
        service = service_of(me, expect=2)
        session = session_of(me, service, expect=2)
        await session.join()
        waiting = await next_of(session, Waiting)
        assert [p.node_id for p in waiting.joined] == [me.node_id]
        await session.close()
        assert not service.round.joined

    asyncio.run(scenario())


class Handler:
    """A stand-in servicer: runs `body` on the context it is given."""

    def __init__(self, body) -> None:
        self.body = body

    async def Join(self, request_iterator, context) -> None:  # noqa: N802
        await self.body(context)


def coordinator_message(text: str) -> pb.CoordinatorMessage:
    return pb.CoordinatorMessage(redirect=pb.Redirect(reason=text))


def test_a_clean_end_reads_as_eof_and_a_write_after_it_fails():
    async def body(context):
        await context.write(coordinator_message("one"))

    async def scenario():
        call = LocalCall(Handler(body), peer("10.0.0.1"))
        assert (await call.read()).redirect.reason == "one"
        assert await call.read() is grpc.aio.EOF
        assert await call.read() is grpc.aio.EOF  # and stays ended
        with pytest.raises(RuntimeError):
            await call.write(pb.PeerMessage())

    asyncio.run(scenario())


def test_an_abort_reads_as_the_rpc_error_grpc_would_raise():
    async def body(context):
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many")

    async def scenario():
        call = LocalCall(Handler(body), peer("10.0.0.1"))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call.read()
        assert raised.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert raised.value.details() == "too many"

    asyncio.run(scenario())


def test_a_handler_bug_ends_the_stream_as_unknown_and_is_logged(caplog):
    async def body(context):
        raise KeyError("bug")

    async def scenario():
        me = peer("10.0.0.1")
        session = JoinSession(me.endpoint, me, JOB, 1, Size.fixed(1), 5.0, local=Handler(body))
        with pytest.raises(SessionLost, match="UNKNOWN KeyError"):
            await session.receive()
        await session.close()

    asyncio.run(scenario())
    assert "Join handler of this node's own member failed" in caplog.text


def test_the_servicer_sees_the_members_address_and_messages_cross_as_copies():
    seen = {}

    async def body(context):
        seen["peer"] = context.peer()
        seen["first"] = await context.read()
        message = coordinator_message("as written")
        await context.write(message)
        message.redirect.reason = "changed after the write"
        await asyncio.sleep(3600)

    async def scenario():
        call = LocalCall(Handler(body), peer("fd00::7"))
        sent = pb.PeerMessage(heartbeat=pb.Heartbeat())
        await call.write(sent)
        sent.header.job = "changed after the write"
        assert (await call.read()).redirect.reason == "as written"
        assert call.cancel()
        await call.wait_closed()
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await call.read()
        assert raised.value.code() is grpc.StatusCode.CANCELLED

    asyncio.run(scenario())
    assert seen["peer"] == "ipv6:[fd00::7]:0"
    assert seen["first"].header.job == ""


@pytest.mark.parametrize("liveness, expected", [
    (12.5, 12.5), (0.1, 0.1), (0.0, 0.0), (1e-9, None), (float("nan"), None), (float("inf"), None), (-1.0, None),
])
def test_a_frozen_list_with_a_liveness_timeout_that_is_no_duration_is_an_abort(liveness, expected):
    me = peer("10.0.0.1")

    async def body(context):
        frozen = pb.Frozen(members=[pb.Peer(node_id=me.node_id, address="10.0.0.1", port=50051, tf_port=50052)],
                           liveness_timeout=liveness)
        await context.write(pb.CoordinatorMessage(header=pb.Header(job=JOB, round=1), frozen=frozen))
        await asyncio.sleep(3600)

    async def scenario():
        session = JoinSession(me.endpoint, me, JOB, 1, Size.fixed(1), 5.0, local=Handler(body))
        try:
            return await asyncio.wait_for(session.receive(), HANG)
        finally:
            await session.close()

    event = asyncio.run(scenario())
    if expected is None:
        assert isinstance(event, Aborted), event
        assert event.reason == f"coordinator {me.endpoint} sent an invalid frozen message: " \
                               f"liveness timeout {liveness!r} is not a number of seconds from 0.1 up"
    else:
        assert isinstance(event, Frozen) and event.liveness_timeout == expected, event


@pytest.mark.parametrize("option, count", [("none", 0), ("all", None), ("1", 1)])
def test_the_frozen_list_carries_the_gpu_count_and_the_data_address(option, count):
    from rendezvous.core.gpus import GpuPolicy
    from rendezvous.core.preflight import Fingerprint
    from rendezvous.core.record import replace

    async def scenario():
        me = replace(peer("10.0.0.1"), data_address=ipaddress.ip_address("192.168.9.1"))
        service = CoordinatorService(
            me, JOB, Size.fixed(1), lambda: Target(me.endpoint, me),
            lambda: NodeStatus(node=me, job=JOB, expect=Size.fixed(1)), TIMINGS,
            liveness_timeout=5.0, policy=Policy(gpus=GpuPolicy.parse(option)), settle=0.0,
        )
        fingerprint = Fingerprint("3.11.9", None, ("T4",) * 2, gpu_ids=("0", "1"), gpu_option=option)
        session = JoinSession(me.endpoint, me, JOB, 1, Size.fixed(1), 5.0, fingerprint=fingerprint, local=service)
        try:
            await session.join()
            frozen = await next_of(session, Frozen)
            assert frozen.membership.gpus == count and frozen.membership.members == (me,)
            assert frozen.digest == frozen.membership.digest
            assert frozen.membership.members[0].tf_endpoint == "192.168.9.1:50052"
        finally:
            await session.close()

    asyncio.run(scenario())
