"""`rendezvous peers` and `rendezvous status` against real daemons on hosts in network
namespaces, in both output formats; the standard gRPC health service."""

from __future__ import annotations

import importlib.metadata
import json
import platform
import secrets
import signal
import subprocess
import sys
import time

import pytest

from patience import HANG
from peers import join_argv, start_peer, wait_for_records

pytestmark = pytest.mark.netns

# The TensorFlow of the daemons' own interpreter, which runs the commands here.
try:
    TENSORFLOW: "str | None" = importlib.metadata.version("tensorflow")
except importlib.metadata.PackageNotFoundError:
    TENSORFLOW = None


def rendezvous(host, *args, timeout=HANG):
    return host.run(
        [sys.executable, "-m", "rendezvous", *args],
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def check_health(host, endpoint: str, service: str = "") -> str:
    code = (
        "import grpc, sys\n"
        "from grpc_health.v1 import health_pb2, health_pb2_grpc\n"
        f"channel = grpc.insecure_channel({endpoint!r})\n"
        f"reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service={service!r}), timeout=5)\n"
        "print(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))\n"
    )
    result = host.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture
def cluster(make_network, tmp_path, monkeypatch):
    """Hosts 0 and 1 run job A (training for a while), host 2 waits alone in job B.
    All daemons register in one shared runtime directory: `status` must still show only
    the daemons of its own namespace."""
    monkeypatch.setenv("RENDEZVOUS_RUNTIME_DIR", str(tmp_path / "run"))
    net = make_network(3)
    job_a, job_b = f"a-{secrets.token_hex(3)}", f"b-{secrets.token_hex(3)}"
    out = tmp_path / "out"
    out.mkdir()
    running = [
        start_peer(join_argv(2, job_a, out, record_args=["--sleep", "30"]), tmp_path, h.name, popen=h.popen)
        for h in net.hosts[:2]
    ]
    waiting = start_peer(join_argv(2, job_b, tmp_path / "never"), tmp_path, "waiting", popen=net.hosts[2].popen)
    records = wait_for_records(out, 2)
    yield net, job_a, job_b, records, running + [waiting]
    for peer in running + [waiting]:
        if peer.proc.poll() is None:
            peer.proc.send_signal(signal.SIGTERM)
    for peer in running + [waiting]:
        peer.wait(timeout=HANG)
    assert list((tmp_path / "run").iterdir()) == [], "a daemon left its registration behind"


def test_peers_lists_every_node_of_every_job(cluster):
    net, job_a, job_b, records, _ = cluster
    # The RUNNING phase is re-announced 0.5 s after the start; mDNS is eventually
    # consistent (a record is multicast at most once a second), so look until it shows.
    deadline = time.monotonic() + HANG
    while True:
        # from a host that runs a daemon itself
        table = rendezvous(net.hosts[2], "peers", "--seconds", "3")
        if table.stdout.count(" running") == 2 or time.monotonic() > deadline:
            break
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NODE", "ADDRESS", "PORT", "JOB", "EXPECT", "PHASE", "TF", "GPUS"]
    rows = sorted(line.split() for line in lines[1:])
    assert len(rows) == 3, table.stdout
    by_address = {row[1]: row for row in rows}
    assert set(by_address) == set(net.addresses)
    ids = {r["env"]["RENDEZVOUS_NODE_ID"] for r in records}
    for host in net.hosts[:2]:
        node, _, port, job, expect, phase, tensorflow, gpus = by_address[host.address]
        assert node in ids and job == job_a and expect == "2" and phase == "running" and int(port) > 0
        assert (tensorflow, gpus) == (TENSORFLOW or "-", "none")  # no nvidia-smi here
    assert by_address[net.hosts[2].address][3:6] == [job_b, "2", "waiting"]

    as_json = rendezvous(net.hosts[2], "peers", "--seconds", "3", "--json")
    assert as_json.returncode == 0, as_json.stderr
    nodes = json.loads(as_json.stdout)
    assert sorted(n["address"] for n in nodes) == sorted(net.addresses)
    assert {n["node_id"] for n in nodes if n["job"] == job_a} == ids
    assert {(n["job"], n["expect"], n["phase"]) for n in nodes} == {(job_a, 2, "running"), (job_b, 2, "waiting")}
    assert {(n["tensorflow"], n["gpus"]) for n in nodes} == {(TENSORFLOW, "none")}
    coordinators = {n["coordinator"] for n in nodes if n["job"] == job_a}
    assert len(coordinators) == 1 and coordinators.pop().startswith(net.hosts[0].address + ":")

    only_b = json.loads(rendezvous(net.hosts[0], "peers", "--seconds", "2", "--json", "--job", job_b).stdout)
    assert [n["address"] for n in only_b] == [net.hosts[2].address]


def test_status_of_a_training_member_in_both_formats(cluster):
    net, job_a, _, records, _ = cluster
    for rank, host in enumerate(net.hosts[:2]):
        record = records[rank]
        result = rendezvous(host, "status", "--json")
        assert result.returncode == 0, result.stderr
        [status] = json.loads(result.stdout)  # only this namespace's daemon
        assert status["job"] == job_a and status["round"] == 1
        assert status["phase"] == "running"
        assert status["rank"] == rank and status["world_size"] == 2 and status["expect"] == 2
        assert status["node"]["node_id"] == record["env"]["RENDEZVOUS_NODE_ID"]
        assert status["node"]["address"] == host.address
        assert [m["rank"] for m in status["members"]] == [0, 1]
        assert [m["address"] for m in status["members"]] == net.addresses[:2]
        assert status["coordinator"]["address"] == net.hosts[0].address
        assert status["tf_config"] == record["tf_config"]
        assert status["trainer_pid"] == record["pid"]
        assert 0 < status["trainer_uptime_seconds"] < 60
        assert status["daemon_pid"] > 0
        assert status["environment"] == {
            "python": platform.python_version(), "tensorflow": TENSORFLOW, "gpus": [], "same_files": {},
            "gpu_ids": [], "gpus_option": "all", "data_interface": None,
        }
        assert (status["gpu_count"], status["devices"]) == (None, [])  # --gpus all, no nvidia-smi

        text = rendezvous(host, "status")
        assert text.returncode == 0, text.stderr
        block = text.stdout
        assert block.startswith(f"node {record['env']['RENDEZVOUS_NODE_ID']} at {host.address}:")
        assert f"job          {job_a}, round 1" in block
        assert f"phase        running: worker {rank} of 2" in block
        assert f"coordinator  {net.hosts[0].address}:" in block
        assert "<- this node" in block
        assert json.dumps(record["tf_config"], separators=(",", ":")) in block
        assert f"trainer      pid {record['pid']}, up " in block
        assert f"environment  Python {platform.python_version()}, " in block and ", GPUs none" in block
        assert "devices      no GPU" in block
        assert "TF version  GPUs" in block.splitlines()[4]  # every member's, as it advertises them
        assert [(m["tensorflow"], m["gpus"]) for m in status["members"]] == [(TENSORFLOW, "none")] * 2

        endpoint = f"{host.address}:{status['node']['port']}"
        assert check_health(host, endpoint) == "SERVING"
        assert check_health(host, endpoint, "rendezvous.v1.Rendezvous") == "SERVING"


def test_status_of_a_waiting_daemon(cluster):
    net, _, job_b, _, _ = cluster
    host = net.hosts[2]
    [status] = json.loads(rendezvous(host, "status", "--json", "--local", "--job", job_b).stdout)
    assert status["phase"] == "waiting" and status["rank"] is None and status["members"] == []
    assert status["tf_config"] is None and status["trainer_pid"] is None
    assert [p["address"] for p in status["seen"]] == [host.address]
    text = rendezvous(host, "status").stdout
    assert "phase        waiting: 1 of 2 peers seen" in text
    assert "members      not frozen yet" in text and "trainer      not started" in text


def test_status_for_another_job_or_no_daemon_exits_7(cluster):
    net, job_a, job_b, _, peers = cluster
    wrong = rendezvous(net.hosts[0], "status", "--local", "--job", job_b)
    assert wrong.returncode == 7
    assert f"no rendezvous daemon of job {job_b!r} runs on this machine; running: {job_a!r}" in wrong.stderr
    waiting = peers[2]
    waiting.proc.send_signal(signal.SIGINT)
    assert waiting.wait(timeout=HANG) == 130
    gone = rendezvous(net.hosts[2], "status")
    assert gone.returncode == 7 and gone.stdout == ""
    assert "no rendezvous daemon runs on this machine" in gone.stderr
    gone_json = rendezvous(net.hosts[2], "status", "--json")
    assert gone_json.returncode == 7 and "no rendezvous daemon" in gone_json.stderr


def test_peers_with_nothing_on_the_network(make_network):
    net = make_network(1)
    table = rendezvous(net.hosts[0], "peers", "--seconds", "1")
    assert table.returncode == 0
    assert table.stdout.strip() == f"no rendezvous node answered on {net.hosts[0].address} within 1s"
    as_json = rendezvous(net.hosts[0], "peers", "--seconds", "1", "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout) == []
