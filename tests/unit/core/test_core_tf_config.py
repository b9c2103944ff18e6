"""Tests of rendezvous.core.tf_config: the frozen membership, its digest and TF_CONFIG."""

from __future__ import annotations

import ipaddress
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core.peer import Peer
from rendezvous.core.tf_config import Membership, build_tf_config, cluster_digest, launch_environment
from rendezvous.core.record import FrozenError, replace

ip = ipaddress.ip_address


def peer(address: str, node_id: str, port: int = 7000, tf_port: int = 9000) -> Peer:
    return Peer(node_id=node_id, address=ip(address), port=port, tf_port=tf_port)


A = peer("10.0.0.9", "aaaaaaaa", port=7001, tf_port=9001)
B = peer("10.0.0.10", "bbbbbbbb", port=7002, tf_port=9002)
C = peer("10.0.0.100", "cccccccc", port=7003, tf_port=9003)

ENV_KEYS = {
    "TF_CONFIG",
    "RENDEZVOUS_RANK",
    "RENDEZVOUS_WORLD_SIZE",
    "RENDEZVOUS_JOB",
    "RENDEZVOUS_ROUND",
    "RENDEZVOUS_RESTART_COUNT",
    "RENDEZVOUS_NODE_ID",
    "RENDEZVOUS_COORDINATOR",
    "RENDEZVOUS_CLUSTER_DIGEST",
}


def three() -> Membership:
    return Membership.freeze("job", 1, [C, A, B])


# --------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------

node_ids = st.from_regex(r"[0-9a-f]{8,32}", fullmatch=True)
ports = st.integers(min_value=1, max_value=65535)
peers = st.builds(
    Peer, node_id=node_ids, address=st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)), port=ports, tf_port=ports
)
peer_sets = st.lists(peers, min_size=1, max_size=10, unique_by=lambda p: p.node_id)
jobs = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}", fullmatch=True)
rounds = st.integers(min_value=1, max_value=2**63 - 1)


# --------------------------------------------------------------------------
# Membership
# --------------------------------------------------------------------------


def test_freeze_sorts_numerically():
    m = three()
    assert m.members == (A, B, C)
    assert m.world_size == 3
    assert m.coordinator == A
    assert (m.job, m.round) == ("job", 1)


def test_freeze_accepts_sets_lists_and_tuples():
    assert Membership.freeze("j", 1, frozenset([B, A])).members == (A, B)
    assert Membership.freeze("j", 1, (B, A)).members == (A, B)


def test_empty_membership_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        Membership(job="j", round=1, members=())
    with pytest.raises(ValueError):
        Membership.freeze("j", 1, [])


def test_unsorted_membership_is_refused():
    with pytest.raises(ValueError, match="sorted"):
        Membership(job="j", round=1, members=(B, A))
    # string order is not the order either
    with pytest.raises(ValueError):
        Membership(job="j", round=1, members=(B, C, A))


def test_duplicate_node_ids_are_refused():
    twin = peer("10.0.0.11", "aaaaaaaa")
    with pytest.raises(ValueError, match="duplicate"):
        Membership.freeze("j", 1, [A, twin])


def test_membership_is_frozen():
    m = three()
    with pytest.raises(FrozenError):
        m.round = 2  # type: ignore[misc]


def test_rank_of_each_member():
    m = three()
    assert [m.rank_of(p.node_id) for p in (A, B, C)] == [0, 1, 2]


def test_rank_of_a_stranger_is_a_key_error_naming_it():
    with pytest.raises(KeyError, match="dddddddd"):
        three().rank_of("dddddddd")


# --------------------------------------------------------------------------
# build_tf_config
# --------------------------------------------------------------------------


def test_tf_config_for_every_rank():
    m = three()
    workers = ["10.0.0.9:9001", "10.0.0.10:9002", "10.0.0.100:9003"]
    for rank in range(3):
        assert build_tf_config(m, rank) == {
            "cluster": {"worker": workers},
            "task": {"type": "worker", "index": rank},
        }


def test_tf_config_uses_tf_port_not_rendezvous_port():
    cfg = build_tf_config(Membership.freeze("j", 1, [A]), 0)
    assert cfg["cluster"]["worker"] == ["10.0.0.9:9001"]


@pytest.mark.parametrize("rank", [-1, 3, 100])
def test_rank_out_of_range_is_refused(rank):
    with pytest.raises(ValueError, match=str(rank)):
        build_tf_config(three(), rank)


def test_ipv6_workers_are_bracketed():
    m = Membership.freeze("j", 1, [peer("2001:db8::2", "bbbbbbbb", tf_port=5000), peer("10.0.0.1", "aaaaaaaa", tf_port=5001)])
    assert build_tf_config(m, 1)["cluster"]["worker"] == ["10.0.0.1:5001", "[2001:db8::2]:5000"]


def test_tf_config_is_json_serialisable():
    cfg = build_tf_config(three(), 2)
    assert json.loads(json.dumps(cfg)) == cfg


@settings(deadline=None)
@given(peer_sets)
def test_every_rank_gets_the_same_worker_list_and_its_own_index(ps):
    m = Membership.freeze("j", 1, ps)
    configs = [build_tf_config(m, r) for r in range(m.world_size)]
    workers = configs[0]["cluster"]["worker"]
    assert len(workers) == len(ps)
    for rank, cfg in enumerate(configs):
        assert cfg["cluster"]["worker"] == workers
        assert cfg["task"] == {"type": "worker", "index": rank}
        assert workers[rank] == m.members[rank].tf_endpoint


# --------------------------------------------------------------------------
# cluster_digest
# --------------------------------------------------------------------------


def test_digest_is_a_sha256_hex_string_and_stable():
    d = three().digest
    assert len(d) == 64 and all(c in "0123456789abcdef" for c in d)
    assert d == cluster_digest(three())
    assert d == Membership.freeze("job", 1, [A, B, C]).digest


def test_digest_changes_with_job():
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job2", 1, [A, B]).digest


def test_digest_changes_with_round():
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job", 2, [A, B]).digest


def test_digest_changes_with_tf_port():
    moved = replace(B, tf_port=9999)
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job", 1, [A, moved]).digest


def test_digest_changes_with_address():
    moved = replace(B, address=ip("10.0.0.11"))
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job", 1, [A, moved]).digest


def test_digest_changes_with_node_id():
    other = replace(B, node_id="dddddddd")
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job", 1, [A, other]).digest


def test_digest_changes_when_node_ids_swap_endpoints():
    swapped_a = replace(A, node_id=B.node_id)
    swapped_b = replace(B, node_id=A.node_id)
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job", 1, [swapped_a, swapped_b]).digest


def test_digest_changes_with_member_order():
    # A valid Membership is always sorted; the digest function itself must still be
    # order-sensitive so that two peers with differently ordered lists disagree.
    forward = SimpleNamespace(job="job", round=1, members=(A, B, C), gpus=None)
    backward = SimpleNamespace(job="job", round=1, members=(C, B, A), gpus=None)
    assert cluster_digest(forward) == three().digest  # type: ignore[arg-type]
    assert cluster_digest(forward) != cluster_digest(backward)  # type: ignore[arg-type]


def test_digest_changes_with_membership_size():
    assert Membership.freeze("job", 1, [A, B]).digest != Membership.freeze("job", 1, [A, B, C]).digest


@settings(deadline=None)
@given(peer_sets, jobs, rounds, st.randoms())
def test_digest_does_not_depend_on_the_order_peers_arrive_in(ps, job, round_, rnd):
    shuffled = list(ps)
    rnd.shuffle(shuffled)
    assert Membership.freeze(job, round_, shuffled).digest == Membership.freeze(job, round_, ps).digest


# --------------------------------------------------------------------------
# launch_environment
# --------------------------------------------------------------------------


def test_launch_environment_keys_and_values():
    m = Membership.freeze("myjob", 4, [A, B, C])
    env = launch_environment(m, B.node_id)
    assert set(env) == ENV_KEYS
    assert all(isinstance(v, str) for v in env.values())
    assert json.loads(env["TF_CONFIG"]) == build_tf_config(m, 1)
    assert env["RENDEZVOUS_RANK"] == "1"
    assert env["RENDEZVOUS_WORLD_SIZE"] == "3"
    assert env["RENDEZVOUS_JOB"] == "myjob"
    assert env["RENDEZVOUS_ROUND"] == "4"
    assert env["RENDEZVOUS_RESTART_COUNT"] == "3"
    assert env["RENDEZVOUS_NODE_ID"] == "bbbbbbbb"
    assert env["RENDEZVOUS_COORDINATOR"] == "10.0.0.9:7001"
    assert env["RENDEZVOUS_CLUSTER_DIGEST"] == m.digest


def test_launch_environment_of_every_member_agrees_except_on_rank_and_node():
    m = three()
    envs = [launch_environment(m, p.node_id) for p in m.members]
    for rank, env in enumerate(envs):
        assert env["RENDEZVOUS_RANK"] == str(rank)
        assert json.loads(env["TF_CONFIG"])["task"]["index"] == rank
        for key in ENV_KEYS - {"TF_CONFIG", "RENDEZVOUS_RANK", "RENDEZVOUS_NODE_ID"}:
            assert env[key] == envs[0][key]
    assert len({json.dumps(json.loads(e["TF_CONFIG"])["cluster"]) for e in envs}) == 1


def test_launch_environment_ipv6_coordinator_is_bracketed():
    m = Membership.freeze("j", 1, [peer("2001:db8::1", "aaaaaaaa", port=7000, tf_port=9000)])
    env = launch_environment(m, "aaaaaaaa")
    assert env["RENDEZVOUS_COORDINATOR"] == "[2001:db8::1]:7000"
    assert json.loads(env["TF_CONFIG"])["cluster"]["worker"] == ["[2001:db8::1]:9000"]


def test_launch_environment_for_a_stranger_is_a_key_error():
    with pytest.raises(KeyError):
        launch_environment(three(), "dddddddd")


def test_the_list_of_variables_is_what_the_command_gets():
    """COMMAND_VARIABLES (join --help and the reference are made from it) names every variable
    command_environment sets with every option on, and only those; the others are always set."""
    from rendezvous.core.failure import ERROR_FILE_VARIABLE
    from rendezvous.core.progress import VARIABLE as PROGRESS_VARIABLE
    from rendezvous.core.tf_config import COMMAND_VARIABLES, OPTIONAL_VARIABLES, command_environment

    membership = Membership(job="j", round=1, members=(A, B), gpus=1)
    files = {PROGRESS_VARIABLE: "/run/p", ERROR_FILE_VARIABLE: "/run/e"}
    every = command_environment(membership, A.node_id, {}, ("0", "1"), "eth1", files)
    assert set(every) == set(COMMAND_VARIABLES)
    fewest = command_environment(replace(membership, gpus=None), A.node_id, {}, (), None, files)
    assert set(fewest) == set(COMMAND_VARIABLES) - set(OPTIONAL_VARIABLES)
    assert ENV_KEYS | set(files) == set(fewest)
