"""Jobs whose hosts do not all have the same IP family: dual-stack hosts (IPv4 and a ULA
IPv6 address, a default route for each) beside IPv4-only and IPv6-only ones, over mDNS."""

from __future__ import annotations

import secrets
import signal
import time

import pytest

from patience import HANG
from peers import assert_consistent, join_argv, records, start_peer

pytestmark = pytest.mark.netns


def start(net, tmp_path, out, expect, options_of=lambda host: ()):
    job = f"f-{secrets.token_hex(4)}"
    return [
        start_peer(join_argv(expect, job, out, options=options_of(host)), tmp_path, host.name, popen=host.popen)
        for host in net.hosts
    ]


def seeds_of(net):
    """Unicast discovery only: every host names the first one, by an address it has."""
    seed = net.hosts[0]
    return lambda host: ["--discovery", "unicast", "--timings", "gossip-interval=0.3",
                         "--peer", seed.address if host.has_ipv4 else f"[{seed.address6}]"]


@pytest.mark.parametrize("seeds", [False, True], ids=["mdns", "seed"])
def test_dual_stack_hosts_switch_to_ipv6_for_a_job_with_an_ipv6_only_host(make_network, tmp_path, seeds):
    net = make_network(3, subnet6="fd00:214::/64", families=["46", "46", "6"])
    out = tmp_path / "out"
    out.mkdir()
    peers = start(net, tmp_path, out, 3, seeds_of(net) if seeds else lambda host: ())
    for peer in peers:
        assert peer.wait() == 0, peer.log
    only6 = net.hosts[2].address6
    for peer, host in zip(peers[:2], net.hosts):
        assert f"has IPv6-only node {only6}" in peer.log, peer.log
        assert f"this node uses its IPv6 address {host.address6} for the job" in peer.log, peer.log
    recs = records(out)
    assert_consistent(recs, [h.address6 for h in net.hosts])
    assert all(w.startswith("[fd00:214::") for w in recs[0]["tf_config"]["cluster"]["worker"])


def wait_for_log(peer, text, timeout=HANG):
    deadline = time.monotonic() + timeout
    while text not in peer.log:
        assert time.monotonic() < deadline and peer.proc.poll() is None, f"no {text!r} in:\n{peer.log}"
        time.sleep(0.05)


def test_a_job_of_a_dual_stack_an_ipv4_only_and_an_ipv6_only_host_uses_ipv4_and_names_the_odd_one(make_network, tmp_path):
    """The dual-stack host meets the IPv6-only one first, and switches to IPv6; then the
    IPv4-only one, and the tie makes it switch back to IPv4. The job may grow to three
    for --settle seconds."""
    net = make_network(3, subnet6="fd00:215::/64", families=["46", "4", "6"])
    out = tmp_path / "out"
    out.mkdir()
    # --settle is the window for the IPv4-only host to arrive before the IPv6 pair freezes:
    # long enough for an interpreter to start on a loaded machine (2 s was not)
    argv = join_argv("2:3", f"f-{secrets.token_hex(4)}", out, options=["--settle", "10"])
    dual_host, only4_host, only6_host = net.hosts
    only6 = start_peer(argv, tmp_path, only6_host.name, popen=only6_host.popen)
    wait_for_log(only6, "peers seen")
    dual = start_peer(argv, tmp_path, dual_host.name, popen=dual_host.popen)
    wait_for_log(dual, f"this node uses its IPv6 address {dual_host.address6}")
    only4 = start_peer(argv, tmp_path, only4_host.name, popen=only4_host.popen)
    for peer in (dual, only4):
        assert peer.wait() == 0, peer.log
    assert f"has IPv4-only node {only4_host.address}" in dual.log, dual.log
    assert f"this node uses its IPv4 address {dual_host.address} for the job" in dual.log, dual.log
    assert f"node {only6_host.address6} (" in dual.log and "has only IPv6, and the job uses IPv4" in dual.log, dual.log
    assert_consistent(records(out), [dual_host.address, only4_host.address])
    only6.proc.send_signal(signal.SIGTERM)
    assert only6.wait() == 128 + signal.SIGTERM, only6.log
