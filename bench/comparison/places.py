"""Where the agents of one measurement run: loopback addresses or network namespaces.

Loopback: agent i gets 127.0.0.(i+2) (rendezvous binds it; torchrun talks to 127.0.0.1).

Namespaces (root): one namespace per agent on one private bridge, built by tests/support/netns.py
(10.213.0.0/24, nothing in the caller's namespace, nothing beyond the bridge). Each namespace
also gets its own /etc/netns/<name>/hosts and resolv.conf, which `ip netns exec` mounts over
/etc: the hosts file names every address of the network, as a real cluster's DNS or hosts
file would, and the resolver points at the namespace's own 127.0.0.1, where nothing listens.
Without that, torchrun's reverse lookups of its peers' addresses would wait for the
machine's DNS server, which cannot be reached from inside (3 s per lookup, packets sent
towards an address outside the namespaces). With these files no lookup leaves a namespace's
own loopback.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "support"))
from netns import _NAME_RE, Network, _pid_alive, cleanup_stale, stop_on_sigterm  # noqa: E402,F401
from netns import unavailable_reason as netns_unavailable  # noqa: E402,F401  (why not, or None)

ETC_NETNS = Path("/etc/netns")


def hosts_file(addresses: Sequence[str], own: int, hostname: str) -> str:
    """/etc/hosts for host `own` of a network: every host by name, this machine's name on its
    own address."""
    lines = ["127.0.0.1 localhost"]
    for i, address in enumerate(addresses):
        lines.append(f"{address} h{i}" + (f" {hostname}" if i == own else ""))
    return "\n".join(lines) + "\n"


RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


class Loopback:
    name = "loopback"

    def __init__(self, n: int) -> None:
        if n > 250:
            raise ValueError("loopback has room for 250 agents")

    def address(self, i: int) -> str:
        return f"127.0.0.{i + 2}"

    def wrap(self, i: int, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def __enter__(self) -> "Loopback":
        return self

    def __exit__(self, *exc) -> None:
        pass


class Namespaces:
    name = "netns"

    def __init__(self, n: int) -> None:
        self.network = Network(n)
        self._dirs: list[Path] = []

    def address(self, i: int) -> str:
        return self.network.hosts[i].address

    def wrap(self, i: int, argv: Sequence[str]) -> list[str]:
        return self.network.hosts[i].command(argv)

    def __enter__(self) -> "Namespaces":
        cleanup_stale()
        _remove_stale_etc()
        self.network.up()
        try:
            hostname = socket.gethostname()
            addresses = self.network.addresses
            for host in self.network.hosts:
                d = ETC_NETNS / host.name
                self._dirs.append(d)
                d.mkdir(parents=True, exist_ok=True)
                (d / "hosts").write_text(hosts_file(addresses, host.index, hostname))
                (d / "resolv.conf").write_text(RESOLV_CONF)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.network.down()
        finally:
            for d in self._dirs:
                shutil.rmtree(d, ignore_errors=True)
            self._dirs.clear()


def _remove_stale_etc() -> None:
    """/etc/netns/<name> directories left by a crashed run of this benchmark."""
    if not ETC_NETNS.is_dir():
        return
    for d in ETC_NETNS.iterdir():
        m = _NAME_RE.match(d.name)
        if m and not _pid_alive(int(m.group(1))):
            shutil.rmtree(d, ignore_errors=True)


def place(where: str, n: int):
    return Loopback(n) if where == "loopback" else Namespaces(n)
