"""Unicast discovery across real hosts: bridges that forward no multicast, a router between
two subnets, a seed name with several addresses."""

from __future__ import annotations

import json
import secrets
import signal
import sys
import time

import pytest

from patience import HANG
from peers import assert_consistent, join_argv, records, start_peer

pytestmark = pytest.mark.netns

# Exchanges every 0.3 s so that the tests wait little; the hint after 2 s alone.
FAST = ["--timings", "gossip-interval=0.3,lonely-hint=2"]


def start_all(net, tmp_path, out, seeds_of, expect=None, options=()):
    """`rendezvous join` on every host of `net`, with the seeds `seeds_of(host)` names."""
    job = f"s-{secrets.token_hex(4)}"
    expect = expect or len(net.hosts)
    peers = []
    for host in net.hosts:
        seeds = [a for s in seeds_of(host) for a in ("--peer", s)]
        argv = join_argv(expect, job, out, options=[*FAST, *seeds, *options])
        peers.append(start_peer(argv, tmp_path, host.name, popen=host.popen))
    return peers


@pytest.mark.parametrize("n_hosts, mode", [(3, "both"), (8, "unicast")])
def test_without_multicast_hosts_that_name_one_seed_form_the_job(make_network, tmp_path, n_hosts, mode):
    net = make_network(n_hosts, multicast=False)
    out = tmp_path / "out"
    out.mkdir()
    peers = start_all(net, tmp_path, out, lambda host: [net.hosts[0].address], options=["--discovery", mode])
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), net.addresses)


def test_without_multicast_and_without_seeds_a_node_says_how_to_give_them(make_network, tmp_path):
    net = make_network(2, multicast=False)
    peers = start_all(net, tmp_path, tmp_path, lambda host: [], options=["--timeout", "4"])
    for peer in peers:
        assert peer.wait() == 3, peer.log  # the timeout: they never met
        assert "multicast may be blocked" in peer.log and "--peer" in peer.log, peer.log


def listed(host, seed, job):
    """The node ids `rendezvous peers --peer SEED` lists for `job`, asked from `host`."""
    argv = [sys.executable, "-m", "rendezvous", "peers", "--peer", seed, "--job", job, "--seconds", "0.5", "--json"]
    result = host.run(argv, capture_output=True, text=True, timeout=HANG, check=True)
    return {a["node_id"] for a in json.loads(result.stdout)}


def wait_listed(host, seed, job, count):
    deadline = time.monotonic() + HANG
    while len(ids := listed(host, seed, job)) != count:
        assert time.monotonic() < deadline, f"listed {ids}, not {count} nodes"
    return ids


def test_peers_lists_a_job_through_a_seed_and_drops_nodes_that_leave_or_die(make_network, tmp_path):
    """A node that stops says goodbye; one killed stops announcing and expires."""
    net = make_network(4, multicast=False)
    seed = net.hosts[0].address
    job = f"s-{secrets.token_hex(4)}"
    argv = join_argv(9, job, tmp_path, options=["--timings", "gossip-interval=0.3,advert-ttl=2", "--peer", seed])
    daemons = [start_peer(argv, tmp_path, h.name, popen=h.popen) for h in net.hosts[:3]]
    asker = net.hosts[3]  # runs no daemon
    wait_listed(asker, seed, job, 3)
    daemons[1].proc.send_signal(signal.SIGTERM)
    assert daemons[1].wait() == 128 + signal.SIGTERM
    assert len(listed(asker, seed, job)) == 2  # the goodbye reached the seed before the exit
    daemons[2].proc.kill()
    wait_listed(asker, seed, job, 1)
    daemons[0].proc.send_signal(signal.SIGTERM)
    daemons[0].wait()


def test_hosts_on_two_subnets_joined_by_a_router_form_one_job_through_a_seed_on_each_side(make_network, tmp_path):
    """mDNS reaches only each side; a seed per side, and one seed that names the other."""
    net = make_network(4, segments=2)
    out = tmp_path / "out"
    out.mkdir()
    seed_a, seed_b = net.hosts[0], net.hosts[2]

    def seeds_of(host):
        return [seed_b.address] if host in (seed_a, seed_b) else [(seed_a, seed_b)[host.segment].address]

    for peer in start_all(net, tmp_path, out, seeds_of):
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), net.addresses)


def test_a_seed_name_with_several_addresses_is_every_one_of_them(make_network, tmp_path):
    """The name's first address is a host that runs no daemon (a seed that is down): its
    second one is asked all the same."""
    net = make_network(4, multicast=False)
    out = tmp_path / "out"
    out.mkdir()
    down, live = net.hosts[0], net.hosts[3]
    for host in net.hosts:
        host.write_hosts([f"{down.address} seeds", f"{live.address} seeds"])
    resolved = net.hosts[1].run(["getent", "ahostsv4", "seeds"], capture_output=True, text=True).stdout.split()
    assert resolved[0] == down.address and live.address in resolved
    job = f"s-{secrets.token_hex(4)}"
    argv = join_argv(3, job, out, options=[*FAST, "--peer", "seeds"])
    for peer in [start_peer(argv, tmp_path, h.name, popen=h.popen) for h in net.hosts[1:]]:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), net.addresses[1:])


@pytest.mark.training
def test_three_hosts_without_multicast_train_one_model_through_one_seed(make_network, tmp_path):
    net = make_network(3, multicast=False)
    job = f"s-{secrets.token_hex(4)}"
    peers = []
    for host in net.hosts:
        argv = [
            sys.executable, "-m", "rendezvous", "join", "--expect", "3", "--job", job, "--timeout", "60",
            "--peer", net.hosts[0].address,
            "--", "--threads", "1", "--epochs", "2", "--result-file", str(tmp_path / f"{host.index}.json"),
        ]
        peers.append(start_peer(argv, tmp_path, host.name, popen=host.popen))
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
    summaries = [json.loads((tmp_path / f"{h.index}.json").read_text()) for h in net.hosts]
    assert [s["worker_index"] for s in summaries] == [0, 1, 2]
    assert len({s["weights_sha256"] for s in summaries}) == 1  # one model, trained together


@pytest.mark.parametrize("seeds", [False, True], ids=["mdns", "seed"])
def test_ipv6_only_hosts_form_a_job_with_bracketed_tf_config(make_network, tmp_path, seeds):
    """ULA addresses and no IPv4 on eth0: over mDNS on IPv6, or through a seed where
    multicast does not pass."""
    net = make_network(3, subnet="fd00:213::/64", multicast=not seeds)
    out = tmp_path / "out"
    out.mkdir()
    peers = start_all(net, tmp_path, out, lambda host: [net.hosts[0].address] if seeds else [])
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert "IPv6 default route" in peer.log, peer.log
    recs = records(out)
    assert_consistent(recs, net.addresses)
    assert recs[0]["tf_config"]["cluster"]["worker"][0].startswith(f"[{net.hosts[0].address}]:")
