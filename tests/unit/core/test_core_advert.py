"""Tests of rendezvous.core.advert: the TXT record a node advertises, and strict decoding.

The TXT record is untrusted network input: decode_advert must answer every bytes input
with either an Advert or InvalidAdvert, never with any other exception.
"""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core.advert import (
    JOB_PATTERN,
    MAX_EXPECT,
    PROTOCOL_VERSION,
    SERVICE_TYPE,
    Advert,
    InvalidAdvert,
    Phase,
    decode_advert,
    read_protocol,
    validate_job,
)
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.record import FrozenError, replace

ip = ipaddress.ip_address

ME = Peer(node_id="deadbeef", address=ip("10.0.0.7"), port=7000, tf_port=9000)


def txt(**overrides: object) -> dict[bytes, bytes | None]:
    """A valid TXT record as zeroconf hands it over (bytes keys and values)."""
    record: dict[str, object] = {
        "v": "1",
        "job": "default",
        "expect": "2",
        "node": "deadbeef",
        "port": "7000",
        "tfport": "9000",
        "phase": "waiting",
        "round": "1",
    }
    record.update(overrides)
    out: dict[bytes, bytes | None] = {}
    for key, value in record.items():
        if value is _DROP:
            continue
        out[key.encode()] = value if value is None or isinstance(value, bytes) else str(value).encode()
    return out


_DROP = object()


def as_props(record: dict[str, str]) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in record.items()}


# --------------------------------------------------------------------------
# validate_job
# --------------------------------------------------------------------------


@pytest.mark.parametrize("job", ["default", "a", "A", "0", "job-1", "job_1", "job.1", "a" * 63, "9lives", "x.-_"])
def test_valid_job_names(job):
    assert validate_job(job) == job


@pytest.mark.parametrize(
    "job", ["", "a" * 64, "-job", ".job", "_job", "job name", "job/1", "jöb", "job:1", "job\t", "\njob"]
)
def test_invalid_job_names_are_refused_naming_the_name(job):
    with pytest.raises(ValueError) as info:
        validate_job(job)
    assert repr(job) in str(info.value)


def test_job_name_with_a_trailing_newline_is_refused():
    # Documented as "1-63 characters of letters, digits, '.', '_' or '-'"; a newline is
    # none of those. `$` in JOB_PATTERN also matches before a final "\n".
    with pytest.raises(ValueError):
        validate_job("default\n")


def test_job_pattern_is_anchored_at_the_start():
    assert JOB_PATTERN.match("job")
    assert not JOB_PATTERN.match(" job")


# --------------------------------------------------------------------------
# Advert and to_txt
# --------------------------------------------------------------------------


def test_advert_defaults_and_names():
    a = Advert(peer=ME, job="default", expect=Size.fixed(2))
    assert a.protocol == PROTOCOL_VERSION == 1
    assert a.phase is Phase.WAITING
    assert a.round == 1
    assert a.coordinator is None
    assert a.node_id == "deadbeef"
    assert a.instance_name == "deadbeef._tfrendezvous._tcp.local."
    assert a.instance_name.endswith(SERVICE_TYPE)
    assert a.host_name == "deadbeef.local."


def test_host_names_differ_per_node():
    other = replace(ME, node_id="cafebabe")
    assert Advert(peer=ME, job="j", expect=Size.fixed(2)).host_name != Advert(peer=other, job="j", expect=Size.fixed(2)).host_name


def test_to_txt_waiting():
    assert Advert(peer=ME, job="default", expect=Size.fixed(2)).to_txt() == {
        "v": "1",
        "job": "default",
        "expect": "2",
        "node": "deadbeef",
        "port": "7000",
        "tfport": "9000",
        "phase": "waiting",
        "round": "1",
    }


def test_to_txt_frozen_carries_the_coordinator():
    a = Advert(peer=ME, job="default", expect=Size.fixed(2)).with_phase(Phase.FROZEN, "10.0.0.1:7000")
    record = a.to_txt()
    assert record["phase"] == "frozen"
    assert record["coord"] == "10.0.0.1:7000"


def test_with_phase_is_a_copy_and_clears_the_coordinator_by_default():
    a = Advert(peer=ME, job="default", expect=Size.fixed(2))
    frozen = a.with_phase(Phase.FROZEN, "10.0.0.1:7000")
    assert a.phase is Phase.WAITING and a.coordinator is None
    assert frozen.phase is Phase.FROZEN and frozen.coordinator == "10.0.0.1:7000"
    running = frozen.with_phase(Phase.RUNNING)
    assert running.coordinator is None
    assert "coord" not in running.to_txt()


def test_advert_is_frozen():
    with pytest.raises(FrozenError):
        Advert(peer=ME, job="j", expect=Size.fixed(2)).expect = 3  # type: ignore[misc]


def test_phase_values():
    assert [p.value for p in Phase] == ["waiting", "frozen", "running", "finished"]


# --------------------------------------------------------------------------
# decode_advert: the valid record
# --------------------------------------------------------------------------


def test_decode_a_valid_record():
    a = decode_advert(txt(), ["10.0.0.7"], 7000)
    assert a == Advert(peer=ME, job="default", expect=Size.fixed(2))


def test_decode_uses_the_first_address():
    a = decode_advert(txt(), ["10.0.0.7", "10.0.0.8"], 7000)
    assert a.peer.address == ip("10.0.0.7")


def test_decode_ipv6():
    a = decode_advert(txt(), ["2001:db8::7"], 7000)
    assert a.peer.address == ip("2001:db8::7")
    assert a.peer.endpoint == "[2001:db8::7]:7000"


def test_decode_frozen_with_coordinator():
    a = decode_advert(txt(phase="frozen", coord="10.0.0.1:7000", round="3"), ["10.0.0.7"], 7000)
    assert a.phase is Phase.FROZEN
    assert a.coordinator == "10.0.0.1:7000"
    assert a.round == 3


@pytest.mark.parametrize("phase", list(Phase))
def test_decode_every_phase(phase):
    assert decode_advert(txt(phase=phase.value), ["10.0.0.7"], 7000).phase is phase


def test_tensorflow_and_gpus_go_out_and_come_back_when_known():
    advert = Advert(peer=ME, job="default", expect=Size.fixed(2), tensorflow="2.21.0", gpus="8x NVIDIA H100 80GB HBM3")
    record = advert.to_txt()
    assert (record["tf"], record["gpus"]) == ("2.21.0", "8x NVIDIA H100 80GB HBM3")
    assert decode_advert(as_props(record), ["10.0.0.7"], 7000) == advert
    assert "tf" not in Advert(peer=ME, job="default", expect=Size.fixed(2)).to_txt()


@pytest.mark.parametrize("key", ["tf", "gpus"])
@pytest.mark.parametrize("value", [b"x" * 101, b"2.21\x1b[31m", b"\xff", None])
def test_shown_values_that_are_long_or_not_printable_are_left_out(key, value):
    advert = decode_advert(txt(**{key: value}), ["10.0.0.7"], 7000)
    assert (advert.tensorflow, advert.gpus) == (None, None)


def test_shown_values_go_out_as_short_printable_ascii():
    record = Advert(peer=ME, job="default", expect=Size.fixed(2), gpus="8x GPU\u00e9\n" + "x" * 200).to_txt()
    assert record["gpus"] == "8x GPU??" + "x" * 92
    assert decode_advert(as_props(record), ["10.0.0.7"], 7000).gpus == record["gpus"]


def test_decode_ignores_unknown_keys():
    record = txt()
    record[b"future"] = b"whatever"
    record[b"flag"] = None
    assert decode_advert(record, ["10.0.0.7"], 7000) == Advert(peer=ME, job="default", expect=Size.fixed(2))


@pytest.mark.parametrize("key, value", [("expect", 1), ("expect", MAX_EXPECT), ("port", 1), ("tfport", 65535), ("round", 2**63 - 1)])
def test_decode_range_bounds_are_accepted(key, value):
    port = value if key == "port" else 7000
    decode_advert(txt(**{key: value}), ["10.0.0.7"], port)


def test_read_protocol():
    assert read_protocol(txt()) == 1
    assert read_protocol(txt(v="7")) == 7
    with pytest.raises(InvalidAdvert):
        read_protocol({})


# --------------------------------------------------------------------------
# decode_advert: refusals
# --------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["v", "job", "expect", "node", "port", "tfport", "phase", "round"])
def test_missing_key_is_refused(key):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(**{key: _DROP}), ["10.0.0.7"], 7000)


@pytest.mark.parametrize("key", ["v", "job", "expect", "node", "port", "tfport", "phase", "round", "coord"])
def test_valueless_key_is_refused(key):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(**{key: None}), ["10.0.0.7"], 7000)


@pytest.mark.parametrize("key", ["v", "job", "expect", "node", "port", "tfport", "phase", "round", "coord"])
def test_non_ascii_value_is_refused(key):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(**{key: b"\xff\xfe"}), ["10.0.0.7"], 7000)


@pytest.mark.parametrize("v", ["0", "2", "65535"])
def test_other_protocol_versions_are_refused(v):
    with pytest.raises(InvalidAdvert, match="protocol version"):
        decode_advert(txt(v=v), ["10.0.0.7"], 7000)


@pytest.mark.parametrize(
    "key, value",
    [
        ("v", "one"),
        ("v", "-1"),
        ("v", "+1"),
        ("v", " 1"),
        ("v", "1.0"),
        ("v", ""),
        ("v", "65536"),
        ("expect", "0"),
        ("expect", str(MAX_EXPECT + 1)),
        ("expect", "-2"),
        ("expect", "2x"),
        ("expect", "0x2"),
        ("port", "0"),
        ("port", "65536"),
        ("tfport", "0"),
        ("tfport", "65536"),
        ("tfport", "http"),
        ("round", "0"),
        ("round", str(2**63)),
        ("round", "1e3"),
    ],
)
def test_bad_numbers_are_refused(key, value):
    port = 7000
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(**{key: value}), ["10.0.0.7"], port)


@pytest.mark.parametrize("job", ["", "bad job", "-job", "a" * 64, b"j\xc3\xb6b"])
def test_bad_job_is_refused(job):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(job=job), ["10.0.0.7"], 7000)


@pytest.mark.parametrize("node", ["", "DEADBEEF", "deadbee", "a" * 33, "not-hex!"])
def test_bad_node_id_is_refused(node):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(node=node), ["10.0.0.7"], 7000)


def test_unknown_phase_is_refused():
    with pytest.raises(InvalidAdvert, match="phase"):
        decode_advert(txt(phase="dancing"), ["10.0.0.7"], 7000)


def test_txt_port_must_match_srv_port():
    with pytest.raises(InvalidAdvert) as info:
        decode_advert(txt(port="7000"), ["10.0.0.7"], 7001)
    assert "7000" in str(info.value) and "7001" in str(info.value)


def test_no_address_is_refused():
    with pytest.raises(InvalidAdvert, match="no address"):
        decode_advert(txt(), [], 7000)


@pytest.mark.parametrize("address", ["", "host.local", "10.0.0.256", "garbage"])
def test_bad_address_is_refused(address):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(), [address], 7000)


def test_empty_record_is_refused():
    with pytest.raises(InvalidAdvert):
        decode_advert({}, ["10.0.0.7"], 7000)


@pytest.mark.parametrize("key", ["v", "expect", "port", "tfport", "round"])
def test_a_number_with_thousands_of_digits_is_an_invalid_advert(key):
    # Python refuses int() of strings longer than 4300 digits with a plain ValueError;
    # decode_advert must still answer with InvalidAdvert (a subclass, but not the same).
    huge = "1" * 5000
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(**{key: huge}), ["10.0.0.7"], 7000)


def test_invalid_advert_is_a_value_error():
    assert issubclass(InvalidAdvert, ValueError)


# --------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------

KNOWN_KEYS = [b"v", b"job", b"expect", b"node", b"port", b"tfport", b"phase", b"round", b"coord", b"alt"]

values = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.from_regex(rb"[0-9]{1,25}", fullmatch=True),
    st.sampled_from([b"1", b"0", b"default", b"deadbeef", b"waiting", b"frozen", b"7000", b"\xff", b"-1", b"", b"fd00::7"]),
)
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.binary(max_size=10))
records = st.dictionaries(keys, values, max_size=14)
address_lists = st.lists(
    st.one_of(st.text(max_size=40), st.ip_addresses().map(str), st.sampled_from(["10.0.0.7", "::1", "fe80::1%eth0"])),
    max_size=3,
)


@settings(deadline=None)
@given(records, address_lists, st.integers(min_value=-(2**16), max_value=2**17))
def test_decode_never_raises_anything_but_invalid_advert(record, addrs, srv_port):
    try:
        advert = decode_advert(record, addrs, srv_port)
    except InvalidAdvert:
        return
    assert isinstance(advert, Advert)
    assert advert.peer.port == srv_port


@settings(deadline=None)
@given(
    st.dictionaries(st.sampled_from(KNOWN_KEYS), values, max_size=9),
    st.sampled_from(["10.0.0.7", "2001:db8::7"]),
)
def test_decode_of_a_mutated_valid_record_never_raises_anything_but_invalid_advert(mutation, address):
    record = {**txt(), **mutation}
    try:
        decode_advert(record, [address], 7000)
    except InvalidAdvert:
        pass


node_ids = st.from_regex(r"[0-9a-f]{8,32}", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)
peers = st.builds(
    Peer, node_id=node_ids, address=st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)), port=ports, tf_port=ports
)
jobs = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", fullmatch=True)
# only numeric endpoints are valid; other text is refused (test above)
coordinators = st.one_of(st.none(), st.builds(lambda p: p.endpoint, peers))
adverts = st.builds(
    Advert,
    peer=peers,
    job=jobs,
    expect=st.builds(lambda low, extra: Size(low, min(MAX_EXPECT, low + extra)), st.integers(1, MAX_EXPECT), st.integers(0, 3)),
    phase=st.sampled_from(Phase),
    round=st.integers(min_value=1, max_value=2**63 - 1),
    coordinator=coordinators,
)


@settings(deadline=None)
@given(adverts)
def test_encode_decode_round_trip(advert):
    decoded = decode_advert(as_props(advert.to_txt()), [str(advert.peer.address)], advert.peer.port)
    assert decoded == advert


@settings(deadline=None)
@given(adverts)
def test_txt_values_are_short_ascii_strings(advert):
    for key, value in advert.to_txt().items():
        assert key.isascii() and value.isascii()
        # a DNS-SD TXT entry is at most 255 bytes including "key="
        assert len(key) + 1 + len(value) <= 255


@pytest.mark.parametrize(
    "coord", ["evil.example.com:80", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:99999", "[10.0.0.1]:80", "::1:80", "", "10.0.0.1:8x"]
)
def test_a_coordinator_endpoint_that_is_not_numeric_is_an_invalid_advert(coord):
    with pytest.raises(InvalidAdvert, match="coord"):
        decode_advert(txt(phase="running", coord=coord), ["10.0.0.9"], 7000)


@pytest.mark.parametrize("coord", ["10.0.0.1:7000", "[fe80::1]:7000"])
def test_numeric_coordinator_endpoints_are_accepted(coord):
    assert decode_advert(txt(phase="running", coord=coord), ["10.0.0.9"], 7000).coordinator == coord


@pytest.mark.parametrize("value, auth", [("1", True), ("0", False), (_DROP, False)])
def test_decode_reads_whether_the_job_wants_a_token(value, auth):
    assert decode_advert(txt(auth=value), ["10.0.0.7"], 7000).auth is auth


@pytest.mark.parametrize("value", [b"2", b"yes", b"", b"\xff", None])
def test_a_bad_auth_value_is_refused(value):
    with pytest.raises(InvalidAdvert):
        decode_advert(txt(auth=value), ["10.0.0.7"], 7000)


def test_the_advert_says_a_token_is_wanted_never_which():
    advert = Advert(peer=ME, job="j", expect=2, auth=True)
    assert advert.to_txt()["auth"] == "1"
    assert "auth" not in replace(advert, auth=False).to_txt()


# --------------------------------------------------------------------------
# A dual-stack node's alternate address
# --------------------------------------------------------------------------

DUAL = Advert(peer=ME, job="default", expect=Size.fixed(2), alternate=ip("fd00::7"))


@pytest.mark.parametrize("addresses", [["10.0.0.7", "fd00::7"], ["fd00::7", "10.0.0.7"]])
def test_the_alternate_goes_out_and_comes_back_whatever_order_the_addresses_resolve_in(addresses):
    assert DUAL.to_txt()["alt"] == "fd00::7"
    assert decode_advert(as_props(DUAL.to_txt()), addresses, 7000) == DUAL


def test_a_switched_advert_keeps_its_node_and_swaps_its_addresses():
    switched = DUAL.using(6)
    assert switched is not None and switched.node_id == DUAL.node_id
    assert (switched.peer.address, switched.alternate) == (ip("fd00::7"), ip("10.0.0.7"))
    assert decode_advert(as_props(switched.to_txt()), ["10.0.0.7", "fd00::7"], 7000) == switched
    assert switched.using(4) == DUAL and DUAL.using(4) is DUAL


def test_versions_and_using_of_a_single_family_advert():
    single = replace(DUAL, alternate=None)
    assert single.versions == {4} and DUAL.versions == {4, 6}
    assert single.using(6) is None and "alt" not in single.to_txt()


@pytest.mark.parametrize(
    "alt, addresses, why",
    [
        ("10.0.0.8", ["10.0.0.7"], "of the family"),
        ("fd00::7", ["fd00::7"], "no address besides"),
        ("fe80::7", ["10.0.0.7"], "cannot be reached"),
        ("::1", ["10.0.0.7"], "cannot be reached"),
        ("ff02::fb", ["10.0.0.7"], "cannot be reached"),
        ("::", ["10.0.0.7"], "cannot be reached"),
        ("host.example", ["10.0.0.7"], "not a numeric IP"),
        ("fd00::7%eth0", ["10.0.0.7"], "has a zone"),
    ],
)
def test_a_bad_alternate_is_refused(alt, addresses, why):
    with pytest.raises(InvalidAdvert, match=why):
        decode_advert(txt(alt=alt), addresses, 7000)


@settings(deadline=None)
@given(adverts, st.ip_addresses(v=4), st.ip_addresses(v=6), st.booleans())
def test_encode_decode_round_trip_of_dual_stack_adverts(advert, v4, v6, reverse):
    alternate = v6 if advert.peer.address.version == 4 else v4
    if alternate.is_loopback or alternate.is_link_local or alternate.is_multicast or alternate.is_unspecified:
        return
    advert = replace(advert, alternate=alternate)
    addresses = [str(advert.peer.address), str(alternate)]
    decoded = decode_advert(as_props(advert.to_txt()), addresses[::-1] if reverse else addresses, advert.peer.port)
    assert decoded == advert
