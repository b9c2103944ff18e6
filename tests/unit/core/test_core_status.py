"""NodeStatus and how it is shown: STATUS= lines, progress, the status block and JSON, the
peer table; and its protobuf round trip."""

from __future__ import annotations


import ipaddress
import json

import pytest

from rendezvous.coordinator import _wire
from rendezvous.core.advert import Advert, Phase
from rendezvous.core.listing import advert_to_dict, peer_table
from rendezvous.core.peer import Peer
from rendezvous.core.preflight import Fingerprint
from rendezvous.core.status import (
    NodeStatus,
    printable,
    describe_status,
    format_duration,
    progress_line,
    status_line,
    status_to_dict,
)
from rendezvous.core.tf_config import Membership
from rendezvous.v1 import rendezvous_pb2 as pb
from rendezvous.core.size import Size
from rendezvous.core.record import replace

A = Peer("aaaaaaaaaaaa", ipaddress.ip_address("10.0.0.9"), 41234, 2222)
B = Peer("bbbbbbbbbbbb", ipaddress.ip_address("10.0.0.10"), 38211, 2223)
C = Peer("cccccccccccc", ipaddress.ip_address("10.0.0.100"), 40000, 2224)
M = Membership.freeze("resnet", 1, [B, A])


def status(phase=Phase.WAITING, node=B, seen=(B,), membership=None, **kwargs):
    if phase is not Phase.WAITING and membership is None:
        membership = M
    if membership is None:
        kwargs.setdefault("following", min(seen or (node,)))
    return NodeStatus(node=node, job="resnet", expect=Size.fixed(2), phase=phase, seen=seen, membership=membership, **kwargs)


@pytest.mark.parametrize(
    "node_status, line",
    [
        (status(seen=()), "waiting for peers 1/2"),
        (status(seen=(B,)), "waiting for peers 1/2"),
        (status(seen=(B, A)), "waiting for peers 2/2"),
        (status(seen=(A, B, C)), "waiting for peers 3/2"),
        (status(Phase.FROZEN), "round 1, worker 1 of 2: starting"),
        (status(Phase.RUNNING), "round 1, worker 1 of 2 training"),
        (status(Phase.RUNNING, node=A), "round 1, worker 0 of 2 training"),
        (status(Phase.RUNNING, round=2), "round 2, worker 1 of 2 training"),
        (status(round=3), "round 3, waiting for peers 1/2"),
        (status(Phase.FINISHED, exit_code=0), "round 1, finished: worker 1 of 2, exit code 0"),
        (status(Phase.FINISHED, exit_code=143), "round 1, finished: worker 1 of 2, exit code 143"),
        (status(Phase.FINISHED), "round 1, finished"),
    ],
)
def test_status_line(node_status, line):
    assert status_line(node_status) == line


def test_seen_is_sorted_and_rank_coordinator_tf_config_follow_the_membership():
    s = status(seen=(C, B, A))
    assert s.seen == (A, B, C)
    assert s.rank is None and s.tf_config is None and s.coordinator == A
    assert status(seen=(), following=None).coordinator is None
    s = status(Phase.RUNNING)
    assert s.rank == 1 and s.coordinator == A
    assert s.tf_config == {"cluster": {"worker": ["10.0.0.9:2222", "10.0.0.10:2223"]}, "task": {"type": "worker", "index": 1}}


def test_a_node_missing_from_the_membership_has_no_rank():
    assert status(Phase.RUNNING, node=C).rank is None


def test_progress_line_marks_the_coordinator_this_node_follows_not_the_lowest():
    # A job frozen around 10.0.0.10 before the lower 10.0.0.9 arrived: 10.0.0.9 follows it.
    line = progress_line(status(node=A, seen=(A, B), following=B))
    assert line == "job 'resnet': 2/2 peers seen: 10.0.0.9 (aaaaaaaaaaaa), 10.0.0.10 (bbbbbbbbbbbb) [coordinator]"
    assert "10.0.0.10:38211 (bbbbbbbbbbbb)" in describe_status(status(node=A, seen=(A, B), following=B))


def test_progress_line_neither_counts_nor_elects_unreachable_peers():
    line = progress_line(status(seen=(B, C), unreachable=(A,), following=B))
    assert line == (
        "job 'resnet': 2/2 peers seen: 10.0.0.10 (bbbbbbbbbbbb) [coordinator], "
        "10.0.0.100 (cccccccccccc), 10.0.0.9 (aaaaaaaaaaaa) [unreachable]"
    )


def test_progress_line_names_a_dozen_peers_and_counts_the_rest():
    # hundreds of adverts (forged ones flooding mDNS), most of them asked and silent
    many = [Peer(f"{i:012x}", ipaddress.ip_address(f"10.0.1.{i}"), 4000, 4001) for i in range(1, 201)]
    line = progress_line(status(seen=(A, B, *many[:20]), unreachable=tuple(many[20:]), following=B))
    assert line.startswith("job 'resnet': 22/2 peers seen: 10.0.0.9 (aaaaaaaaaaaa), ")
    assert line.count("(0000") == 10  # twelve named: A, the coordinator and ten of the others
    assert "10.0.0.10 (bbbbbbbbbbbb) [coordinator]" in line
    assert line.endswith(", and 190 more (180 unreachable)")
    assert len(line) < 600


def test_progress_line_names_the_coordinator():
    assert progress_line(status(seen=(B, A))) == (
        "job 'resnet': 2/2 peers seen: 10.0.0.9 (aaaaaaaaaaaa) [coordinator], 10.0.0.10 (bbbbbbbbbbbb)"
    )
    assert progress_line(status(seen=())) == "job 'resnet': 1/2 peers seen: 10.0.0.10 (bbbbbbbbbbbb) [coordinator]"


def test_progress_line_ends_with_the_hint_of_a_node_alone():
    line = progress_line(replace(status(seen=()), hint="multicast may be blocked"))
    assert line.endswith("[coordinator] (multicast may be blocked)")


@pytest.mark.parametrize(
    "seconds, text",
    [(0, "0.0s"), (4.24, "4.2s"), (59.94, "59.9s"), (60, "1m 00s"), (125.9, "2m 05s"), (3600, "1h 00m 00s"), (3 * 3600 + 125, "3h 02m 05s")],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_describe_a_running_member():
    text = describe_status(status(Phase.RUNNING, seen=(A, B), trainer_pid=4321, trainer_uptime=72.3), daemon_pid=99)
    assert text == "\n".join([
        "node bbbbbbbbbbbb at 10.0.0.10:38211 (rendezvous pid 99)",
        "  job          resnet, round 1",
        "  phase        running: worker 1 of 2",
        "  coordinator  10.0.0.9:41234 (aaaaaaaaaaaa)",
        "  members      rank  address    node          TensorFlow      TF version  GPUs",
        "               0     10.0.0.9   aaaaaaaaaaaa  10.0.0.9:2222   -           -",
        "               1     10.0.0.10  bbbbbbbbbbbb  10.0.0.10:2223  -           -  <- this node",
        '  TF_CONFIG    {"cluster":{"worker":["10.0.0.9:2222","10.0.0.10:2223"]},"task":{"type":"worker","index":1}}',
        "  trainer      pid 4321, up 1m 12s",
    ])


FINGERPRINT = Fingerprint("3.11.9", "2.21.0", ("H100",) * 8, {"train.py": "ab" * 32})
ENVIRONMENT = {
    "fingerprint": FINGERPRINT,
    "tensorflow": {"aaaaaaaaaaaa": "2.21.0", "bbbbbbbbbbbb": "2.21.0"},
    "gpus": {"aaaaaaaaaaaa": "8x H100", "bbbbbbbbbbbb": "8x H100"},
    "preflight": ("preflight: 10.0.0.9 has Python 3.11.4, the others 3.11.9 (allowed by --allow-mismatch python)",),
}


def test_status_shows_every_members_tensorflow_and_gpus_and_the_preflights_word():
    text = describe_status(status(Phase.RUNNING, seen=(A, B), **ENVIRONMENT))
    assert "  members      rank  address    node          TensorFlow      TF version  GPUs" in text
    assert "               0     10.0.0.9   aaaaaaaaaaaa  10.0.0.9:2222   2.21.0      8x H100" in text
    assert "  environment  Python 3.11.9, TensorFlow 2.21.0, GPUs 8x H100" in text
    assert f"  preflight    {ENVIRONMENT['preflight'][0]}" in text
    d = status_to_dict(status(Phase.RUNNING, seen=(A, B), **ENVIRONMENT))
    assert d["members"][0]["tensorflow"] == "2.21.0" and d["members"][1]["gpus"] == "8x H100"
    assert d["environment"] == {"python": "3.11.9", "tensorflow": "2.21.0", "gpus": ["H100"] * 8, "same_files": {"train.py": "ab" * 32},
                                    "gpu_ids": [], "gpus_option": "all", "data_interface": None}
    assert d["preflight"] == list(ENVIRONMENT["preflight"])


def test_the_progress_line_says_what_the_preflight_said():
    refused = ("preflight: 10.0.0.12 has 4 GPUs, the others 8",)
    assert progress_line(status(preflight=refused)) == "preflight: 10.0.0.12 has 4 GPUs, the others 8"


def test_describe_a_waiting_node():
    text = describe_status(status(seen=(B, A)))
    assert text.splitlines() == [
        "node bbbbbbbbbbbb at 10.0.0.10:38211",
        "  job          resnet, round 1",
        "  phase        waiting: 2 of 2 peers seen",
        "  coordinator  10.0.0.9:41234 (aaaaaaaaaaaa), the one this node joins",
        "  seen         10.0.0.9 (aaaaaaaaaaaa), 10.0.0.10 (bbbbbbbbbbbb)",
        "  members      not frozen yet",
        "  TF_CONFIG    not yet",
        "  trainer      not started",
    ]


def test_describe_a_finished_member():
    text = describe_status(status(Phase.FINISHED, exit_code=1, trainer_pid=5, trainer_uptime=3.0))
    assert "  phase        finished: worker 1 of 2, exit code 1" in text
    assert "  trainer      pid 5, up 3.0s" in text


def test_status_to_dict_is_json_and_complete():
    d = status_to_dict(status(Phase.RUNNING, seen=(A, B), trainer_pid=7, trainer_uptime=1.5))
    assert json.loads(json.dumps(d)) == d
    assert d["node"] == {"node_id": "bbbbbbbbbbbb", "address": "10.0.0.10", "port": 38211, "tf_port": 2223}
    assert (d["job"], d["round"], d["phase"], d["expect"], d["rank"], d["world_size"]) == ("resnet", 1, "running", 2, 1, 2)
    assert d["coordinator"]["node_id"] == "aaaaaaaaaaaa"
    assert [(m["rank"], m["address"]) for m in d["members"]] == [(0, "10.0.0.9"), (1, "10.0.0.10")]
    assert d["tf_config"]["task"] == {"type": "worker", "index": 1}
    assert (d["trainer_pid"], d["trainer_uptime_seconds"], d["exit_code"]) == (7, 1.5, None)
    waiting = status_to_dict(status(seen=(), following=None))
    assert waiting["rank"] is None and waiting["world_size"] is None and waiting["members"] == []
    assert waiting["coordinator"] is None and waiting["tf_config"] is None


@pytest.mark.parametrize(
    "node_status",
    [
        status(seen=()),
        status(seen=(A, B)),
        status(Phase.FROZEN),
        status(Phase.RUNNING, node=A, seen=(A, B), trainer_pid=4321, trainer_uptime=12.5),
        status(Phase.FINISHED, trainer_pid=1, trainer_uptime=99.0),
        status(Phase.FINISHED, trainer_pid=1, trainer_uptime=99.0, exit_code=0),
        status(Phase.FINISHED, node=A, exit_code=143),
        status(Phase.FINISHED, exit_code=-1),
        status(Phase.RUNNING, seen=(A, B), **ENVIRONMENT),
        status(Phase.RUNNING, trainer_pid=1, trainer_uptime=9.0, warm_pid=77, warm_rss=700 << 20),
    ],
)
def test_status_survives_the_wire(node_status):
    message = _wire.status_to_pb(node_status)
    assert message.header.job == "resnet" and message.header.sender_node_id == node_status.node.node_id
    assert message.rank == (node_status.rank if node_status.rank is not None else _wire.NO_RANK)
    back = _wire.status_from_pb(message)
    assert back == node_status


def test_the_exit_code_crosses_the_wire_and_shows_in_text_and_json():
    sent = _wire.status_to_pb(status(Phase.FINISHED, exit_code=0))
    received = _wire.status_from_pb(pb.StatusResponse.FromString(sent.SerializeToString()))
    assert received.exit_code == 0  # 0 is an exit code, not "none yet"
    assert "  phase        finished: worker 1 of 2, exit code 0" in describe_status(received)
    assert status_to_dict(received)["exit_code"] == 0
    running = _wire.status_to_pb(status(Phase.RUNNING))
    assert not running.HasField("exit_code")
    assert _wire.status_from_pb(pb.StatusResponse.FromString(running.SerializeToString())).exit_code is None


def test_an_invalid_status_from_the_wire_is_a_value_error():
    message = _wire.status_to_pb(status())
    message.phase = "exploded"
    with pytest.raises(ValueError):
        _wire.status_from_pb(message)
    message = _wire.status_to_pb(status())
    message.self.address = "host.example"
    with pytest.raises(ValueError):
        _wire.status_from_pb(message)


def test_peer_table_and_json():
    adverts = [
        Advert(peer=A, job="resnet", expect=Size.fixed(2), phase=Phase.RUNNING, coordinator=A.endpoint,
               tensorflow="2.21.0", gpus="8x NVIDIA H100"),
        Advert(peer=C, job="other-job", expect=Size.fixed(16)),
    ]
    assert peer_table(adverts).splitlines() == [
        "NODE          ADDRESS     PORT   JOB        EXPECT  PHASE    TF      GPUS",
        "aaaaaaaaaaaa  10.0.0.9    41234  resnet     2       running  2.21.0  8x NVIDIA H100",
        "cccccccccccc  10.0.0.100  40000  other-job  16      waiting  -       -",
    ]
    assert peer_table([]) == "NODE  ADDRESS  PORT  JOB  EXPECT  PHASE  TF  GPUS"
    assert advert_to_dict(adverts[0]) == {
        "node_id": "aaaaaaaaaaaa", "address": "10.0.0.9", "port": 41234, "tf_port": 2222, "job": "resnet",
        "expect": 2, "expect_min": 2, "phase": "running", "round": 1, "coordinator": "10.0.0.9:41234",
        "tensorflow": "2.21.0", "gpus": "8x NVIDIA H100", "data_address": None,
    }


def test_status_line_and_block_show_the_progress():
    from rendezvous.core.progress import Progress

    four = Membership.freeze("resnet", 1, [A, B, C, Peer("dddddddddddd", ipaddress.ip_address("10.0.0.200"), 1, 2)])
    progress = Progress(epoch=12, epochs=60, loss=0.84, images_per_s=2310.0)
    running = status(Phase.RUNNING, node=A, membership=four, progress=progress, trainer_pid=7, trainer_uptime=3.0)
    assert status_line(running) == "round 1, worker 0 of 4, epoch 12/60, loss 0.84, 2,310 img/s"
    assert "  progress     epoch 12/60, loss 0.84, 2,310 img/s" in describe_status(running)
    assert status_to_dict(running)["progress"]["epoch"] == 12
    assert _wire.status_from_pb(_wire.status_to_pb(running)).progress == progress
    silent = status(Phase.RUNNING, node=A, membership=four, progress=Progress())
    assert status_line(silent) == "round 1, worker 0 of 4 training"


@pytest.mark.parametrize(
    "text, shown",
    [("job\x1b[2J", "job\\x1b[2J"), ("a\nb\tc", "a\\nb\\tc"), ("ok", "ok"), ("x" * 400, "x" * 300 + "...")],
)
def test_printable_escapes_control_characters_and_cuts_long_text(text, shown):
    assert printable(text) == shown


def test_the_warm_spare_shows_in_text_and_json():
    running = status(Phase.RUNNING, trainer_pid=5, trainer_uptime=3.0, warm_pid=77, warm_rss=713 << 20)
    assert "warm spare   pid 77, 713 MiB resident" in describe_status(running)
    assert status_to_dict(running)["warm_spare"] == {"pid": 77, "rss_bytes": 713 << 20}
    assert status_to_dict(status(Phase.RUNNING))["warm_spare"] is None
    assert "warm spare" not in describe_status(status(Phase.RUNNING))
