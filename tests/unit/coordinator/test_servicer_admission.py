"""Which round a Join may move the coordinator to, through the real servicer and real
JoinSessions on in-process streams (coordinator.local): a stranger's later round changes
nothing; a node's own round, which no peer sets, bounds how far a gathering round goes."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets

from rendezvous.config.timings import Timings
from rendezvous.coordinator import CoordinatorService, JoinSession
from rendezvous.core.member import Frozen, Redirected, Rejected, Released, Waiting
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy, RoundPhase
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import Target

JOB = "admission"
TIMINGS = Timings(handshake=0.3, end_grace=0.1)


def peer(address: str) -> Peer:
    return Peer(secrets.token_hex(6), ipaddress.ip_address(address), 50051, 50052)


def service_of(me: Peer, expect: Size, own_round: int = 1) -> CoordinatorService:
    return CoordinatorService(
        me, JOB, expect, lambda: Target(me.endpoint, me),
        lambda: NodeStatus(node=me, job=JOB, expect=expect, round=own_round), TIMINGS,
        liveness_timeout=5.0, policy=Policy(max_restarts=3), settle=0.0,
    )


def session_of(me: Peer, service: CoordinatorService, expect: Size, round_: int = 1) -> JoinSession:
    return JoinSession(me.endpoint, me, JOB, round_, expect, 5.0, local=service)


async def next_of(session: JoinSession, *kinds: type):
    while not isinstance(event := await asyncio.wait_for(session.receive(), 5), kinds):
        pass
    return event


async def answer(session: JoinSession):
    try:
        await session.join()
        return await next_of(session, Waiting, Frozen, Rejected, Redirected)
    finally:
        await session.close()


def test_a_strangers_joins_for_later_rounds_leave_a_running_round_as_it_was():
    async def scenario():
        me, stranger = peer("10.0.0.1"), peer("10.0.0.9")
        one = Size.fixed(1)
        service = service_of(me, one)
        own = session_of(me, service, one)
        try:
            await own.join()
            frozen = await next_of(own, Frozen)
            await own.ready(frozen.digest)
            await next_of(own, Released)
            running = service.round
            for round_ in (2, 2, 2, 2):
                rejected = await answer(session_of(stranger, service, one, round_))
                assert isinstance(rejected, Rejected) and rejected.reason == "ALREADY_FROZEN", rejected
            far = await answer(session_of(stranger, service, one, 3))
            assert isinstance(far, Rejected) and far.reason == "BAD_REQUEST" and "out of range" in far.message
            assert service.round == running and service.round.phase is RoundPhase.RELEASED
        finally:
            await own.close()

    asyncio.run(scenario())


def test_a_gathering_round_takes_the_round_its_own_node_is_in_plus_one_and_no_more():
    """After its coordinator was lost, the next node to coordinate holds a fresh service,
    while its peers (and itself) went through the rounds before."""
    async def scenario():
        me, first, second = peer("10.0.0.1"), peer("10.0.0.7"), peer("10.0.0.8")
        three = Size.fixed(3)
        service = service_of(me, three, own_round=3)
        joined = session_of(first, service, three, 4)
        try:
            await joined.join()
            assert isinstance(await next_of(joined, Waiting), Waiting)
            assert service.round.number == 4
            # a round this node does not know yet: asked again later, never refused, and the
            # round as it was (a restarted coordinator learns its job's round a moment late)
            far = await answer(session_of(second, service, three, 5))
            assert isinstance(far, Redirected) and "not known here yet" in far.reason, far
            assert service.round.number == 4 and [p.node_id for p in service.round.joined] == [first.node_id]
            forged = await answer(session_of(second, service, three, 2**31))  # past MAX_ROUND
            assert isinstance(forged, Rejected) and "out of range" in forged.message
            assert service.round.number == 4 and [p.node_id for p in service.round.joined] == [first.node_id]
        finally:
            await joined.close()

    asyncio.run(scenario())
