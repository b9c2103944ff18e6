"""The coordinator's servicer fed arbitrary and mutated messages over real gRPC: every bad
input ends in a gRPC status (never UNKNOWN, the code of an exception that escaped) or a
Rejected, and a real job formed on the same server afterwards still forms."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
import threading
import time
from rendezvous.core.record import replace

import grpc
import pytest

from patience import HANG
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rendezvous.config.timings import Timings
from grpc_health.v1 import health

from rendezvous.coordinator import CoordinatorService, JoinSession, bind_server, fetch_status, serve
from rendezvous.core.advert import Advert
from rendezvous.core.auth import derive_keys
from rendezvous.core.member import Frozen, Heartbeat, Redirected
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import Target
from rendezvous.v1 import rendezvous_pb2 as pb

JOB = "fuzz"
JOIN = "/rendezvous.v1.Rendezvous/Join"
STATUS = "/rendezvous.v1.Rendezvous/Status"
JOB_STATUS = "/rendezvous.v1.Rendezvous/JobStatus"
TIMINGS = Timings(handshake=0.3, end_grace=0.1)


class Server:
    """A coordinator on 127.0.0.1 in a loop of its own thread."""

    def __init__(self, keys=None) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.keys = keys
        # What the service's collaborators do, for a test to change.
        self.exchange = lambda gossip: None
        self.hint = lambda advert: None
        self.me, self.service = self.call(self._start())

    def call(self, coroutine, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    async def _start(self):
        server, port = bind_server("127.0.0.1", 0, TIMINGS.keepalive)
        me = Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.1"), port, free_port())
        service = CoordinatorService(
            me, JOB, Size.fixed(2), lambda: Target(me.endpoint, me), lambda: NodeStatus(node=me, job=JOB, expect=Size.fixed(2)),
            TIMINGS, liveness_timeout=5.0, policy=Policy(), settle=0.0, keys=self.keys,
            exchange=lambda gossip: self.exchange(gossip), hint=lambda advert: self.hint(advert),
        )
        self.server = server
        await serve(server, service, health.aio.HealthServicer())
        return me, service

    def close(self) -> None:
        self.call(self.server.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def open_server():
    server = Server()
    yield server
    server.close()


@pytest.fixture(scope="module")
def token_server():
    server = Server(keys=derive_keys(b"0123456789abcdef0123456789", JOB))
    yield server
    server.close()


def raw_join(server: Server, chunks: list[bytes]) -> grpc.StatusCode:
    with grpc.insecure_channel(server.me.endpoint) as channel:
        call = channel.stream_stream(JOIN, request_serializer=bytes, response_deserializer=bytes)
        try:
            for _ in call(iter(chunks), timeout=3):
                pass
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def raw_status(server: Server, data: bytes, method: str = STATUS) -> grpc.StatusCode:
    with grpc.insecure_channel(server.me.endpoint) as channel:
        call = channel.unary_unary(method, request_serializer=bytes, response_deserializer=bytes)
        try:
            call(data, timeout=3)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


ports = st.integers(min_value=0, max_value=70000)
headers = st.builds(
    pb.Header,
    protocol_version=st.sampled_from([0, 1, 2, 2**32 - 1]),
    job=st.sampled_from([JOB, "", "other", "x" * 300, "\x00\udcff".encode("utf-8", "surrogatepass").decode("utf-8", "replace")]),
    round=st.sampled_from([0, 1, 2, 2**63, 2**64 - 1]),
    sender_node_id=st.text(max_size=40),
)
wire_peers = st.builds(
    pb.Peer,
    node_id=st.one_of(st.just("abcdef012345"), st.text(max_size=40)),
    address=st.sampled_from(["127.0.0.1", "127.0.0.9", "10.0.0.1", "::1", "", "host", "1.2.3.4.5"]),
    port=ports, tf_port=ports,
)
bodies = st.one_of(
    st.builds(lambda p, e: {"join": pb.JoinRequest(peer=p, expect=e)}, wire_peers, st.integers(0, 2**32 - 1)),
    st.builds(lambda d: {"ready": pb.Ready(cluster_digest=d)}, st.text(max_size=80)),
    st.builds(lambda c, r: {"finished": pb.Finished(exit_code=c, reason=r)}, st.integers(-(2**31), 2**31 - 1), st.text(max_size=80)),
    st.just({"heartbeat": pb.Heartbeat()}),
    st.just({}),
)
messages = st.builds(lambda h, b: pb.PeerMessage(header=h, **b).SerializeToString(), headers, bodies)


@st.composite
def mutated(draw):
    data = bytearray(draw(messages))
    for _ in range(draw(st.integers(1, 4))):
        if data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


chunks = st.lists(st.one_of(messages, mutated(), st.binary(max_size=64)), max_size=4)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(chunks)
def test_join_streams_of_junk_end_with_a_status_code(open_server, token_server, sequence):
    for server in (open_server, token_server):
        assert raw_join(server, sequence) is not grpc.StatusCode.UNKNOWN


def test_a_join_stream_that_ends_before_its_join_is_no_warning_and_one_that_starts_otherwise_is_refused(
    open_server, caplog
):
    # a peer that learns of a lower one closes the stream it just opened: nothing to warn of
    with caplog.at_level("WARNING"):
        assert raw_join(open_server, []) is grpc.StatusCode.CANCELLED
    assert "did not start with a join" not in caplog.text
    heartbeat = pb.PeerMessage(header=pb.Header(protocol_version=1, job=JOB), heartbeat=pb.Heartbeat())
    assert raw_join(open_server, [heartbeat.SerializeToString()]) is grpc.StatusCode.INVALID_ARGUMENT


callers = st.builds(
    pb.AdvertRecord,
    address=st.sampled_from(["127.0.0.1", "127.0.0.9", "10.0.0.1", "::1", "", "host"]),
    port=ports,
    txt=st.dictionaries(st.sampled_from(["v", "job", "expect", "tf", "phase", "round", "alt", "x"]), st.text(max_size=20), max_size=8),
)
status_requests = st.builds(
    lambda h, c: pb.StatusRequest(header=h, caller=c).SerializeToString(), headers, st.one_of(st.none(), callers),
)


@FUZZ
@given(st.one_of(st.binary(max_size=200), status_requests))
def test_status_requests_of_junk_end_with_a_status_code(open_server, token_server, data):
    for server in (open_server, token_server):
        for method in (STATUS, JOB_STATUS):
            assert raw_status(server, data, method) is not grpc.StatusCode.UNKNOWN


def test_the_advert_sent_with_a_status_request_is_passed_on_only_from_its_own_job_and_address(open_server):
    heard, default = [], open_server.hint
    open_server.hint = heard.append
    try:
        peer = Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.9"), 4000, 4001)
        mine = Advert(peer, JOB, Size.fixed(2))
        for caller in (
            mine,  # on loopback the kernel's source is 127.0.0.1 whatever 127.x a node uses
            replace(mine, job="other"),
            Advert(replace(peer, address=ipaddress.ip_address("10.0.0.9")), JOB, Size.fixed(2)),  # another host
            Advert(open_server.me, JOB, Size.fixed(2)),  # the server itself
        ):
            status = open_server.call(fetch_status(open_server.me.endpoint, 5, caller=caller))
            assert status.node == open_server.me
        junk = pb.StatusRequest(caller=pb.AdvertRecord(address="127.0.0.9", port=4000, txt={"job": JOB, "v": "x"}))
        assert raw_status(open_server, junk.SerializeToString()) is grpc.StatusCode.OK
        assert heard == [mine]
    finally:
        open_server.hint = default


@pytest.mark.parametrize("keyed", [False, True], ids=["open", "token"])
def test_a_real_job_forms_on_the_server_after_the_fuzzing(open_server, token_server, keyed):
    server = token_server if keyed else open_server

    async def until_frozen(session):
        while not isinstance(event := await asyncio.wait_for(session.receive(), HANG), Frozen):
            assert isinstance(event, Heartbeat) or type(event).__name__ == "Waiting", event
        return event

    async def two_peers():
        sessions = [
            JoinSession(server.me.endpoint, peer, JOB, 1, Size.fixed(2), 5.0, keys=server.keys)
            for peer in (server.me, Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.2"), free_port(), free_port()))
        ]
        try:
            for session in sessions:
                await session.join()
            return await asyncio.gather(*(until_frozen(s) for s in sessions))
        finally:
            for session in sessions:
                await session.close()

    frozen = server.call(two_peers())
    assert {len(f.membership.members) for f in frozen} == {2}


def junk_sender(endpoint: tuple[str, int], stop: threading.Event) -> None:
    """HTTP/1, random bytes, and a 10 MB gRPC message, over and over until `stop`."""
    big = b"\x0a" + b"\xff" * (10 * 1024 * 1024)
    while not stop.is_set():
        for payload in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", secrets.token_bytes(4096)):
            try:
                with socket.create_connection(endpoint, timeout=1) as s:
                    s.sendall(payload)
                    s.recv(1024)
            except OSError:
                pass
        with grpc.insecure_channel(f"{endpoint[0]}:{endpoint[1]}", options=[("grpc.max_send_message_length", -1)]) as channel:
            call = channel.stream_stream(JOIN, request_serializer=bytes, response_deserializer=bytes)
            try:
                for _ in call(iter([big]), timeout=2):
                    pass
            except grpc.RpcError as exc:
                assert exc.code() is not grpc.StatusCode.UNKNOWN


def test_a_job_forms_while_junk_hits_the_coordinators_port(tmp_path):
    from peers import assert_consistent, join_argv, records, start_peer

    job = f"t-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    port = free_port()
    first = start_peer(join_argv(2, job, out, address="127.0.0.2", options=["--port", str(port)]), tmp_path, "first")
    stop = threading.Event()
    senders = [threading.Thread(target=junk_sender, args=(("127.0.0.2", port), stop)) for _ in range(3)]
    for sender in senders:
        sender.start()
    try:
        time.sleep(2)
        second = start_peer(join_argv(2, job, out, address="127.0.0.3"), tmp_path, "second")
        for peer in (first, second):
            assert peer.wait() == 0, peer.log
    finally:
        stop.set()
        for sender in senders:
            sender.join()
    assert_consistent(records(out), ["127.0.0.2", "127.0.0.3"])


def test_warnings_are_rate_limited_per_kind_and_address(caplog):
    import logging

    from rendezvous.coordinator._guard import RateLimitedWarnings

    logger = logging.getLogger("test.warnings")
    warnings = RateLimitedWarnings(logger, interval=60)
    with caplog.at_level(logging.WARNING, logger="test.warnings"):
        for _ in range(3000):
            warnings.warn("auth", "10.0.0.1", "refused %s", "10.0.0.1")
        warnings.warn("auth", "10.0.0.2", "refused %s", "10.0.0.2")
        warnings.warn("first", "10.0.0.1", "bad first message from %s", "10.0.0.1")
    assert [r.getMessage() for r in caplog.records] == [
        "refused 10.0.0.1", "refused 10.0.0.2", "bad first message from 10.0.0.1",
    ]
    again = RateLimitedWarnings(logger, interval=0)
    with caplog.at_level(logging.WARNING, logger="test.warnings"):
        again.warn("auth", "10.0.0.1", "refused")
        again.warn("auth", "10.0.0.1", "refused")
    assert len(caplog.records) == 5


def test_a_join_asking_for_an_absurd_round_is_rejected_and_the_round_stays(open_server):
    me = open_server.me
    join = pb.PeerMessage(
        header=pb.Header(protocol_version=1, job=JOB, round=2**64 - 1, sender_node_id="abcdef999999"),
        join=pb.JoinRequest(peer=pb.Peer(node_id="abcdef999999", address="127.0.0.1", port=1, tf_port=2), expect=2),
    )
    with grpc.insecure_channel(me.endpoint) as channel:
        call = channel.stream_stream(JOIN, request_serializer=bytes, response_deserializer=pb.CoordinatorMessage.FromString)
        [answer] = list(call(iter([join.SerializeToString()]), timeout=3))
    assert answer.rejected.reason == pb.Rejected.BAD_REQUEST and "out of range" in answer.rejected.message
    assert open_server.service.round.number < 2**32


def test_a_join_of_the_other_ip_family_is_sent_back_to_its_view_and_the_round_stays_empty(open_server):
    """A coordinator on IPv4 takes no member on IPv6 (a job uses one family): no
    coordinator is named, the joiner goes back to whom its own view names."""
    join = pb.PeerMessage(
        header=pb.Header(protocol_version=1, job=JOB, round=1, sender_node_id="abcdef666666"),
        join=pb.JoinRequest(peer=pb.Peer(node_id="abcdef666666", address="::1", port=1, tf_port=2), expect=2),
    )
    with grpc.insecure_channel(open_server.me.endpoint) as channel:
        call = channel.stream_stream(JOIN, request_serializer=bytes, response_deserializer=pb.CoordinatorMessage.FromString)
        [answer] = list(call(iter([join.SerializeToString()]), timeout=3))
    assert answer.WhichOneof("body") == "redirect" and not answer.redirect.HasField("coordinator"), answer
    assert answer.redirect.reason == f"job {JOB!r} uses IPv4 on this node, not IPv6"
    assert not open_server.service.round.is_joined("abcdef666666")


def test_a_coordinator_that_switches_family_sends_its_joiners_back_to_their_views():
    server = Server()
    joiner = Peer(secrets.token_hex(6), ipaddress.ip_address("127.0.0.2"), free_port(), free_port())

    async def joined_then_moved():
        session = JoinSession(server.me.endpoint, joiner, JOB, 1, Size.fixed(2), 5.0)
        try:
            await session.join()
            while type(event := await asyncio.wait_for(session.receive(), HANG)).__name__ != "Waiting":
                pass
            server.service.moved(replace(server.me, address=ipaddress.ip_address("::1")))
            while isinstance(event := await asyncio.wait_for(session.receive(), HANG), Heartbeat):
                pass
            return event, server.service.round.joined
        finally:
            await session.close()

    try:
        event, joined = server.call(joined_then_moved())
    finally:
        server.close()
    assert isinstance(event, Redirected) and event.coordinator is None, event
    assert joined == ()


EXCHANGE = "/rendezvous.v1.Rendezvous/Exchange"
records = st.builds(
    pb.AdvertRecord,
    address=st.sampled_from(["127.0.0.1", "10.0.0.1", "::1", "", "host"]),
    port=ports,
    txt=st.dictionaries(st.sampled_from(["v", "job", "expect", "node", "port", "tfport", "phase", "round", "coord"]),
                        st.text(max_size=20), max_size=9),
    serial=st.integers(0, 2**64 - 1),
    goodbye=st.booleans(),
)
adverts = st.builds(
    lambda h, r, k: pb.Adverts(header=h, adverts=r, known=k).SerializeToString(),
    headers, st.lists(records, max_size=4), st.dictionaries(st.text(max_size=20), st.integers(0, 2**64 - 1), max_size=4),
)


@FUZZ
@given(st.one_of(st.binary(max_size=200), adverts))
def test_exchanges_of_junk_end_with_a_status_code(open_server, data):
    """Through a real advert store, as a node with unicast discovery answers."""
    from rendezvous.core.adverts import AdvertStore

    store = AdvertStore(10.0)
    open_server.exchange = lambda gossip: store.merge(gossip.records, 0.0).store.answer(gossip)
    try:
        assert raw_status(open_server, data, EXCHANGE) is not grpc.StatusCode.UNKNOWN
    finally:
        open_server.exchange = lambda gossip: None
