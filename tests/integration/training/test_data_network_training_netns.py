"""The training traffic takes the data network: two hosts (network namespaces), each with
eth0 on the control network and eth1 on a data network (a second bridge). nftables drops
every TCP packet to the TensorFlow port on eth0, yet a 2-worker run of the bundled trainer
with `--data-interface eth1` completes: its workers reach each other on eth1 only, while
discovery and the rendezvous stay on eth0."""

from __future__ import annotations

import json
import secrets
import re
import sys

import pytest

from patience import wait_until
from peers import start_peer

pytestmark = [pytest.mark.netns, pytest.mark.training]

TF_PORT = 23456
DATA_SUBNET = "10.214.0.0/24"
# Dropped both ways on eth0, as a firewall of the office network would.
RULES = f"""
table inet rdvt_data {{
  chain input {{
    type filter hook input priority 0; policy accept;
    iifname "eth0" tcp dport {TF_PORT} drop
    iifname "eth1" tcp dport {TF_PORT} counter accept
  }}
  chain output {{ type filter hook output priority 0; policy accept; oifname "eth0" tcp dport {TF_PORT} drop; }}
}}
"""
LISTEN = ("import socket, time\nserver = socket.socket()\nserver.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          f"server.bind(('0.0.0.0', {TF_PORT}))\nserver.listen()\ntime.sleep(600)\n")


def reaches(host, address: str) -> bool:
    """Whether `host` opens a TCP connection to address:TF_PORT within a second."""
    probe = f"import socket\nsocket.create_connection(({address!r}, {TF_PORT}), timeout=1).close()\n"
    return host.run([sys.executable, "-c", probe], capture_output=True, timeout=60).returncode == 0


def test_training_completes_on_the_data_network_while_eth0_drops_the_tf_port(make_network, tmp_path):
    net = make_network(2, data_subnet=DATA_SUBNET)
    first, second = net.hosts
    for host in net.hosts:
        host.run(["nft", "-f", "-"], input=RULES, text=True, check=True, timeout=60)

    # the rule bites: something listening on the TF port is reached on eth1 only
    listener = first.popen([sys.executable, "-c", LISTEN])
    try:
        wait_until(lambda: reaches(second, first.data_address), "the listener is up on the data network")
        assert not reaches(second, first.address), "TCP to the TF port still passes on eth0"
    finally:
        listener.kill()
        listener.wait()

    job = f"d-{secrets.token_hex(3)}"
    peers = []
    for host in net.hosts:
        argv = [
            sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--job", job, "--timeout", "120",
            "--data-interface", "eth1", "--tf-port", str(TF_PORT), "--liveness-timeout", "10",
            "--", "--threads", "1", "--epochs", "2", "--steps-per-epoch", "20",
            "--result-file", str(tmp_path / f"{host.name}.json"),
        ]
        peers.append(start_peer(argv, tmp_path, host.name, popen=host.popen))
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
    workers = [f"{h.data_address}:{TF_PORT}" for h in net.hosts]
    tf_config = json.dumps({"cluster": {"worker": workers}}, separators=(",", ":"))[:-2]  # its start
    for peer in peers:
        assert f"TF_CONFIG={tf_config}" in peer.log, peer.log
        assert "training traffic on the data network: NCCL_SOCKET_IFNAME=eth1, GLOO_SOCKET_IFNAME=eth1" in peer.log
    summaries = [json.loads((tmp_path / f"{h.name}.json").read_text()) for h in net.hosts]
    assert [(s["worker_index"], s["num_workers"]) for s in summaries] == [(0, 2), (1, 2)], summaries
    assert len({s["weights_sha256"] for s in summaries}) == 1, summaries
    # the workers' traffic came in on eth1, on both hosts
    for host in net.hosts:
        listed = host.run(["nft", "list", "chain", "inet", "rdvt_data", "input"], capture_output=True, text=True,
                          timeout=60, check=True).stdout
        counted = re.search(r'iifname "eth1" tcp dport \d+ counter packets (\d+)', listed)
        assert counted and int(counted.group(1)) > 0, listed
