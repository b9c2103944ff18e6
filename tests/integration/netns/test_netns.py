"""Tests of the network-namespace harness (tests/support/netns.py).

All traffic stays inside the namespaces made here, on private addresses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from patience import HANG
import netns
from netns import Network, NetnsError, cleanup_stale, list_namespaces
from paths import REPO, SUPPORT

PY = sys.executable

ECHO_SERVER = textwrap.dedent(
    """
    import socket, sys
    addr, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(16)
    s.settimeout(15)
    print("ready", flush=True)
    for _ in range(n):
        c, _ = s.accept()
        with c:
            c.settimeout(5)
            c.sendall(c.recv(1024))
    """
)

ECHO_CLIENT = textwrap.dedent(
    """
    import socket, sys
    me, port = sys.argv[1], int(sys.argv[2])
    for peer in sys.argv[3:]:
        with socket.create_connection((peer, port), timeout=5) as c:
            msg = f"{me}->{peer}".encode()
            c.sendall(msg)
            assert c.recv(1024) == msg
            print(msg.decode(), flush=True)
    """
)

MCAST_RECEIVER = textwrap.dedent(
    """
    import socket, sys
    group, port, addr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((group, port))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(addr))
    s.settimeout(10)
    print("ready", flush=True)
    data, src = s.recvfrom(1500)
    print(data.decode(), src[0], flush=True)
    """
)

MCAST_SENDER = textwrap.dedent(
    """
    import socket, sys, time
    group, port, addr = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(addr))
    for _ in range(5):
        s.sendto(b"hello-multicast", (group, port))
        time.sleep(0.1)
    """
)

CHOOSE = textwrap.dedent(
    """
    import json, sys
    from rendezvous.host.address import choose_address
    kw = json.loads(sys.argv[1])
    c = choose_address(**kw)
    print(json.dumps({"address": str(c.address), "interface": c.interface, "reason": c.reason}))
    """
)


def _wait_ready(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"helper did not start: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"


def _mine(net: Network) -> list[str]:
    return [ns for ns in list_namespaces() if ns.startswith(net.prefix)]


# --------------------------------------------------------------------------
# Without namespaces: argument checks and the fail/skip policy
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,subnet",
    [(0, "10.213.0.0/24"), (3, "8.8.8.0/24"), (3, "10.0.0.0/30"), (1, "127.0.0.0/24"), (1, "fe80::/64"), (1, "2001:4860::/64")],
)
def test_network_rejects_bad_arguments(n, subnet):
    with pytest.raises(ValueError):
        Network(n, subnet=subnet)


def test_two_segments_split_the_subnet_and_the_hosts_behind_a_router():
    net = Network(4, subnet="10.77.5.0/24", segments=2)
    assert net.gateways == ["10.77.5.1", "10.77.5.129"]
    assert net.addresses == ["10.77.5.2", "10.77.5.3", "10.77.5.130", "10.77.5.131"]
    assert [h.segment for h in net.hosts] == [0, 0, 1, 1] and net.hosts[0].prefixlen == 25
    assert net.namespaces[-1] == net.prefix + "rt" and netns._NAME_RE.match(net.prefix + "rt")
    assert Network(2, subnet="fd00:77::/64").addresses == ["fd00:77::1", "fd00:77::2"]


def test_network_names_and_addresses_are_planned_without_root():
    net = Network(3, subnet="10.77.5.0/24")
    assert net.addresses == ["10.77.5.1", "10.77.5.2", "10.77.5.3"]
    assert net.prefix.startswith(f"rdvt-{os.getpid()}-")
    assert net.namespaces == [net.prefix + "br", net.prefix + "h0", net.prefix + "h1", net.prefix + "h2"]
    assert all(netns._NAME_RE.match(ns) for ns in net.namespaces)
    assert Network(1).prefix != net.prefix
    assert net.hosts[1].command(["true"]) == ["ip", "netns", "exec", net.prefix + "h1", "true"]
    with pytest.raises(TypeError):
        net.hosts[0].command("echo hi")


def test_require_netns_fails_clearly_unless_skip_is_set(monkeypatch):
    monkeypatch.setattr(netns, "unavailable_reason", lambda: "network namespace tests need root")
    with pytest.raises(pytest.fail.Exception, match="need root.*RENDEZVOUS_SKIP_NETNS=1"):
        netns.require_netns({})
    with pytest.raises(pytest.fail.Exception):
        netns.require_netns({"RENDEZVOUS_SKIP_NETNS": "0"})
    with pytest.raises(pytest.skip.Exception, match="need root.*RENDEZVOUS_SKIP_NETNS=1"):
        netns.require_netns({"RENDEZVOUS_SKIP_NETNS": "1"})


def test_unavailable_reason(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert "root" in netns.unavailable_reason()
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)
    assert "`ip`" in netns.unavailable_reason()
    monkeypatch.setattr(netns.shutil, "which", lambda name: "/usr/sbin/ip")
    assert netns.unavailable_reason() is None


# --------------------------------------------------------------------------
# With namespaces
# --------------------------------------------------------------------------


@pytest.mark.netns
@pytest.mark.timeout(60)
def test_hosts_reach_each_other_over_tcp(make_network):
    net = make_network(3)
    port = 7007
    servers = []
    for host in net.hosts:
        p = host.popen(
            [PY, "-c", ECHO_SERVER, host.address, str(port), str(len(net.hosts) - 1)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        _wait_ready(p)
        servers.append(p)
    for host in net.hosts:
        peers = [h.address for h in net.hosts if h is not host]
        out = host.run([PY, "-c", ECHO_CLIENT, host.address, str(port), *peers],
                       capture_output=True, text=True, timeout=HANG)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [f"{host.address}->{p}" for p in peers]
    for p in servers:
        assert p.wait(timeout=HANG) == 0, p.stderr.read()
        p.stdout.close()
        p.stderr.close()


@pytest.mark.netns
@pytest.mark.timeout(60)
def test_multicast_crosses_the_bridge(make_network):
    net = make_network(3)
    group, port = "224.0.0.251", "5399"
    receivers = []
    for host in net.hosts[1:]:
        p = host.popen([PY, "-c", MCAST_RECEIVER, group, port, host.address],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _wait_ready(p)
        receivers.append(p)
    sent = net.hosts[0].run([PY, "-c", MCAST_SENDER, group, port, net.hosts[0].address],
                            capture_output=True, text=True, timeout=HANG)
    assert sent.returncode == 0, sent.stderr
    for p in receivers:
        out, err = p.communicate(timeout=HANG)
        assert p.returncode == 0, err
        assert out.split() == ["hello-multicast", net.hosts[0].address]


@pytest.mark.netns
def test_hosts_have_eth0_a_subnet_route_and_a_default_route(make_network):
    net = make_network(2, subnet="10.88.1.0/24")
    host = net.hosts[1]
    assert host.address == "10.88.1.2"
    addrs = host.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    assert "lo" in addrs and "127.0.0.1/8" in addrs
    assert f"eth0    inet {host.address}/24" in addrs
    routes = host.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
    assert "default dev eth0" in routes
    assert "10.88.1.0/24 dev eth0" in routes
    link = host.run(["ip", "link", "show", "eth0"], capture_output=True, text=True, check=True).stdout
    assert "MULTICAST" in link and "UP" in link


@pytest.mark.parametrize("data_subnet, segments", [("8.8.8.0/24", 1), ("10.88.1.0/25", 1), ("10.99.0.0/30", 1),
                                                   ("10.99.0.0/24", 2)])
def test_a_data_network_must_be_private_apart_and_big_enough(data_subnet, segments):
    with pytest.raises(ValueError, match="data_subnet"):
        Network(3, subnet="10.88.1.0/24", data_subnet=data_subnet, segments=segments)


@pytest.mark.netns
def test_a_data_network_is_eth1_on_a_second_bridge_without_a_default_route(make_network):
    net = make_network(2, subnet="10.88.1.0/24", data_subnet="10.99.0.0/24")
    assert [h.data_address for h in net.hosts] == ["10.99.0.1", "10.99.0.2"]
    host = net.hosts[1]
    addrs = host.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    assert f"eth0    inet {host.address}/24" in addrs and "eth1    inet 10.99.0.2/24" in addrs
    routes = host.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
    assert "default dev eth0" in routes and "10.99.0.0/24 dev eth1" in routes and "default dev eth1" not in routes
    server = net.hosts[0].popen([PY, "-c", ECHO_SERVER, "0.0.0.0", "7777", "2"], stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None and server.stdout.readline().strip() == "ready"
    for address in (net.hosts[0].address, net.hosts[0].data_address):
        echo = host.run([PY, "-c", ECHO_CLIENT, "me", "7777", address], capture_output=True, text=True, timeout=HANG)
        assert echo.returncode == 0 and echo.stdout.strip() == f"me->{address}", (address, echo.stderr)
    server.wait(timeout=HANG)
    plain = make_network(1, subnet="10.88.1.0/24")
    assert plain.hosts[0].data_address is None


@pytest.mark.netns
def test_nothing_is_created_in_the_callers_namespace(make_network):
    before = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    make_network(4)
    after = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    names = lambda text: {line.split(":")[1].strip().split("@")[0] for line in text.splitlines()}  # noqa: E731
    # Only this network's link names are checked: other processes may add links meanwhile.
    assert not {"br0", "eth0", "h0", "h1", "h2", "h3"} & (names(after) - names(before))


@pytest.mark.netns
@pytest.mark.timeout(60)
def test_choose_address_inside_a_host_picks_eth0_by_default_route(make_network):
    net = make_network(2)
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def choose(host, **kw):
        out = host.run([PY, "-c", CHOOSE, json.dumps(kw)], capture_output=True, text=True, env=env, timeout=HANG)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    for host in net.hosts:
        got = choose(host)
        assert got["address"] == host.address
        assert got["interface"] == "eth0"
        assert "default route" in got["reason"]
    host = net.hosts[1]
    assert choose(host, interface="eth0")["address"] == host.address
    assert choose(host, address=host.address)["interface"] == "eth0"
    assert choose(host, address="127.0.0.3")["interface"] == "lo"
    other = net.hosts[0].address
    out = host.run([PY, "-c", CHOOSE, json.dumps({"address": other})], capture_output=True, text=True, env=env,
                   timeout=HANG)
    assert out.returncode != 0 and "AddressError" in out.stderr and other in out.stderr


@pytest.mark.netns
@pytest.mark.timeout(60)
def test_teardown_removes_namespaces_and_kills_processes():
    with Network(3) as net:
        names = net.namespaces
        assert set(names) <= set(list_namespaces())
        sleeper = net.hosts[1].popen(["sleep", "300"])
        # A process not started through popen (a grandchild) is killed too.
        stray = subprocess.Popen(["ip", "netns", "exec", net.hosts[2].name, "sleep", "300"])
        deadline = time.monotonic() + HANG  # `ip netns exec` enters the namespace, then execs
        while netns.namespace_pids(net.hosts[2].name) != [stray.pid] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert netns.namespace_pids(net.hosts[2].name) == [stray.pid]
    assert not set(names) & set(list_namespaces())
    assert _mine(net) == []
    assert sleeper.poll() is not None
    assert stray.wait(timeout=HANG) == -9
    net.down()  # idempotent


@pytest.mark.netns
def test_failure_inside_with_still_tears_down():
    with pytest.raises(ZeroDivisionError):
        with Network(2) as net:
            assert len(_mine(net)) == 3
            1 / 0
    assert _mine(net) == []


@pytest.mark.netns
def test_partially_built_network_is_torn_down(monkeypatch):
    def broken(self, host):
        if host.index == 1:
            raise NetnsError("injected failure")
        return orig(self, host)

    orig = Network._setup_host
    monkeypatch.setattr(Network, "_setup_host", broken)
    net = Network(3)
    with pytest.raises(NetnsError, match="injected"):
        with net:
            pytest.fail("must not get here")
    assert _mine(net) == []
    assert not net.is_up


@pytest.mark.netns
def test_partially_built_network_failing_in_ip_is_torn_down():
    net = Network(2)
    # Make the second host's namespace exist already: `ip netns add` fails on it.
    subprocess.run(["ip", "netns", "add", net.hosts[1].name], check=True)
    try:
        with pytest.raises(NetnsError, match="netns add"):
            net.up()
        assert net.bridge_ns not in list_namespaces()
        assert net.hosts[0].name not in list_namespaces()
    finally:
        netns.delete_namespace(net.hosts[1].name)


@pytest.mark.netns
def test_two_networks_coexist_with_the_same_subnet(make_network):
    a = make_network(2)
    b = make_network(2)
    assert a.addresses == b.addresses
    assert not set(a.namespaces) & set(b.namespaces)
    assert len(_mine(a)) == 3 and len(_mine(b)) == 3


@pytest.mark.netns
@pytest.mark.timeout(60)
def test_cleanup_stale_removes_only_dead_creators():
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"rdvt-{dead.pid}-abcdef-h0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    stray = subprocess.Popen(["ip", "netns", "exec", stale, "sleep", "300"])
    try:
        with Network(1) as live:
            assert netns.namespace_pids(stale) == [stray.pid]
            removed = cleanup_stale()
            assert stale in removed
            assert stale not in list_namespaces()
            assert set(live.namespaces) <= set(list_namespaces())
        assert stray.wait(timeout=HANG) == -9
    finally:
        if stray.poll() is None:
            stray.kill()
        stray.wait()
        if stale in list_namespaces():
            netns.delete_namespace(stale)


@pytest.mark.netns
@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", ["SIGTERM", "SIGHUP"])
def test_a_run_stopped_by_a_signal_removes_its_namespaces(signum):
    script = textwrap.dedent(
        """
        import json, sys, time
        sys.path.insert(0, sys.argv[1])
        from netns import Network, stop_on_sigterm
        stop_on_sigterm()
        try:
            with Network(2) as net:
                print(json.dumps(net.namespaces), flush=True)
                time.sleep(60)
        except KeyboardInterrupt as stopped:
            print("stopped by", stopped, flush=True)
            sys.exit(130)
        """
    )
    proc = subprocess.Popen([PY, "-c", script, str(SUPPORT)], stdout=subprocess.PIPE, text=True)
    try:
        names = json.loads(proc.stdout.readline())
        assert set(names) <= set(list_namespaces())
        proc.send_signal(getattr(signal, signum))
        assert proc.wait(timeout=HANG) == 130
        assert proc.stdout.read() == f"stopped by {signum}\n"
        assert not set(names) & set(list_namespaces())
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def _gone_afterwards():
    """Set up before ``make_network``, so torn down after it: checks its teardown."""
    nets: list[Network] = []
    yield nets
    for net in nets:
        assert _mine(net) == [], f"make_network left {_mine(net)}"
        assert not net.is_up


@pytest.mark.netns
def test_factory_tears_down_every_network_after_the_test(_gone_afterwards, make_network):
    for n in (1, 2, 3):
        net = make_network(n)
        assert net.is_up and len(_mine(net)) == n + 1
        _gone_afterwards.append(net)
    assert len(_gone_afterwards) == 3
