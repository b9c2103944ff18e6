"""Tests of --gpus and the data network in the core: the count a job agrees on at the freeze
(rendezvous.core.gpus, the preflight, the round), the command's environment, and the data
address in TF_CONFIG, the digest and the advert."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.advert import Advert, InvalidAdvert, decode_advert
from rendezvous.core.gpus import (
    GpuMode,
    GpuPolicy,
    choose_count,
    describe_devices,
    device_environment,
    visible_devices,
)
from rendezvous.core.peer import Peer
from rendezvous.core.preflight import Fingerprint, Mismatch, compare
from rendezvous.core.record import replace
from rendezvous.core.round import Action, Policy, Round, join, settle
from rendezvous.core.size import Size
from rendezvous.core.tf_config import Membership, build_tf_config, command_environment

ip = ipaddress.ip_address


def peer(address: str, node_id: str, data: str | None = None) -> Peer:
    return Peer(node_id=node_id, address=ip(address), port=7000, tf_port=9000,
                data_address=ip(data) if data else None)


A = peer("10.0.0.10", "aaaaaaaa")
B = peer("10.0.0.11", "bbbbbbbb")
C = peer("10.0.0.12", "cccccccc")


def gpus(count: int, option: str = "all", model: str = "H100", data: str = "") -> Fingerprint:
    return Fingerprint("3.11.9", "2.21.0", (model,) * count, gpu_ids=tuple(map(str, range(count))),
                       gpu_option=option, data_interface=data)


# -- the option ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, policy", [
    ("all", GpuPolicy()), ("min", GpuPolicy(GpuMode.MIN)), ("none", GpuPolicy(GpuMode.NONE)),
    ("4", GpuPolicy(GpuMode.COUNT, 4)), (" MIN ", GpuPolicy(GpuMode.MIN)), ("0", GpuPolicy(GpuMode.NONE)),
])
def test_gpus_option_parses(text, policy):
    assert GpuPolicy.parse(text) == policy
    assert GpuPolicy.parse(policy.describe()) == policy


@pytest.mark.parametrize("text", ["", "some", "-1", "4.0", "1e3", "99999", "٣"])
def test_a_bad_gpus_option_is_named(text):
    with pytest.raises(ValueError, match=f"must be all, min, none or a number of GPUs, got {text!r}"):
        GpuPolicy.parse(text)


# -- the count at the freeze --------------------------------------------------------------

COUNTS = [("10.0.0.1", 8), ("10.0.0.2", 4), ("10.0.0.3", 8)]


def test_all_decides_nothing_and_none_is_zero():
    assert choose_count(GpuPolicy(), COUNTS).count is None
    assert choose_count(GpuPolicy(GpuMode.NONE), COUNTS).count == 0


def test_min_is_the_smallest_count_and_says_who_has_it():
    choice = choose_count(GpuPolicy(GpuMode.MIN), COUNTS)
    assert (choice.count, choice.refusal) == (4, None)
    assert choice.note == "10.0.0.2 has 4 GPUs: every node uses 4 (--gpus min)"
    assert choose_count(GpuPolicy(GpuMode.MIN), [("a", 2), ("b", 2)]).note is None


def test_a_number_refuses_the_nodes_with_fewer_naming_them():
    choice = choose_count(GpuPolicy(GpuMode.COUNT, 8), COUNTS)
    assert choice.count is None
    assert choice.refusal is not None and choice.refusal.startswith("10.0.0.2 has 4 GPUs; --gpus 8 needs 8 GPUs")
    assert choose_count(GpuPolicy(GpuMode.COUNT, 4), COUNTS) == choose_count(GpuPolicy(GpuMode.COUNT, 4), COUNTS[:1])
    assert choose_count(GpuPolicy(GpuMode.COUNT, 4), COUNTS).count == 4


@given(st.lists(st.integers(0, 16), min_size=1, max_size=20), st.integers(0, 16))
def test_every_member_can_give_the_count_chosen(counts, n):
    members = [(f"n{i}", c) for i, c in enumerate(counts)]
    for policy in (GpuPolicy(GpuMode.MIN), GpuPolicy(GpuMode.COUNT, n), GpuPolicy(GpuMode.NONE)):
        choice = choose_count(policy, members)
        assert (choice.count is None) == (choice.refusal is not None)
        if choice.count is not None:
            assert all(c >= choice.count for c in counts)
    assert choose_count(GpuPolicy(GpuMode.MIN), members).count == min(counts)


# -- the preflight and the round ----------------------------------------------------------


def test_with_all_a_count_difference_is_still_refused():
    verdict = compare([(A, gpus(8)), (B, gpus(4)), (C, gpus(8))])
    assert verdict.reason == "preflight: 10.0.0.11 has 4 GPUs, the others 8"


def test_with_min_a_count_difference_is_a_note_for_every_node():
    verdict = compare([(A, gpus(8, "min")), (B, gpus(4, "min")), (C, gpus(8, "min"))], gpus=GpuPolicy(GpuMode.MIN))
    assert not verdict.refused and verdict.gpus == 4
    assert verdict.warning_lines() == ("preflight: 10.0.0.11 has 4 GPUs: every node uses 4 (--gpus min)",)


def test_with_a_number_a_node_with_fewer_is_refused_by_name():
    verdict = compare([(A, gpus(8, "8")), (B, gpus(4, "8")), (C, gpus(8, "8"))], gpus=GpuPolicy(GpuMode.COUNT, 8))
    assert verdict.refused and "10.0.0.11 has 4 GPUs; --gpus 8 needs 8 GPUs on every node" in verdict.reason
    assert "--allow-mismatch" not in verdict.reason


def test_with_none_neither_count_nor_model_matters():
    verdict = compare([(A, gpus(8, "none", "H100")), (B, gpus(2, "none", "A100"))], gpus=GpuPolicy(GpuMode.NONE))
    assert (verdict.refused, verdict.warnings, verdict.gpus) == (False, (), 0)


def test_a_model_difference_is_refused_unless_allowed_whatever_the_count():
    members = [(A, gpus(8, "min", "H100")), (B, gpus(4, "min", "A100"))]
    assert compare(members, gpus=GpuPolicy(GpuMode.MIN)).refused
    allowed = compare(members, frozenset({Mismatch.GPU_MODEL}), GpuPolicy(GpuMode.MIN))
    assert not allowed.refused and allowed.gpus == 4


def test_nodes_that_disagree_on_gpus_are_refused_always():
    verdict = compare([(A, gpus(8, "min")), (B, gpus(8, "all")), (C, gpus(8, "min"))],
                      frozenset(Mismatch), GpuPolicy(GpuMode.MIN))
    assert verdict.reason == "preflight: 10.0.0.11 has --gpus all, the others min (give every node the same --gpus)"


def test_a_data_network_on_some_nodes_only_is_refused_always():
    verdict = compare([(A, gpus(1, data="eth1")), (B, gpus(1)), (C, gpus(1, data="eth1"))], frozenset(Mismatch))
    assert verdict.reason == ("preflight: 10.0.0.11 has no data network, the others a data network (give every "
                              "node --data-interface or --data-address, or none of them)")
    tie = compare([(A, gpus(1, data="eth1")), (B, gpus(1))])
    assert tie.reason == ("preflight: 10.0.0.10 has a data network; 10.0.0.11 has no data network (give every "
                          "node --data-interface or --data-address, or none of them)")
    assert not compare([(A, gpus(1, data="eth1")), (B, gpus(1, data="ib0"))]).refused


def test_data_addresses_of_both_ip_families_are_refused():
    members = [(peer("10.0.0.10", "aaaaaaaa", "192.168.9.1"), gpus(1, data="eth1")),
               (peer("10.0.0.11", "bbbbbbbb", "fd00:9::2"), gpus(1, data="eth1")),
               (peer("10.0.0.12", "cccccccc", "192.168.9.3"), gpus(1, data="eth1"))]
    assert compare(members, frozenset(Mismatch)).reason == (
        "preflight: 10.0.0.10, 10.0.0.12 have IPv4 data addresses; 10.0.0.11 has an IPv6 data address "
        "(give every node a data address of one IP family)")
    assert not compare(members[::2]).refused


def test_the_frozen_membership_carries_the_count_and_every_round_decides_again():
    policy = Policy(max_restarts=3, gpus=GpuPolicy(GpuMode.MIN))
    state = Round(job="job", expect=Size(2, 3), policy=policy)
    for p, count in ((A, 8), (B, 4), (C, 8)):
        step = join(state, p, state.expect, 0.0, gpus(count, "min"))
        state = step.state
    assert step.action is Action.BROADCAST_FROZEN
    assert state.membership is not None and state.membership.gpus == 4
    assert state.warnings == ("preflight: 10.0.0.11 has 4 GPUs: every node uses 4 (--gpus min)",)
    later = state.next()
    assert later.policy.gpus == GpuPolicy(GpuMode.MIN)
    for p in (A, C):
        later = join(later, p, later.expect, 0.0, gpus(8, "min")).state
    step = settle(later, 10.0)
    assert step.action is Action.BROADCAST_FROZEN and step.state.membership.gpus == 8


def test_gpus_n_refuses_the_round_for_good():
    state = Round(job="job", expect=Size.fixed(3), policy=Policy(max_restarts=3, gpus=GpuPolicy(GpuMode.COUNT, 8)))
    for p, count in ((A, 8), (B, 4), (C, 8)):
        step = join(state, p, state.expect, 0.0, gpus(count, "8"))
        state = step.state
    assert step.action is Action.ABORT and (state.final, state.refused, state.exit_code) == (True, True, 4)
    assert "10.0.0.11 has 4 GPUs" in (state.abort_reason or "")


# -- the devices a node names -------------------------------------------------------------


@pytest.mark.parametrize("inherited, found, devices", [
    (None, 4, ("0", "1", "2", "3")),
    (None, 0, ()),
    ("2,3", 8, ("2", "3")),
    (" 5 , 1", 8, ("5", "1")),
    ("", 8, ()),
    ("1,9,2", 4, ("1",)),  # CUDA stops at an index the machine does not have
    ("1,-1,2", 4, ("1",)),
    ("GPU-8f1e,GPU-77aa", 2, ("GPU-8f1e", "GPU-77aa")),
])
def test_visible_devices(inherited, found, devices):
    assert visible_devices(inherited, found) == devices


def test_the_environment_names_the_lowest_devices_or_leaves_them_alone():
    assert device_environment(None, ("0", "1"), {}) == {}
    assert device_environment(2, ("0", "1", "2", "3"), {}) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert device_environment(2, ("5", "6", "7"), {"CUDA_VISIBLE_DEVICES": "5,6,7"}) == {"CUDA_VISIBLE_DEVICES": "5,6"}
    assert device_environment(0, ("0", "1"), {}) == {"CUDA_VISIBLE_DEVICES": ""}


def test_the_data_interface_goes_to_nccl_and_gloo_unless_the_user_set_them():
    assert device_environment(None, (), {}, "eth1") == {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth1"}
    assert device_environment(None, (), {"NCCL_SOCKET_IFNAME": "ib0"}, "eth1") == {"GLOO_SOCKET_IFNAME": "eth1"}


def test_describe_devices():
    assert describe_devices(2, ("0", "1", "2")) == "GPUs 0,1"
    assert describe_devices(0, ("0",)) == "no GPU"
    assert describe_devices(None, ("0", "1")) == "every GPU (0,1)"
    assert describe_devices(None, ()) == "no GPU"


# -- the data address ---------------------------------------------------------------------


def test_tf_config_uses_the_data_addresses_in_the_control_addresses_order():
    # 10.0.0.9 < 10.0.0.10 by the control address; the data addresses sort the other way
    first, second = peer("10.0.0.9", "bbbbbbbb", "192.168.9.2"), peer("10.0.0.10", "aaaaaaaa", "192.168.9.1")
    membership = Membership.freeze("job", 1, [second, first])
    assert build_tf_config(membership, 0)["cluster"]["worker"] == ["192.168.9.2:9000", "192.168.9.1:9000"]
    v6 = peer("10.0.0.11", "cccccccc", "fd00::3")
    assert v6.tf_endpoint == "[fd00::3]:9000" and v6.endpoint == "10.0.0.11:7000"


def test_the_digest_covers_the_data_addresses_and_the_gpu_count():
    plain = Membership.freeze("job", 1, [A, B])
    data = Membership.freeze("job", 1, [replace(A, data_address=ip("192.168.9.1")), B])
    assert len({plain.digest, data.digest, replace(plain, gpus=4).digest, replace(plain, gpus=2).digest}) == 4


def test_the_command_environment_is_computed_in_one_place():
    membership = Membership.freeze("job", 2, [A, B], gpus=2)
    env = command_environment(membership, B.node_id, {"GLOO_SOCKET_IFNAME": "lo"}, ("4", "5", "6"), "eth1",
                              {"RENDEZVOUS_PROGRESS_FILE": "/tmp/p"})
    assert json.loads(env["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5" and env["NCCL_SOCKET_IFNAME"] == "eth1"
    assert "GLOO_SOCKET_IFNAME" not in env and env["RENDEZVOUS_PROGRESS_FILE"] == "/tmp/p"
    assert env["RENDEZVOUS_ROUND"] == "2" and env["RENDEZVOUS_CLUSTER_DIGEST"] == membership.digest


def test_the_advert_carries_the_data_address():
    me = peer("10.0.0.10", "aaaaaaaa", "192.168.9.1")
    txt = Advert(peer=me, job="job", expect=Size.fixed(2)).to_txt()
    assert txt["data"] == "192.168.9.1"
    props = {k.encode(): v.encode() for k, v in txt.items()}
    assert decode_advert(props, ["10.0.0.10"], 7000).peer == me
    without = {k: v for k, v in props.items() if k != b"data"}
    assert decode_advert(without, ["10.0.0.10"], 7000).peer.data_address is None


@pytest.mark.parametrize("junk", [b"eth1", b"", b"10.0.0.300", b"\xff"])
def test_a_junk_data_address_makes_the_advert_invalid(junk):
    props = {k.encode(): v.encode() for k, v in Advert(peer=A, job="job", expect=Size.fixed(2)).to_txt().items()}
    with pytest.raises(InvalidAdvert):
        decode_advert({**props, b"data": junk}, ["10.0.0.10"], 7000)


def test_status_shows_the_devices_and_the_data_network():
    from rendezvous.core.advert import Phase
    from rendezvous.core.status import NodeStatus, describe_status, status_to_dict

    me = peer("10.0.0.10", "aaaaaaaa", "192.168.9.1")
    other = peer("10.0.0.11", "bbbbbbbb", "192.168.9.2")
    status = NodeStatus(node=me, job="job", expect=Size.fixed(2), phase=Phase.RUNNING,
                        membership=Membership.freeze("job", 1, [me, other], gpus=2),
                        fingerprint=gpus(4, "min", data="eth1"))
    text = describe_status(status)
    assert "  devices       GPUs 0,1 (--gpus min)" in text and "  data network  192.168.9.1 (eth1)" in text
    assert "192.168.9.2:9000" in text  # the members' TensorFlow endpoints, on the data network
    shown = status_to_dict(status)
    assert (shown["gpu_count"], shown["devices"]) == (2, ["0", "1"])
    assert [m["data_address"] for m in shown["members"]] == ["192.168.9.1", "192.168.9.2"]
    waiting = status_to_dict(NodeStatus(node=A, job="job", expect=Size.fixed(2), fingerprint=gpus(4)))
    assert (waiting["gpu_count"], waiting["devices"]) == (None, None) and "data_address" not in waiting["node"]
