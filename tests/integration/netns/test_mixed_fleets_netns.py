"""Mixed lab fleets across real hosts (network namespaces): `--gpus` gives every command the
same number of GPUs on hosts whose fake nvidia-smi lists different counts, or refuses the
job naming the host that has too few; `--data-interface` puts the TensorFlow workers on a
second network (each host's eth1 on a second bridge) and tells NCCL and Gloo its name."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

import pytest

from fake_tools import fake_nvidia_smi
from patience import HANG, wait_until
from peers import FAST, RECORDER, join_argv, records, start_peer, wait_for_records

pytestmark = pytest.mark.netns

REFUSED = 4
DATA_SUBNET = "10.214.0.0/24"


def start_hosts(net, tmp_path: Path, job: str, options: Sequence[str] = (), gpus: Sequence[int] = (8, 4, 8),
                until: Optional[Path] = None, env: Sequence[dict] = (), per_host: Sequence[Sequence[str]] = (),
                expect: Optional[str] = None):
    """One `rendezvous join --expect N` (or `expect`) per host, each with a fake nvidia-smi
    listing its count of `gpus`; the command records what it was given (and runs `until` a file exists)."""
    out = tmp_path / job
    out.mkdir()
    peers = []
    for i, host in enumerate(net.hosts):
        extra = {"PATH": f"{fake_nvidia_smi(out / f'bin{i}', gpus[i])}{os.pathsep}{os.environ['PATH']}",
                 **(env[i] if env else {})}
        command = [sys.executable, str(RECORDER), str(out), *(["--until", str(until)] if until else [])]
        argv = join_argv(len(net.hosts), job, out, options=[*options, *(per_host[i] if per_host else [])],
                         command=command)
        if expect:  # an elastic size, MIN:MAX
            argv[argv.index("--expect") + 1] = expect
        peers.append(start_peer(argv, tmp_path, f"{job}-{host.name}", popen=host.popen, extra_env=extra))
    return peers, out


def rendezvous(host, *args: str) -> subprocess.CompletedProcess:
    return host.run([sys.executable, "-m", "rendezvous", *args], capture_output=True, text=True, timeout=HANG,
                    stdin=subprocess.DEVNULL)


def test_gpus_min_gives_every_command_the_same_four_gpus_and_status_shows_them(make_network, tmp_path, monkeypatch):
    monkeypatch.setenv("RENDEZVOUS_RUNTIME_DIR", str(tmp_path / "run"))
    net = make_network(3)
    go = tmp_path / "go"
    peers, out = start_hosts(net, tmp_path, f"m-{secrets.token_hex(3)}", ["--gpus", "min"], until=go)
    started = wait_for_records(out, 3)
    assert [r["devices"]["CUDA_VISIBLE_DEVICES"] for r in started] == ["0,1,2,3"] * 3
    assert [r["devices"]["NCCL_SOCKET_IFNAME"] for r in started] == [None] * 3  # no data network: untouched

    host = net.hosts[1]  # the one with 4 GPUs
    [status] = json.loads(rendezvous(host, "status", "--json").stdout)
    assert (status["gpu_count"], status["devices"]) == (4, ["0", "1", "2", "3"])
    assert status["environment"]["gpus_option"] == "min" and len(status["environment"]["gpu_ids"]) == 4
    text = rendezvous(net.hosts[0], "status").stdout
    assert "devices      GPUs 0,1,2,3 (--gpus min)" in text, text
    # the adverts say which GPUs each command uses, once every node re-announced RUNNING
    wait_until(lambda: rendezvous(host, "peers", "--seconds", "2").stdout.count(", using 0,1,2,3") == 3,
               "every node's advert shows the GPUs it uses")
    go.touch()
    for peer in peers:
        assert peer.wait() == 0, peer.log
    note = f"preflight: {net.hosts[1].address} has 4 GPUs: every node uses 4 (--gpus min)"
    for peer in peers:
        assert note in peer.log, peer.log
        assert "this node's command uses GPUs 0,1,2,3 (--gpus min), CUDA_VISIBLE_DEVICES='0,1,2,3'" in peer.log


def test_gpus_n_refuses_the_job_naming_the_host_with_fewer(make_network, tmp_path):
    net = make_network(3)
    peers, out = start_hosts(net, tmp_path, f"n-{secrets.token_hex(3)}", ["--gpus", "8"])
    for peer in peers:
        assert peer.wait() == REFUSED, peer.log
        assert f"preflight: {net.hosts[1].address} has 4 GPUs; --gpus 8 needs 8 GPUs on every node" in peer.log
    assert records(out) == [], "a command started"


def test_a_gpus_subset_of_cuda_visible_devices_and_none(make_network, tmp_path):
    net = make_network(3)
    # host 2 may use only five of its eight: the job then uses 4 of them, the first four named
    env = [{}, {}, {"CUDA_VISIBLE_DEVICES": "6,7,4,5,0"}]
    peers, out = start_hosts(net, tmp_path, f"s-{secrets.token_hex(3)}", ["--gpus", "4"], gpus=(8, 4, 8), env=env)
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert [r["devices"]["CUDA_VISIBLE_DEVICES"] for r in records(out)] == ["0,1,2,3", "0,1,2,3", "6,7,4,5"]

    peers, out = start_hosts(net, tmp_path, f"z-{secrets.token_hex(3)}", ["--gpus", "none"], gpus=(8, 4, 0))
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert [r["devices"]["CUDA_VISIBLE_DEVICES"] for r in records(out)] == [""] * 3


def test_nodes_with_different_gpus_options_are_refused(make_network, tmp_path):
    net = make_network(3)
    per_host = [["--gpus", "min"], ["--gpus", "min"], []]
    peers, out = start_hosts(net, tmp_path, f"d-{secrets.token_hex(3)}", per_host=per_host)
    for peer in peers:
        assert peer.wait() == REFUSED, peer.log
        assert f"preflight: {net.hosts[2].address} has --gpus all, the others min (give every node the same --gpus)" \
            in peer.log, peer.log
    assert records(out) == []


# -- the data network ---------------------------------------------------------------------


def test_data_interface_puts_tf_config_on_eth1_and_tells_nccl_and_gloo(make_network, tmp_path, monkeypatch):
    monkeypatch.setenv("RENDEZVOUS_RUNTIME_DIR", str(tmp_path / "run"))
    net = make_network(2, data_subnet=DATA_SUBNET)
    go = tmp_path / "go"
    # one host names its data network by interface, the other by address; one sets Gloo's itself
    per_host = [["--data-interface", "eth1"], ["--data-address", net.hosts[1].data_address]]
    env = [{}, {"GLOO_SOCKET_IFNAME": "eth1"}]
    peers, out = start_hosts(net, tmp_path, f"e-{secrets.token_hex(3)}", gpus=(0, 0), until=go, env=env,
                             per_host=per_host)
    started = wait_for_records(out, 2)
    data = [h.data_address for h in net.hosts]
    for record in started:
        workers = record["tf_config"]["cluster"]["worker"]
        assert [w.rsplit(":", 1)[0] for w in workers] == data  # the order is the control addresses'
        assert record["env"]["RENDEZVOUS_COORDINATOR"].startswith(net.hosts[0].address + ":")  # control network
        assert record["devices"]["NCCL_SOCKET_IFNAME"] == "eth1" and record["devices"]["GLOO_SOCKET_IFNAME"] == "eth1"
        assert record["devices"]["CUDA_VISIBLE_DEVICES"] is None  # --gpus all: untouched

    [status] = json.loads(rendezvous(net.hosts[1], "status", "--json").stdout)
    assert status["node"]["data_address"] == data[1] and status["environment"]["data_interface"] == "eth1"
    assert [m["data_address"] for m in status["members"]] == data
    table = wait_until(lambda: (t := rendezvous(net.hosts[0], "peers", "--seconds", "2").stdout).count("10.214.") == 2
                       and t, "both adverts carry their data address")
    assert table.splitlines()[0].split()[-1] == "DATA", table
    go.touch()
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert "training traffic on the data network: NCCL_SOCKET_IFNAME=eth1, GLOO_SOCKET_IFNAME=eth1" in peer.log


def test_a_data_network_on_one_node_only_is_refused(make_network, tmp_path):
    net = make_network(2, data_subnet=DATA_SUBNET)
    peers, out = start_hosts(net, tmp_path, f"h-{secrets.token_hex(3)}", gpus=(0, 0),
                             per_host=[["--data-interface", "eth1"], []])
    for peer in peers:
        assert peer.wait() == REFUSED, peer.log
        assert (f"preflight: {net.hosts[0].address} has a data network; {net.hosts[1].address} has no data "
                "network (give every node --data-interface or --data-address, or none of them)") in peer.log, peer.log
    assert records(out) == []


@pytest.mark.parametrize("option, value, says", [
    ("--data-address", "10.214.0.99", "--data-address 10.214.0.99 is not assigned to any interface of this machine"),
    ("--data-interface", "eth7", "--data-interface 'eth7' does not exist"),
])
def test_a_data_network_not_on_the_machine_exits_5_listing_the_interfaces(make_network, tmp_path, option, value, says):
    net = make_network(1, data_subnet=DATA_SUBNET)
    host = net.hosts[0]
    done = rendezvous(host, "join", "--expect", "1", "--job", f"x-{secrets.token_hex(3)}", option, value,
                      "--timeout", "30", "--", "true")
    assert done.returncode == 5, done.stderr
    assert says in done.stderr
    assert f"eth0 ({host.address}, fe80::" in done.stderr and f"eth1 ({host.data_address}, fe80::" in done.stderr


def test_gpus_min_is_decided_again_when_the_smallest_host_leaves_an_elastic_job(make_network, tmp_path):
    net = make_network(3)
    go = tmp_path / "go"
    options = ["--gpus", "min", "--max-restarts", "2", "--settle", "1", *FAST]
    peers, out = start_hosts(net, tmp_path, f"r-{secrets.token_hex(3)}", options, until=go, expect="2:3")
    first = wait_for_records(out, 3)
    assert {r["devices"]["CUDA_VISIBLE_DEVICES"] for r in first} == {"0,1,2,3"}
    small = first[1]["env"]["RENDEZVOUS_NODE_ID"]
    peers[1].proc.send_signal(signal.SIGTERM)  # the 4-GPU host leaves for good
    peers[1].wait()

    def second_round():
        found = [r for r in records(out) if r["env"]["RENDEZVOUS_ROUND"] == "2"]
        return found if len(found) == 2 else None

    later = wait_until(second_round, lambda: peers[0].log)
    assert small not in {r["env"]["RENDEZVOUS_NODE_ID"] for r in later}
    assert [r["devices"]["CUDA_VISIBLE_DEVICES"] for r in later] == ["0,1,2,3,4,5,6,7"] * 2
    go.touch()
    for peer in (peers[0], peers[2]):
        assert peer.wait() == 0, peer.log
        assert "this node's command uses GPUs 0,1,2,3,4,5,6,7 (--gpus min)" in peer.log, peer.log
