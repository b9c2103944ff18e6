"""Tests of rendezvous.coordinator._wire: peers <-> protobuf, without any channel."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.coordinator import _wire
from rendezvous.core.advert import PROTOCOL_VERSION
from rendezvous.core.peer import Peer
from rendezvous.v1 import rendezvous_pb2 as pb

ip = ipaddress.ip_address

A = Peer(node_id="aaaaaaaa", address=ip("10.0.0.9"), port=7000, tf_port=9000)
B6 = Peer(node_id="bbbbbbbb", address=ip("2001:db8::2"), port=7001, tf_port=9001)

node_ids = st.from_regex(r"[0-9a-f]{8,32}", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)
peers = st.builds(
    Peer, node_id=node_ids, address=st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)), port=ports, tf_port=ports
)


def test_peer_to_pb_fields():
    message = _wire.peer_to_pb(A)
    assert (message.node_id, message.address, message.port, message.tf_port) == ("aaaaaaaa", "10.0.0.9", 7000, 9000)


def test_ipv6_address_goes_on_the_wire_unbracketed():
    assert _wire.peer_to_pb(B6).address == "2001:db8::2"


@pytest.mark.parametrize("p", [A, B6])
def test_round_trip(p):
    assert _wire.peer_from_pb(_wire.peer_to_pb(p)) == p


@settings(deadline=None)
@given(peers)
def test_round_trip_through_bytes(p):
    data = _wire.peer_to_pb(p).SerializeToString()
    assert _wire.peer_from_pb(pb.Peer.FromString(data)) == p


@settings(deadline=None)
@given(st.lists(peers, max_size=8))
def test_peers_to_pb_keeps_order(ps):
    messages = _wire.peers_to_pb(ps)
    assert [_wire.peer_from_pb(m) for m in messages] == ps


def test_peers_to_pb_accepts_any_iterable():
    assert len(_wire.peers_to_pb(p for p in (A, B6))) == 2


def test_frozen_member_list_survives_the_wire_in_order():
    members = sorted([B6, A])
    frozen = pb.Frozen(members=_wire.peers_to_pb(members), cluster_digest="d")
    parsed = pb.Frozen.FromString(frozen.SerializeToString())
    assert [_wire.peer_from_pb(m) for m in parsed.members] == members


MALFORMED = [
    pb.Peer(),
    pb.Peer(node_id="aaaaaaaa", address="10.0.0.9", port=7000),  # no tf_port
    pb.Peer(node_id="aaaaaaaa", address="10.0.0.9", tf_port=9000),  # no port
    pb.Peer(node_id="aaaaaaaa", port=7000, tf_port=9000),  # no address
    pb.Peer(address="10.0.0.9", port=7000, tf_port=9000),  # no node id
    pb.Peer(node_id="AAAAAAAA", address="10.0.0.9", port=7000, tf_port=9000),
    pb.Peer(node_id="aaaa", address="10.0.0.9", port=7000, tf_port=9000),
    pb.Peer(node_id="a" * 33, address="10.0.0.9", port=7000, tf_port=9000),
    pb.Peer(node_id="aaaaaaaa", address="host.example", port=7000, tf_port=9000),
    pb.Peer(node_id="aaaaaaaa", address="10.0.0.256", port=7000, tf_port=9000),
    pb.Peer(node_id="aaaaaaaa", address="[2001:db8::1]", port=7000, tf_port=9000),
    pb.Peer(node_id="aaaaaaaa", address="10.0.0.9:7000", port=7000, tf_port=9000),
    pb.Peer(node_id="aaaaaaaa", address="10.0.0.9", port=65536, tf_port=9000),
    pb.Peer(node_id="aaaaaaaa", address="10.0.0.9", port=7000, tf_port=2**32 - 1),
]


@pytest.mark.parametrize("message", MALFORMED, ids=lambda m: repr(str(m).replace("\n", " ")))
def test_malformed_peer_is_a_value_error(message):
    with pytest.raises(ValueError):
        _wire.peer_from_pb(message)


@pytest.mark.parametrize("message", MALFORMED, ids=lambda m: repr(str(m).replace("\n", " ")))
def test_optional_peer_of_a_malformed_peer_is_none(message):
    assert _wire.optional_peer_from_pb(message) is None


def test_optional_peer_of_an_empty_peer_is_none():
    assert _wire.optional_peer_from_pb(pb.Peer()) is None
    assert _wire.optional_peer_from_pb(pb.Redirect().coordinator) is None


def test_optional_peer_of_a_valid_peer():
    assert _wire.optional_peer_from_pb(_wire.peer_to_pb(B6)) == B6


@settings(deadline=None)
@given(
    st.builds(
        pb.Peer,
        node_id=st.text(max_size=40),
        address=st.text(max_size=45),
        port=st.integers(min_value=0, max_value=2**32 - 1),
        tf_port=st.integers(min_value=0, max_value=2**32 - 1),
    )
)
def test_arbitrary_protobuf_peers_give_a_peer_or_a_value_error(message):
    try:
        p = _wire.peer_from_pb(message)
    except ValueError:
        assert _wire.optional_peer_from_pb(message) is None
    else:
        assert isinstance(p, Peer)
        assert _wire.peer_to_pb(p).port == message.port


def test_header():
    h = _wire.header("job", 3, "aaaaaaaa")
    assert h.protocol_version == PROTOCOL_VERSION
    assert (h.job, h.round, h.sender_node_id) == ("job", 3, "aaaaaaaa")
    assert not h.HasField("auth")


def test_header_carries_a_64_bit_round():
    h = pb.Header.FromString(_wire.header("job", 2**63 - 1, "aaaaaaaa").SerializeToString())
    assert h.round == 2**63 - 1


def test_channels_ignore_http_proxies():
    assert ("grpc.enable_http_proxy", 0) in _wire.channel_options()


def test_keepalive_follows_the_timings():
    options = dict(_wire.channel_options(0.5))
    assert options["grpc.keepalive_time_ms"] == options["grpc.keepalive_timeout_ms"] == 500
    assert dict(_wire.server_options(0.5))["grpc.http2.min_recv_ping_interval_without_data_ms"] == 250


def test_a_fingerprint_survives_the_wire_with_its_absent_values():
    from rendezvous.core.preflight import Fingerprint

    fingerprint = Fingerprint("3.11.9", None, ("H100", "H100"), {"train.py": "ab" * 32, "gone.py": None})
    request = pb.JoinRequest(fingerprint=_wire.fingerprint_to_pb(fingerprint))
    again = pb.JoinRequest.FromString(request.SerializeToString())
    assert _wire.optional_fingerprint_from_pb(again) == fingerprint
    assert again.fingerprint.tensorflow == "" and again.fingerprint.files["gone.py"] == ""


def test_a_join_request_without_a_fingerprint_has_none():
    assert _wire.optional_fingerprint_from_pb(pb.JoinRequest()) is None


def status_response(**fields) -> pb.StatusResponse:
    response = pb.StatusResponse(header=_wire.header("job", 1, A.node_id), phase="running", expect=2, trainer_pid=42, **fields)
    response.self.CopyFrom(_wire.peer_to_pb(A))
    return response


@pytest.mark.parametrize("uptime", [float("nan"), float("inf"), float("-inf"), -1.0])
def test_a_status_with_an_impossible_uptime_has_none(uptime):
    assert _wire.status_from_pb(status_response(trainer_uptime_seconds=uptime)).trainer_uptime is None


def test_a_status_whose_job_has_control_characters_is_invalid():
    response = status_response()
    response.header.job = "job\x1b[2J"
    with pytest.raises(ValueError):
        _wire.status_from_pb(response)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_status_bytes_give_a_status_or_a_value_error(data):
    try:
        response = pb.StatusResponse.FromString(data)
    except Exception:  # not protobuf at all: grpc fails the call before we see it
        return
    try:
        _wire.status_from_pb(response)
    except ValueError:
        pass


def test_gossip_round_trips_and_junk_records_are_left_out():
    from rendezvous.core.advert import Advert, Phase
    from rendezvous.core.adverts import Gossip, Record
    from rendezvous.core.size import Size

    good = Record(Advert(peer=A, job="j", expect=Size.fixed(2), phase=Phase.FROZEN, coordinator="10.0.0.9:7000"), 7)
    v6 = Record(Advert(peer=B6, job="j", expect=Size.fixed(2), alternate=ipaddress.ip_address("10.0.0.8")), 3, goodbye=True)
    message = _wire.gossip_to_pb(Gossip((good, v6), {"aaaaaaaa": 7, "bbbbbbbb": 3}), "aaaaaaaa")
    junk = [
        pb.AdvertRecord(address="10.0.0.1", port=1, txt={**message.adverts[0].txt, "job": "no spaces"}, serial=1),
        pb.AdvertRecord(address="10.0.0.1", port=2, txt=message.adverts[0].txt, serial=1),  # port differs
        pb.AdvertRecord(address="a.example", port=7000, txt=message.adverts[0].txt, serial=1),  # a name
        pb.AdvertRecord(serial=1),
    ]
    message.adverts.extend(junk)
    gossip = _wire.gossip_from_pb(pb.Adverts.FromString(message.SerializeToString()))
    assert gossip.records == (good, v6)
    assert gossip.known == {"aaaaaaaa": 7, "bbbbbbbb": 3}


# -- the data network and --gpus on the wire ------------------------------------------------

from rendezvous.core.preflight import Fingerprint as _Fingerprint  # noqa: E402

data_peers = st.builds(
    Peer, node_id=node_ids, address=st.ip_addresses(v=4), port=ports, tf_port=ports,
    data_address=st.one_of(st.none(), st.ip_addresses(v=4), st.ip_addresses(v=6)),
)


@given(data_peers)
@settings(max_examples=50)
def test_a_peers_data_address_survives_the_wire(p):
    assert _wire.peer_from_pb(_wire.peer_to_pb(p)) == p


def test_a_junk_data_address_is_a_malformed_peer():
    message = _wire.peer_to_pb(A)
    message.data_address = "eth1"
    with pytest.raises(ValueError, match="not a numeric IP address"):
        _wire.peer_from_pb(message)


def test_the_gpus_devices_and_data_interface_survive_the_wire_and_an_older_node_means_all():
    fingerprint = _Fingerprint("3.11.9", "2.21.0", ("T4",) * 2, gpu_ids=("3", "5"), gpu_option="min",
                               data_interface="eth1")
    assert _wire.fingerprint_from_pb(_wire.fingerprint_to_pb(fingerprint)) == fingerprint
    older = _wire.fingerprint_from_pb(pb.Fingerprint(python="3.11.9", gpus=["T4"]))
    assert (older.gpu_option, older.gpu_ids, older.data_interface) == ("all", (), "")


def test_a_failure_goes_over_the_wire_and_back_bounded():
    from rendezvous.core.failure import Failure

    failure = Failure(node_id="bbbbbbbb", address="10.0.0.10", rank=2, exit_code=137, signal="SIGKILL",
                      tail=("Traceback (most recent call last):", "RuntimeError: shard 7 is corrupt"))
    assert _wire.failure_from_pb(_wire.failure_to_pb(failure)) == failure
    unranked = Failure(node_id="b", address="a", rank=None, exit_code=1)
    assert _wire.failure_from_pb(_wire.failure_to_pb(unranked)).rank is None
    hostile = pb.CommandFailure(node_id="x\x1b[2J", rank=-7, tail=["\x07" + "y" * 100_000] * 5000,
                                error_type="E\u202e", message="m\n" * 10_000)
    shown = _wire.failure_from_pb(hostile)
    assert shown.rank is None and shown.node_id == "x" and shown.error_type == "E?"
    assert len(shown.tail) <= 40 and sum(len(line) for line in shown.tail) <= 8192
    aborted = pb.Aborted(reason="r", failure=_wire.failure_to_pb(failure))
    assert _wire.optional_failure_from_pb(aborted) == failure
    assert _wire.optional_failure_from_pb(pb.Aborted(reason="r")) is None


def test_a_nodes_status_carries_its_last_failure():
    from rendezvous.core.failure import Failure
    from rendezvous.core.size import Size
    from rendezvous.core.status import NodeStatus

    failure = Failure(node_id="bbbbbbbb", address="10.0.0.10", rank=2, exit_code=1, tail=("x",))
    status = NodeStatus(node=A, job="j", expect=Size.fixed(2), failure=failure)
    assert _wire.status_from_pb(_wire.status_to_pb(status)).failure == failure
    assert _wire.status_from_pb(_wire.status_to_pb(NodeStatus(node=A, job="j", expect=Size.fixed(2)))).failure is None
