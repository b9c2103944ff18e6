"""`rendezvous join` across real hosts: network namespaces on one bridge, default address choice."""

from __future__ import annotations

import random
import secrets
import sys
import time

import pytest

from patience import HANG
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


def test_a_host_that_hears_no_multicast_learns_of_its_peers_from_their_status_requests(make_network, tmp_path):
    """Host b hears no mDNS at all, so it never hears a's advert; a hears b's announcement
    and asks b's Status to confirm it, sending its own advert: that is how b learns of a
    (the way a node that has just started learns of its peers before their mDNS answers
    come, which a responder sends at most once a second). Without it neither would join."""
    net = make_network(2)
    a, b = net.hosts
    net.deafen(b)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    options = ["--timeout", "20"]
    first = start_peer(join_argv(2, job, out, options=options), tmp_path, "a", popen=a.popen)
    time.sleep(1)
    second = start_peer(join_argv(2, job, out, options=options), tmp_path, "b", popen=b.popen)
    for peer in (first, second):
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), net.addresses)


def test_announcements_lost_at_startup_are_asked_for_again(make_network, tmp_path):
    """Both hosts hear no mDNS while they start (their announcements and zeroconf's four
    startup queries, the last at 14 s, are lost), then hear it again: zeroconf alone would
    ask again only when the cached records near their expiry, many minutes later. Neither
    knows the other, so no Status request brings a hint either."""
    net = make_network(2)
    for host in net.hosts:
        net.deafen(host)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    options = ["--timeout", "40", "--timings", "ask-again=0.75"]  # asks at 0.75, 2.25, ..., 23.25 s
    peers = [
        start_peer(join_argv(2, job, out, options=options), tmp_path, h.name, popen=h.popen) for h in net.hosts
    ]
    time.sleep(16)
    assert all(p.proc.poll() is None for p in peers) and records(out) == [], "formed while deaf"
    for host in net.hosts:
        net.deafen(host, deaf=False)
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), net.addresses)


def test_late_host_with_lowest_address_is_refused(make_network, tmp_path):
    net = make_network(3)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    early = [
        start_peer(join_argv(2, job, out, record_args=["--sleep", "6"]), tmp_path, h.name, popen=h.popen)
        for h in net.hosts[1:]
    ]
    deadline = time.monotonic() + HANG
    while len(list(out.glob("*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    late = start_peer(join_argv(2, job, tmp_path), tmp_path, "late", popen=net.hosts[0].popen)
    assert late.wait(timeout=HANG) == 4, late.log
    assert "not a member" in late.log
    for peer in early:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), [h.address for h in net.hosts[1:]])


def test_a_host_whose_link_goes_down_fails_the_round_and_rejoins_when_it_is_back(make_network, tmp_path):
    """A cut cable: no FIN, no RST, silence both ways. The others stop their commands after
    the liveness timeout; the cut host, back on the network, finds it heard nothing either,
    stops its own and joins the next round; the job then completes."""
    from peers import FAST, FAULT_COMMAND as COMMAND, wait_for_starts

    net = make_network(3)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, str(COMMAND), str(out), "hang-first-round"]
    # Cut off, the host suspects every peer it cannot reach; back on the network it trusts
    # them again as soon as they answer its probes (default timings: within seconds).
    peers = [
        start_peer(join_argv(3, job, out, options=FAST, command=command), tmp_path, h.name, popen=h.popen)
        for h in net.hosts
    ]
    wait_for_starts(tmp_path, 1, 3)
    cut = net.hosts[2]
    cut.run(["ip", "link", "set", cut.interface, "down"], check=True)
    time.sleep(4)  # well past the liveness timeout (1.5 s)
    cut.run(["ip", "link", "set", cut.interface, "up"], check=True)
    for peer in peers:
        assert peer.wait() == 0, peer.log
    # silence, or the cut host's own side of the stream failing: either way it is named
    assert "round 1 ended" in peers[0].log and f"{cut.address} (" in peers[0].log, peers[0].log
    assert "round 1 ended: lost the coordinator" in peers[2].log, peers[2].log
    assert len(wait_for_starts(tmp_path, 2, 3)) == 3


def test_two_hosts_with_the_same_address_are_named(make_network, tmp_path):
    """A copy-pasted --address: the two hosts break each other's connections, and the
    coordinator's reason for ending the round says what may be wrong."""
    net = make_network(3)
    twin, original = net.hosts[2], net.hosts[1]
    twin.readdress(original.address)
    job = f"n-{secrets.token_hex(4)}"
    # the twins wait longer, so that the first host still sees both when it gives up; they
    # listen on free ports (on the default one they would share an endpoint, which the
    # coordinator refuses at once, naming both)
    peers = [
        start_peer(join_argv(3, job, tmp_path, options=["--timeout", timeout, "--port", "0"]), tmp_path, h.name, popen=h.popen)
        for h, timeout in zip(net.hosts, ["6", "12", "12"])
    ]
    for peer in peers:
        assert peer.wait(timeout=HANG) != 0, peer.log
    assert "two hosts are configured with the same address" in peers[0].log, peers[0].log
