"""Several hosts on one machine: network namespaces joined by a bridge.

Usage::

    with Network(3) as net:
        server = net.hosts[0].popen([sys.executable, "server.py"])
        net.hosts[1].run([sys.executable, "client.py", net.hosts[0].address], check=True)

Layout of one network (needs root and iproute2's ``ip``):

* a bridge namespace ``rdvt-<pid>-<hex>-br`` holding the bridge ``br0``
  (multicast snooping off, so multicast floods every port) and one veth end
  ``h<i>`` per host; nothing is created in the caller's namespace;
* host namespaces ``rdvt-<pid>-<hex>-h<i>``, each with ``lo`` up and ``eth0``
  (the other veth end) holding the ``i``-th address of the subnet (10.213.0.1,
  10.213.0.2, ... by default), the subnet's route and a default route
  ``dev eth0``. Nothing lies beyond the bridge, so no packet leaves;
* with ``data_subnet``, a second bridge ``bd`` in the bridge namespace and in each host
  ``eth1`` on it, holding the ``i``-th address of that subnet and its route only: a
  separate data network beside the control one.

``<pid>`` is the pid of the creating process: :func:`cleanup_stale` removes
only namespaces whose creator is dead, so concurrent test sessions are safe.
Teardown kills every process still inside a namespace and deletes every
namespace of the network, also after an error or a partial build.
"""

from __future__ import annotations

import atexit
import ipaddress
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

log = logging.getLogger(__name__)

PREFIX = "rdvt-"
DEFAULT_SUBNET = "10.213.0.0/24"
SKIP_ENV = "RENDEZVOUS_SKIP_NETNS"
NETNS_ETC = "/etc/netns"
_NAME_RE = re.compile(r"^rdvt-(\d+)-([0-9a-f]{6})-(br|rt|h\d+)$")
_IP_TIMEOUT = 30.0

#: Networks that are up: torn down at interpreter exit if still up then.
_live_networks: "set[Network]" = set()


class NetnsError(RuntimeError):
    """An ``ip`` command failed while building or tearing down a network."""


def _ip(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    argv = ["ip", *args]
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=_IP_TIMEOUT)
    if check and proc.returncode != 0:
        detail = proc.stderr.strip() or proc.stdout.strip()
        if stdin:
            detail += f"\n--- batch ---\n{stdin}"
        raise NetnsError(f"{' '.join(argv)} failed ({proc.returncode}): {detail}")
    return proc


def list_namespaces() -> list[str]:
    """Names of all named network namespaces (``ip netns list``)."""
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(ns: str) -> list[int]:
    """Pids of the processes inside namespace ``ns`` (empty if it is gone)."""
    proc = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_namespace_processes(ns: str, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process in ``ns`` until none is left; returns the pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        pids = [p for p in namespace_pids(ns) if p != os.getpid()]
        if not pids:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        if time.monotonic() > deadline:
            raise NetnsError(f"processes {pids} in namespace {ns} survive SIGKILL")
        time.sleep(0.02)


def delete_namespace(ns: str) -> None:
    """Kill what runs in ``ns``, then delete it (and its /etc/netns files). A missing
    namespace is fine."""
    kill_namespace_processes(ns)
    shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
    proc = _ip("netns", "delete", ns, check=False)
    if proc.returncode != 0 and ns in list_namespaces():
        raise NetnsError(f"ip netns delete {ns} failed: {proc.stderr.strip()}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale(prefix: str = PREFIX) -> list[str]:
    """Delete the namespaces left by crashed runs: those named ``rdvt-<pid>-...``
    whose creator ``pid`` is no longer alive. Returns the names deleted.

    Namespaces of live processes (another test session running now, or this
    one) are left alone.
    """
    removed: list[str] = []
    for ns in list_namespaces():
        if not ns.startswith(prefix):
            continue
        m = _NAME_RE.match(ns)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            delete_namespace(ns)
            removed.append(ns)
        except (NetnsError, subprocess.SubprocessError, OSError) as e:
            log.warning("could not remove stale namespace %s: %s", ns, e)
    if removed:
        log.info("removed %d stale namespaces: %s", len(removed), " ".join(removed))
    return removed


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespace tests need root (they create namespaces with `ip netns`)"
    if shutil.which("ip") is None:
        return "network namespace tests need iproute2's `ip` command, which is not on PATH"
    return None


def require_netns(environ: Any = None) -> None:
    """In a test: fail with a clear message if namespaces are unavailable, or
    skip when ``RENDEZVOUS_SKIP_NETNS=1`` is set."""
    import pytest

    environ = os.environ if environ is None else environ
    reason = unavailable_reason()
    if reason is None:
        return
    if environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{reason}; skipped because {SKIP_ENV}=1")
    pytest.fail(f"{reason}. Run as root, or set {SKIP_ENV}=1 to skip these tests.", pytrace=False)


@dataclass
class Host:
    """One host of a :class:`Network`: a namespace with ``eth0`` on the bridge."""

    index: int
    name: str
    address: str
    interface: str = "eth0"
    prefixlen: int = 24
    segment: int = 0
    #: Its ULA IPv6 address on a dual-stack network (``subnet6``), if it has one.
    address6: str | None = None
    #: Whether ``address`` is IPv4 and assigned (False on an IPv6-only host of a dual-stack
    #: network, whose ``address`` is then ``address6``).
    has_ipv4: bool = True
    #: Its address on the data network (``data_subnet``), on ``data_interface``, if any.
    data_address: str | None = None
    data_interface: str = "eth1"
    _procs: list[subprocess.Popen] = field(default_factory=list, repr=False)

    @property
    def assigned(self) -> list[str]:
        """``address/prefixlen`` of every address of eth0."""
        own = [f"{self.address}/{self.prefixlen}"] if self.has_ipv4 or self.address6 is None else []
        return own + ([f"{self.address6}/64"] if self.address6 else [])

    def readdress(self, address: str) -> None:
        """Give ``eth0`` ``address`` (another host's, say) instead of its own."""
        self.run(["ip", "addr", "flush", "dev", self.interface], check=True)
        self.run(["ip", "addr", "add", f"{address}/{self.prefixlen}", "dev", self.interface], check=True)

    def command(self, argv: Sequence[str]) -> list[str]:
        """``argv`` prefixed to run inside this host's namespace."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a list of arguments, not a string")
        return ["ip", "netns", "exec", self.name, *map(os.fspath, argv)]

    def popen(self, argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen:
        """Start ``argv`` inside the namespace (``subprocess.Popen`` arguments).

        ``ip netns exec`` execs the command, so the Popen's pid is the
        process itself. Processes still running at teardown are killed.
        """
        proc = subprocess.Popen(self.command(argv), **popen_kwargs)
        self._procs.append(proc)
        return proc

    def run(self, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
        """Run ``argv`` inside the namespace to completion (``subprocess.run``)."""
        return subprocess.run(self.command(argv), **kwargs)

    def write_hosts(self, lines: Sequence[str]) -> None:
        """This host's own /etc/hosts (``ip netns exec`` mounts /etc/netns/NAME/hosts
        over it), so that a name can resolve to several of the network's addresses."""
        directory = os.path.join(NETNS_ETC, self.name)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "hosts"), "w") as f:
            f.write("\n".join(["127.0.0.1 localhost", *lines]) + "\n")

    def write_resolv_conf(self, nameserver: str, search: Sequence[str] = (), ndots: int = 1) -> None:
        """This host's own /etc/resolv.conf (mounted like its hosts file): names are asked of
        `nameserver`, as a pod asks its cluster DNS."""
        directory = os.path.join(NETNS_ETC, self.name)
        os.makedirs(directory, exist_ok=True)
        lines = [f"nameserver {nameserver}", *([f"search {' '.join(search)}"] if search else []),
                 f"options ndots:{ndots} timeout:1 attempts:2"]
        with open(os.path.join(directory, "resolv.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")

    @property
    def mac(self) -> str:
        """eth0's fixed MAC address, for static neighbour entries."""
        return f"02:00:{self.index >> 8:02x}:{self.index & 0xff:02x}:00:01"


class Network:
    """``n_hosts`` namespaces on one private bridge; a context manager.

    ``subnet`` must be a private network (IPv4, or IPv6 ULA: then eth0 has no IPv4)
    with room for the hosts; host ``i`` gets its ``i+1``-th address. ``up()``/``down()``
    may also be called directly; ``down()`` is idempotent and is also run at interpreter exit.

    ``multicast=False``: the bridge forwards no multicast (a cloud VPC, a switch that
    snoops and forwards nothing); IPv6 neighbours are then entered statically, as
    neighbour discovery is multicast too. ``segments=2``: the hosts are split, in order,
    onto that many bridges, each with its share of ``subnet``, joined by a router
    namespace ``...-rt`` that forwards unicast only; a segment's first address is the
    router's, and the hosts' default route goes through it.

    ``subnet6`` (a ULA /64; one segment, multicast on): the hosts are dual-stack, host ``i``
    also has the ``i+1``-th address of ``subnet6`` and an IPv6 default route; ``families``
    gives each host ``"46"`` (both, the default), ``"4"`` or ``"6"`` (one family only).

    ``data_subnet`` (a private IPv4 network; one segment): every host also has ``eth1``
    on a second bridge, with the ``i+1``-th address of that subnet (``Host.data_address``)
    and no route beyond it: the data network of a lab beside its office network.
    """

    def __init__(
        self, n_hosts: int, subnet: str = DEFAULT_SUBNET, multicast: bool = True, segments: int = 1,
        subnet6: str | None = None, families: Sequence[str] = (), data_subnet: str | None = None,
    ) -> None:
        if n_hosts < segments or segments < 1:
            raise ValueError("a network needs at least one host per segment")
        if subnet6 is not None and (segments > 1 or not multicast or ipaddress.ip_network(subnet).version != 4):
            raise ValueError("a dual-stack network has one segment, multicast, and an IPv4 subnet")
        net = ipaddress.ip_network(subnet)
        if not net.is_private or net.is_loopback or net.is_link_local:
            raise ValueError(f"subnet {subnet} must be a private network (e.g. 10.213.0.0/24 or fd00:213::/64)")
        parts = list(net.subnets(prefixlen_diff=(segments - 1).bit_length())) if segments > 1 else [net]
        per = -(-n_hosts // segments)
        if min(p.num_addresses - 2 for p in parts) < per + (segments > 1):
            raise ValueError(f"subnet {subnet} has no room for {n_hosts} hosts in {segments} segments")
        self.subnet = net
        self.n_hosts = n_hosts
        self.multicast = multicast
        self.tag = secrets.token_hex(3)
        #: Common prefix of this network's namespace names.
        self.prefix = f"{PREFIX}{os.getpid()}-{self.tag}-"
        self.bridge_ns = self.prefix + "br"
        self.router_ns = self.prefix + "rt" if segments > 1 else None
        addrs = [p.hosts() for p in parts]
        #: The router's address on each segment (none with one segment).
        self.gateways = [str(next(a)) for a in addrs] if segments > 1 else []
        self.hosts: list[Host] = []
        for i in range(n_hosts):
            segment = i // per
            address = str(next(addrs[segment]))
            self.hosts.append(Host(i, f"{self.prefix}h{i}", address, prefixlen=parts[segment].prefixlen, segment=segment))
        if subnet6 is not None:
            self._add_ipv6(ipaddress.ip_network(subnet6), families or ["46"] * n_hosts)
        self.data_subnet = ipaddress.ip_network(data_subnet) if data_subnet is not None else None
        if self.data_subnet is not None:
            self._add_data_network(self.data_subnet, segments)
        self._created: list[str] = []
        self.is_up = False

    def _add_ipv6(self, subnet6: ipaddress.IPv4Network | ipaddress.IPv6Network, families: Sequence[str]) -> None:
        if subnet6.version != 6 or not subnet6.is_private or subnet6.prefixlen != 64:
            raise ValueError(f"subnet6 {subnet6} must be a ULA /64 (e.g. fd00:213::/64)")
        if len(families) != self.n_hosts or not set(families) <= {"4", "6", "46"}:
            raise ValueError(f"families must give each of the {self.n_hosts} hosts '4', '6' or '46'")
        for host, v6, family in zip(self.hosts, subnet6.hosts(), families):
            host.address6 = str(v6) if "6" in family else None
            host.has_ipv4 = "4" in family
            host.address = host.address if host.has_ipv4 else str(v6)

    def _add_data_network(self, data: ipaddress.IPv4Network | ipaddress.IPv6Network, segments: int) -> None:
        if data.version != 4 or not data.is_private or data.overlaps(self.subnet) or segments > 1:
            raise ValueError(f"data_subnet {data} must be a private IPv4 network apart from {self.subnet}, "
                             "on a network of one segment")
        if data.num_addresses - 2 < self.n_hosts:
            raise ValueError(f"data_subnet {data} has no room for {self.n_hosts} hosts")
        for host, address in zip(self.hosts, data.hosts()):
            host.data_address = str(address)

    # -- context manager ---------------------------------------------------

    def __enter__(self) -> "Network":
        self.up()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.down()
        except Exception:
            if exc_type is None:
                raise
            log.exception("teardown of network %s failed (while handling %s)", self.prefix, exc_type.__name__)

    @property
    def addresses(self) -> list[str]:
        return [h.address for h in self.hosts]

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of this network (bridge first, router last)."""
        return [self.bridge_ns] + [h.name for h in self.hosts] + ([self.router_ns] if self.router_ns else [])

    # -- build ---------------------------------------------------------------

    def _add_namespace(self, ns: str) -> None:
        self._created.append(ns)  # before: a half-made namespace is still deleted
        _ip("netns", "add", ns)

    def up(self) -> "Network":
        """Create the namespaces, the bridges, the router and the links. On failure, tear
        down and re-raise."""
        if self.is_up:
            return self
        _live_networks.add(self)
        try:
            for ns in self.namespaces:
                self._add_namespace(ns)
            self._setup_bridges()
            for host in self.hosts:
                self._setup_host(host)
            if self.router_ns:
                self._setup_router()
        except BaseException:
            try:
                self.down()
            except Exception:
                log.exception("teardown of partially built network %s failed", self.prefix)
            raise
        self.is_up = True
        return self

    def _port(self, port: str, segment: int, peer: str, ns: str, mac: str, bridge: str | None = None) -> list[str]:
        """A veth from bridge ``br<segment>`` (or ``bridge``; end ``port``) to ``peer`` in ``ns``."""
        lines = [
            f"link add {port} type veth peer name {peer} address {mac} netns {ns}",
            f"link set {port} master {bridge or f'br{segment}'}",
        ]
        if not self.multicast:
            lines.append(f"link set {port} type bridge_slave mcast_flood off")
        return lines + [f"link set {port} up"]

    def _setup_bridges(self) -> None:
        lines = ["link set lo up"]
        for segment in range(max(1, len(self.gateways))):
            lines.append(f"link add br{segment} type bridge mcast_snooping 0 stp_state 0 forward_delay 0")
            lines.append(f"link set br{segment} up")
        for host in self.hosts:
            lines += self._port(f"h{host.index}", host.segment, host.interface, host.name, host.mac)
        for segment in range(len(self.gateways)):
            lines += self._port(f"g{segment}", segment, f"r{segment}", self.router_ns, _router_mac(segment))
        if self.data_subnet is not None:
            lines += ["link add bd type bridge mcast_snooping 0 stp_state 0 forward_delay 0", "link set bd up"]
            for host in self.hosts:
                lines += self._port(f"d{host.index}", 0, host.data_interface, host.name, _data_mac(host.index), "bd")
        _ip("-n", self.bridge_ns, "-batch", "-", stdin="\n".join(lines) + "\n")

    def _neighbours(self, segment: int, interface: str, me: str) -> list[str]:
        """Static IPv6 neighbours of one segment where no multicast carries discovery."""
        if self.multicast or self.subnet.version == 4:
            return []
        known = [(h.address, h.mac) for h in self.hosts if h.segment == segment]
        if self.gateways:
            known.append((self.gateways[segment], _router_mac(segment)))
        return [f"neigh add {a} lladdr {m} dev {interface} nud permanent" for a, m in known if a != me]

    @property
    def _nodad(self) -> str:
        return " nodad" if self.subnet.version == 6 else ""  # usable at once

    def _setup_host(self, host: Host) -> None:
        via = f"via {self.gateways[host.segment]} " if self.gateways else ""
        versions = sorted({ipaddress.ip_interface(a).version for a in host.assigned})
        lines = [
            "link set lo up",
            f"link set {host.interface} multicast on",
            *(f"addr add {a} dev {host.interface}{' nodad' if ':' in a else ''}" for a in host.assigned),  # usable at once
            f"link set {host.interface} up",
            *(f"route add {'default' if v == 4 else '::/0'} {via}dev {host.interface}" for v in versions),
            *self._neighbours(host.segment, host.interface, host.address),
        ]
        if host.data_address is not None and self.data_subnet is not None:
            lines += [f"addr add {host.data_address}/{self.data_subnet.prefixlen} dev {host.data_interface}",
                      f"link set {host.data_interface} up"]
        _ip("-n", host.name, "-batch", "-", stdin="\n".join(lines) + "\n")

    def _setup_router(self) -> None:
        """Forwards unicast between the segments; no multicast routing."""
        lines = ["link set lo up"]
        for segment, gateway in enumerate(self.gateways):
            prefixlen = next(h.prefixlen for h in self.hosts if h.segment == segment)
            lines += [
                f"addr add {gateway}/{prefixlen} dev r{segment}{self._nodad}",
                f"link set r{segment} up",
                *self._neighbours(segment, f"r{segment}", gateway),
            ]
        _ip("-n", self.router_ns, "-batch", "-", stdin="\n".join(lines) + "\n")
        key = "net/ipv4/ip_forward" if self.subnet.version == 4 else "net/ipv6/conf/all/forwarding"
        _ip("netns", "exec", self.router_ns, "sh", "-c", f"echo 1 > /proc/sys/{key}")

    def deafen(self, host: Host, deaf: bool = True) -> None:
        """The bridge stops flooding multicast to ``host`` (``deaf=False``: starts again):
        it hears no mDNS, while every other host still hears its own (a switch port with
        multicast filtered one way)."""
        flood = "off" if deaf else "on"
        _ip("-n", self.bridge_ns, "link", "set", f"h{host.index}", "type", "bridge_slave", "mcast_flood", flood)

    # -- teardown ------------------------------------------------------------

    def down(self) -> None:
        """Kill every process inside, delete every namespace. Idempotent.

        Works on a partially built network; raises :class:`NetnsError` at the
        end if something could not be removed (after trying everything).
        """
        errors: list[str] = []
        for host in self.hosts:
            for proc in host._procs:
                if proc.poll() is None:
                    try:
                        proc.kill()
                    except OSError:
                        pass
        existing = set(list_namespaces())
        mine = [ns for ns in existing if ns.startswith(self.prefix)]
        # Hosts first (deleting eth0 removes its veth peer), the bridge last.
        order = [ns for ns in self.namespaces if ns in existing or ns in self._created]
        order += sorted(ns for ns in mine if ns not in order)
        order = [ns for ns in order if ns != self.bridge_ns] + [ns for ns in order if ns == self.bridge_ns]
        for ns in order:
            try:
                delete_namespace(ns)
            except Exception as e:  # keep going: remove all we can
                errors.append(f"{ns}: {e}")
        for host in self.hosts:
            for proc in host._procs:
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    errors.append(f"process {proc.pid} in {host.name} did not exit")
            host._procs = [p for p in host._procs if p.returncode is None]
        self._created.clear()
        self.is_up = False
        _live_networks.discard(self)
        if errors:
            raise NetnsError("teardown left things behind: " + "; ".join(errors))

    def __repr__(self) -> str:
        state = "up" if self.is_up else "down"
        return f"<Network {self.prefix}* {self.n_hosts} hosts {self.subnet} {state}>"


def _router_mac(segment: int) -> str:
    return f"02:00:00:{segment:02x}:00:fe"


def _data_mac(index: int) -> str:
    """A host's eth1 on the data network."""
    return f"02:01:{index >> 8:02x}:{index & 0xff:02x}:00:01"


def stop_on_sigterm() -> None:
    """Have SIGTERM and SIGHUP stop this process the way Ctrl-C does: as KeyboardInterrupt,
    so that a run stopped by `timeout`, a cancelled CI job or a closed terminal unwinds its
    `with Network(...)` blocks and removes its namespaces (their default action would exit
    at once, past every teardown and atexit handler)."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)


@atexit.register
def _down_all() -> None:
    for net in list(_live_networks):
        try:
            net.down()
        except Exception:
            log.exception("teardown of %r at exit failed", net)
