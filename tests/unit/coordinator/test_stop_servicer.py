"""The Stop RPC and who may read a job's status, through a real gRPC server on loopback:
with a token only a signed, fresh, never-seen stop is taken, and an unsigned Status or
JobStatus learns only that the job needs a token; the stop reaches the joined members (and
any member that joins later) as a final Aborted with who asked; a node that does not
coordinate names the one that does."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import time

import grpc
import pytest
from grpc_health.v1 import health

from rendezvous.config.timings import Timings
from rendezvous.coordinator import (
    CoordinatorService, JoinSession, StatusUntrusted, TokenNeeded, fetch_job_status, fetch_status, serve, stop_job,
)
from rendezvous.coordinator import _auth, _wire, limits
from rendezvous.coordinator.client import TokenRefused, stop_request
from rendezvous.core.auth import derive_keys
from rendezvous.core.member import Aborted, Waiting
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy, RoundPhase
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import Target
from rendezvous.errors import JobStopped, RequestRefused
from rendezvous.v1 import rendezvous_pb2 as pb
from rendezvous.v1 import rendezvous_pb2_grpc as pb_grpc

JOB = "stopping"
KEYS = derive_keys(b"s" * 32, JOB)
TIMINGS = Timings(handshake=0.5, end_grace=0.1, replay_window=5.0)
SERVER = "127.0.0.1"


async def start(keys=None, target=None):
    server = limits.new_server(TIMINGS.keepalive, TIMINGS.handshake)
    port = server.add_insecure_port(f"{SERVER}:0")
    me = Peer(secrets.token_hex(6), ipaddress.ip_address(SERVER), port, port + 1)
    service = CoordinatorService(
        me, JOB, Size.fixed(2), target or (lambda: Target(me.endpoint, me)),
        lambda: NodeStatus(node=me, job=JOB, expect=Size.fixed(2)), TIMINGS, keys=keys,
        liveness_timeout=5.0, policy=Policy(max_restarts=3), settle=0.0,
    )
    await serve(server, service, health.aio.HealthServicer())
    return server, me, service


async def joined(me: Peer, service: CoordinatorService, keys=None) -> JoinSession:
    """This node's own member, joined to its service (in process), waiting for a second."""
    session = JoinSession(me.endpoint, me, JOB, 1, Size.fixed(2), 5.0, keys=keys, local=service)
    await session.join()
    while not isinstance(await asyncio.wait_for(session.receive(), 5), Waiting):
        pass
    return session


async def next_aborted(session: JoinSession) -> Aborted:
    while not isinstance(event := await asyncio.wait_for(session.receive(), 5), Aborted):
        pass
    return event


def run(scenario):
    asyncio.run(scenario())


def test_without_a_token_a_stop_ends_the_round_for_every_joined_member_final_and_says_who_asked():
    async def scenario():
        server, me, service = await start()
        member = await joined(me, service)
        try:
            answer = await stop_job(me.endpoint, JOB, 5, user="alice", reason="maintenance", grace=1.5)
            assert answer.coordinating and answer.members == (me,) and answer.phase == "gathering"
            aborted = await next_aborted(member)
            assert aborted.final and aborted.exit_code == JobStopped.exit_code
            assert aborted.stop is not None and aborted.stop.address == SERVER and aborted.stop.grace == 1.5
            assert aborted.stop.describe() == f"{SERVER} (user alice): maintenance"
            assert service.round.phase is RoundPhase.ABORTED and service.round.final
            # a member that comes back (a restart round) or comes late learns of the stop
            late = JoinSession(me.endpoint, me, JOB, 2, Size.fixed(2), 5.0, local=service)
            await late.join()
            assert (await next_aborted(late)).stop == aborted.stop
            await late.close()
        finally:
            await member.close()
            await server.stop(None)

    run(scenario)


def test_with_a_token_an_unsigned_stop_or_status_learns_only_that_it_needs_one():
    async def scenario():
        server, me, service = await start(KEYS)
        member = await joined(me, service, KEYS)
        try:
            for ask in (lambda: stop_job(me.endpoint, JOB, 5), lambda: fetch_job_status(me.endpoint, 5),
                        lambda: fetch_status(me.endpoint, 5)):
                with pytest.raises(TokenNeeded, match="needs a token") as refused:
                    await ask()
                assert isinstance(refused.value, RequestRefused)
                assert me.node_id not in str(refused.value)
            wrong = derive_keys(b"w" * 32, JOB)
            with pytest.raises(TokenRefused):
                await stop_job(me.endpoint, JOB, 5, wrong)
            with pytest.raises(StatusUntrusted):  # what the daemon's confirmer catches
                await fetch_status(me.endpoint, 5, wrong)
            assert service.round.phase is RoundPhase.GATHERING  # the job runs on
            view = await fetch_job_status(me.endpoint, 5, KEYS, JOB)
            assert view.coordinating and [m.peer for m in view.members] == [me]
            answer = await stop_job(me.endpoint, JOB, 5, KEYS, reason="signed")
            assert answer.coordinating
            assert (await next_aborted(member)).stop.reason == "signed"
        finally:
            await member.close()
            await server.stop(None)

    run(scenario)


async def raw_stop(me: Peer, request: pb.StopRequest):
    async with grpc.aio.insecure_channel(me.endpoint) as channel:
        return await pb_grpc.RendezvousStub(channel).Stop(request, timeout=5)


def test_a_signed_stop_to_a_job_without_a_token_is_refused_and_stops_nothing():
    async def scenario():
        server, me, service = await start()
        try:
            with pytest.raises(RequestRefused, match="has no token: stop it without --token-file"):
                await stop_job(me.endpoint, JOB, 5, KEYS)
            assert service.round.phase is RoundPhase.GATHERING
        finally:
            await server.stop(None)

    run(scenario)


def test_with_a_token_a_replayed_or_stale_stop_is_refused():
    async def scenario():
        server, me, service = await start(KEYS)
        try:
            request = pb.StopRequest(header=_wire.header(JOB, 0, ""), node_id=me.node_id)
            _, stale = _auth.sign_request(KEYS, request, now_ms=int((time.time() - 3 * TIMINGS.replay_window) * 1e3))
            with pytest.raises(grpc.aio.AioRpcError, match="old") as refused:
                await raw_stop(me, stale)
            assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
            _, fresh = _auth.sign_request(KEYS, request, now_ms=int(time.time() * 1e3))
            assert (await raw_stop(me, fresh)).coordinating
            with pytest.raises(grpc.aio.AioRpcError, match="seen before") as replayed:
                await raw_stop(me, fresh)
            assert replayed.value.code() is grpc.StatusCode.UNAUTHENTICATED
        finally:
            await server.stop(None)

    run(scenario)


def test_with_a_token_a_stop_for_another_node_id_or_none_is_refused_and_stops_nothing():
    """The node id the stop is addressed to is signed: one recorded for an earlier run of
    the job (whose daemons had other node ids) is refused by this one, fresh as it is."""
    async def scenario():
        server, me, service = await start(KEYS)
        try:
            for addressed in ("0123456789ab", ""):
                _, request = stop_request(JOB, addressed, KEYS, now_ms=int(time.time() * 1e3))
                with pytest.raises(grpc.aio.AioRpcError, match=f"this is node {me.node_id}") as refused:
                    await raw_stop(me, request)
                assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
                assert service.round.phase is RoundPhase.GATHERING
            with pytest.raises(RequestRefused, match="earlier run of the job"):
                await stop_job(me.endpoint, JOB, 5, KEYS, node_id="0123456789ab")
            assert service.round.phase is RoundPhase.GATHERING
            assert (await stop_job(me.endpoint, JOB, 5, KEYS)).coordinating  # asks the node id first
            assert service.round.phase is RoundPhase.ABORTED
        finally:
            await server.stop(None)

    run(scenario)


def test_a_node_that_does_not_coordinate_names_the_one_that_does_and_stops_nothing():
    async def scenario():
        other = Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.9"), 7000, 7001)
        server, me, service = await start(target=lambda: Target(other.endpoint, other))
        try:
            answer = await stop_job(me.endpoint, JOB, 5, reason="x")
            assert not answer.coordinating and answer.coordinator == other
            assert service.round.phase is RoundPhase.GATHERING
            with pytest.raises(RequestRefused, match="asked a node of job"):
                await stop_job(me.endpoint, "another-job", 5)
        finally:
            await server.stop(None)

    run(scenario)


def test_stop_requests_of_junk_end_with_a_status_code_never_unknown():
    """Junk bytes, another job, rounds out of range, any text, any grace (NaN, negative):
    each answered with a status code of its own or taken, never UNKNOWN; a grace that is no
    number of seconds is refused as INVALID_ARGUMENT."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    headers = st.builds(pb.Header, protocol_version=st.sampled_from([0, 1, 2]), job=st.sampled_from([JOB, "", "x"]),
                        round=st.sampled_from([0, 1, 2**64 - 1]))
    requests = st.builds(
        lambda h, u, r, g: pb.StopRequest(header=h, user=u, reason=r, **({} if g is None else {"stop_grace": g})),
        headers, st.text(max_size=300), st.text(max_size=300),
        st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
    )

    async def ask(server_me: Peer, data: bytes) -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(server_me.endpoint) as channel:
            call = channel.unary_unary("/rendezvous.v1.Rendezvous/Stop", request_serializer=bytes,
                                       response_deserializer=bytes)
            try:
                await call(data, timeout=3)
            except grpc.aio.AioRpcError as exc:
                return exc.code()
        return grpc.StatusCode.OK

    async def scenario():
        servers = [await start(), await start(KEYS)]
        loop = asyncio.get_running_loop()

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.one_of(st.binary(max_size=200), requests.map(lambda r: r.SerializeToString())))
        def check(data):
            for _, me, _service in servers:
                code = asyncio.run_coroutine_threadsafe(ask(me, data), loop).result(10)
                assert code is not grpc.StatusCode.UNKNOWN

        try:
            await asyncio.to_thread(check)
            nan = pb.StopRequest(header=_wire.header(JOB, 0, ""), stop_grace=float("nan")).SerializeToString()
            assert await ask(servers[0][1], nan) is grpc.StatusCode.INVALID_ARGUMENT
        finally:
            for server, _, _ in servers:
                await server.stop(None)

    run(scenario)
