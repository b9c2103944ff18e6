"""Two hosts given the same address, on the default port: they advertise the same
endpoint, so to the others one looks like the other's restart. The hosts that wait say so
while they wait, naming the endpoint, and not only "1 never appeared" at --timeout."""

from __future__ import annotations

import re
import secrets

from patience import HANG, wait_until
from peers import join_argv, start_peer

TIMEOUT = 8  # every node gives up after this: the job cannot form


def start_twins(make_network, tmp_path):
    """Three hosts, the third given the second's address, each running a join of one job of
    3 on the default port: the second host, and the three peers."""
    net = make_network(3)
    twin, original = net.hosts[2], net.hosts[1]
    twin.readdress(original.address)
    job = f"n-{secrets.token_hex(4)}"
    peers = [
        start_peer(join_argv(3, job, tmp_path, options=["--timeout", str(TIMEOUT)]), tmp_path, h.name, popen=h.popen)
        for h in net.hosts
    ]
    return original, peers


def test_a_shared_address_and_port_is_named_while_waiting(make_network, tmp_path):
    original, peers = start_twins(make_network, tmp_path)
    try:
        shared = re.compile(rf"peers seen: .*\({re.escape(original.address)}:\d+ was advertised by 2 nodes: ")
        # said while waiting, by the host that is not a twin, before its --timeout
        wait_until(lambda: any(shared.search(line) and "INFO" in line for line in peers[0].log.splitlines()),
                   "the waiting message naming the shared endpoint", timeout=HANG)
        for peer in peers:
            assert peer.proc.wait(timeout=HANG) != 0, peer.log
    finally:
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.kill()
    assert "two hosts configured with the same address and port" in peers[0].log, peers[0].log
    timed_out = [line for line in peers[0].log.splitlines() if "no rendezvous within --timeout" in line]
    assert timed_out and f"{original.address}:" in timed_out[0], peers[0].log


def test_each_host_whose_address_another_host_has_names_it(make_network, tmp_path):
    """The twins never hear each other (each kernel drops packets from its own address).
    Each finds the other by ARP (as root: it answers a probe for the address), and the one
    the third node reaches answers its Status request for the other's advert
    (StatusRequest.about), which names the other's node id. Each warns at once and its
    timeout names the other host, not the network."""
    original, peers = start_twins(make_network, tmp_path)
    try:
        codes = [peer.proc.wait(timeout=HANG) for peer in peers]
    finally:
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.kill()
    ids = [re.search(r"INFO node ([0-9a-f]+) uses", p.log).group(1) for p in peers]
    held = f"answers for this node's address {original.address} on eth0: two hosts are configured"
    by_id = 0
    for other, peer, code in ((2, peers[1], codes[1]), (1, peers[2], codes[2])):
        lines = peer.log.splitlines()
        assert any("WARNING another host (hardware address" in line and held in line for line in lines), peer.log
        [error] = [line for line in lines if line.startswith("rendezvous: error:")]
        if code == 4:  # it reached the coordinator after the other twin had joined: refused, naming it
            assert f"uses the endpoint of {original.address} ({ids[other]})" in error, peer.log
            assert f"two hosts are configured with the address {original.address}" in error, peer.log
            by_id += 1
            continue
        assert code == 3 and "no rendezvous within --timeout" in error, peer.log
        assert held in error and "multicast" not in error, peer.log
        said = f"node {ids[other]} also advertises this node's address and port {original.address}:29630"
        if any("WARNING" in line and said in line for line in lines):
            by_id += 1
            assert said in error, peer.log
    assert by_id, "neither twin named the other's node id:\n" + "\n".join(p.log for p in peers)
