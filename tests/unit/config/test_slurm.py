"""Options from a Slurm job step: what the step says, beneath every option given."""

from __future__ import annotations

import pytest

from rendezvous.config.join import discovery_mode
from rendezvous.config.sources import load_settings
from rendezvous.core.admission import check_allowed
from rendezvous.core.peer import Peer, parse_address
from rendezvous.errors import ConfigError

STEP = {
    "SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "n[01-02],gpu7",
    "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NUM_TASKS": "3",
}


def settings(cli: dict, environ: dict):
    return load_settings(cli, [], environ, config_path=None)


def test_inside_a_step_join_needs_no_option() -> None:
    s = settings({}, STEP)
    assert str(s.join.expect) == "3"
    assert s.join.job == "slurm-41.0"
    assert s.join.peers == ("n01", "n02", "gpu7")
    assert s.join.allow_hosts == ("n01", "n02", "gpu7")
    assert s.join.discovery == "slurm" and discovery_mode(s.join) == "unicast"  # no multicast
    assert s.join.gpus == "none"  # the step has no GPU
    assert s.from_slurm == ("--expect 3", "--job slurm-41.0", "--peer n01,n02,gpu7",
                            "--allow-host n01,n02,gpu7", "--gpus none")


def test_seeds_take_the_port_given() -> None:
    assert settings({"port": 7000}, STEP).join.peers == ("n01:7000", "n02:7000", "gpu7:7000")


def test_options_given_win_and_the_log_names_only_what_came_from_slurm() -> None:
    s = settings({"job": "mine", "gpus": "all"}, {**STEP, "RENDEZVOUS_EXPECT": "2:3"})
    assert (s.join.job, str(s.join.expect), s.join.gpus) == ("mine", "2:3", "all")
    assert s.from_slurm == ("--peer n01,n02,gpu7", "--allow-host n01,n02,gpu7")


def test_gpus_slurm_gave_the_step_are_left_to_gpus_all() -> None:
    for variable in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE"):
        assert settings({}, {**STEP, variable: "0,1"}).join.gpus == "all"


def test_outside_a_step_nothing_changes_and_slurm_asked_for_is_an_error() -> None:
    s = settings({"expect": "2"}, {"SLURM_JOB_ID": "41"})  # the batch script itself: no step
    assert (s.join.job, s.join.peers, s.from_slurm, discovery_mode(s.join)) == ("default", (), (), "mdns")
    with pytest.raises(ConfigError, match="not inside a Slurm job step"):
        settings({"expect": "2", "discovery": "slurm"}, {"SLURM_JOB_ID": "41"})


def test_another_discovery_given_leaves_slurm_alone() -> None:
    s = settings({"discovery": "mdns", "expect": "3"}, STEP)
    assert (s.join.job, s.join.peers, s.from_slurm) == ("default", (), ())


@pytest.mark.parametrize("change, said", [
    ({"SLURM_STEP_NODELIST": "n[2-1]"}, "SLURM_STEP_NODELIST: host list 'n[2-1]'"),
    ({"SLURM_STEP_NUM_NODES": "4"}, "SLURM_STEP_NUM_NODES is '4' but SLURM_STEP_NODELIST"),
    ({"SLURM_STEP_NUM_TASKS": "6"}, "runs 6 tasks (SLURM_STEP_NUM_TASKS) on 3 nodes"),
])
def test_a_step_whose_variables_do_not_agree_is_named(change: dict, said: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings({}, {**STEP, **change})
    assert said in str(raised.value)


def test_a_peer_outside_the_allowed_hosts_is_refused_by_address() -> None:
    allowed = frozenset({parse_address("10.0.0.1"), parse_address("10.0.0.2")})
    inside = Peer(node_id="aaaaaaaa", address=parse_address("10.0.0.2"), port=1, tf_port=2)
    outside = Peer(node_id="bbbbbbbb", address=parse_address("10.0.0.3"), port=1, tf_port=2)
    assert check_allowed(inside, allowed) is None and check_allowed(outside, None) is None
    assert "10.0.0.3 is not one of the hosts allowed" in (check_allowed(outside, allowed) or "")


def test_allow_host_takes_names_and_addresses_without_ports() -> None:
    assert settings({"expect": "2", "allow_hosts": ("a", "10.0.0.1", "fd00::1")}, {}).join.allow_hosts
    with pytest.raises(ConfigError, match="without a port"):
        settings({"expect": "2", "allow_hosts": ("a:80",)}, {})
