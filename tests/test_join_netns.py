"""`rendezvous join` across real hosts: network namespaces on one bridge, default address choice."""

from __future__ import annotations

import random
import secrets
import time

import pytest

from peers import assert_consistent, join_argv, records, start_peer

pytestmark = pytest.mark.netns


@pytest.mark.parametrize("n_hosts", [2, 3, 8])
def test_hosts_started_in_random_order_agree(make_network, tmp_path, n_hosts):
    net = make_network(n_hosts)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    rng = random.Random()
    order = list(net.hosts)
    rng.shuffle(order)
    peers = []
    for host in order:
        # no --address: each node must pick eth0, the interface of its default route
        peers.append(start_peer(join_argv(n_hosts, job, out), tmp_path, host.name, popen=host.popen))
        time.sleep(rng.uniform(0, 0.4))
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert "carries the default route" in peer.log, peer.log
    recs = records(out)
    assert_consistent(recs, net.addresses)
    assert recs[0]["tf_config"]["cluster"]["worker"][0].startswith(net.hosts[0].address + ":")


def test_late_host_with_lowest_address_is_refused(make_network, tmp_path):
    net = make_network(3)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    early = [
        start_peer(join_argv(2, job, out, record_args=["--sleep", "6"]), tmp_path, h.name, popen=h.popen)
        for h in net.hosts[1:]
    ]
    deadline = time.monotonic() + 20
    while len(list(out.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    late = start_peer(join_argv(2, job, tmp_path), tmp_path, "late", popen=net.hosts[0].popen)
    assert late.wait(timeout=20) == 4, late.log
    assert "not a member" in late.log
    for peer in early:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), [h.address for h in net.hosts[1:]])
