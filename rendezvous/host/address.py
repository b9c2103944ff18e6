"""Choosing the address this node advertises to its peers.

The decision is split in two:

* :func:`select_address` is pure: it decides from plain data (the local
  adapters and the IPv4 route table) and does no I/O, so every rule can be
  unit-tested.
* :func:`choose_address` reads that data from the machine (``getifaddrs`` and
  ``/proc/net/route``) and calls :func:`select_address`.

The route tables' rows and their parsing are in :mod:`rendezvous.host.routes`.

Rules, in order:

1. ``--address IP`` (``address``): the IP must be valid and assigned to a local
   interface (a loopback address such as 127.0.0.2 counts as assigned when a
   loopback interface holds a network that contains it, as Linux routes the
   whole 127.0.0.0/8 to ``lo``). Loopback is allowed because it was asked for.
2. ``--interface NAME`` (``interface``): the first IPv4 address of that
   interface, or its first IPv6 address that is not link-local if it has no
   IPv4 address. Excluded names and loopback are allowed because they were
   asked for.
3. Both given: accepted only when the address is on that interface.
4. Neither: the interface that carries the IPv4 default route (lowest metric
   wins), unless it is loopback or has an excluded name (see
   :data:`EXCLUDED_PREFIXES`); else, when that gives no usable IPv4 address, the
   interface of the IPv6 default route if it has a global or ULA IPv6 address
   (an IPv6-only host); otherwise the first non-excluded, non-loopback
   interface with a usable IPv4 address (see :func:`is_usable_ipv4`).
   If nothing is usable, :class:`AddressError` lists every candidate and why
   it was not taken.

Unless ``--address`` pinned one, a dual-stack host also knows its address of the other
family (:attr:`AddressChoice.alternate`): a global or ULA IPv6 address (or a usable IPv4
one) on the chosen interface, else on the other family's default route interface. A job
whose members do not all share one family uses it (see ``core.family``).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Callable, Iterable, Mapping, Sequence, Union

from rendezvous.host import interfaces
from rendezvous.errors import AddressError

from ..core.record import record, replace
from .routes import (  # the route tables, importable from here as before
    RTF_REJECT as RTF_REJECT,
    RTF_UP as RTF_UP,
    Route as Route,
    default_route as default_route,
    parse_ipv6_routes as parse_ipv6_routes,
    parse_routes as parse_routes,
)

log = logging.getLogger(__name__)

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPInterface = Union[ipaddress.IPv4Interface, ipaddress.IPv6Interface]

ROUTE_FILE = "/proc/net/route"
IPV6_ROUTE_FILE = "/proc/net/ipv6_route"

#: Interface name prefixes never picked automatically (they are still accepted
#: with --interface or --address). They are the plumbing of containers,
#: virtual machines and tunnels: their addresses are private to this machine
#: (or reach another network than the peers' LAN) and mDNS does not cross them.
#:
#: * ``docker`` (docker0), ``br-`` (Docker user-defined networks, ``br-<id>``;
#:   a plain ``br0`` is NOT excluded: on hypervisor hosts it often carries
#:   the host's LAN address), ``veth`` (container ends of veth pairs),
#:   ``podman``, ``cni``, ``flannel``, ``cali`` (Calico), ``cilium``,
#:   ``weave``, ``kube-`` (kube-ipvs0, kube-bridge), ``vxlan`` (overlay
#:   devices, e.g. flannel.1 is caught by ``flannel``), ``lxcbr``/``lxdbr``
#:   (LXC/LXD), ``virbr`` (libvirt NAT bridge) and ``vnet`` (libvirt guest taps);
#: * ``tun``/``tap`` (OpenVPN and VM taps), ``wg`` (WireGuard) and ``tailscale``:
#:   point-to-point tunnels without multicast; a VPN that installs the default
#:   route must not win over the LAN interface.
EXCLUDED_PREFIXES: tuple[str, ...] = (
    "docker",
    "br-",
    "veth",
    "podman",
    "cni",
    "flannel",
    "cali",
    "cilium",
    "weave",
    "kube-",
    "vxlan",
    "lxcbr",
    "lxdbr",
    "virbr",
    "vnet",
    "tun",
    "tap",
    "wg",
    "tailscale",
)


@record
class AddressChoice:
    """The address to advertise, the interface that holds it and why."""

    address: IPAddress
    interface: str | None
    reason: str
    # This host's usable address of the other IP family, if it has one and --address did
    # not pin the family.
    alternate: IPAddress | None = None


# --------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------


def excluded_prefix(name: str) -> str | None:
    """The prefix in :data:`EXCLUDED_PREFIXES` that ``name`` starts with, if any."""
    for prefix in EXCLUDED_PREFIXES:
        if name.startswith(prefix):
            return prefix
    return None


def is_usable_ipv4(ip: IPAddress) -> bool:
    """An IPv4 address peers on a LAN can reach: private, shared (100.64/10) or global.

    Not loopback, link-local (169.254/16), multicast, unspecified or reserved.
    """
    return (
        isinstance(ip, ipaddress.IPv4Address)
        and not ip.is_loopback
        and not ip.is_link_local
        and not ip.is_multicast
        and not ip.is_unspecified
        and not ip.is_reserved
    )


def _strip_scope(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    return ip


def _to_interface(value: object) -> IPInterface:
    """Coerce ``"10.0.0.2/24"``, ``"10.0.0.2"``, an address or an interface object."""
    if isinstance(value, (ipaddress.IPv4Interface, ipaddress.IPv6Interface)):
        iface = value
    elif isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        iface = ipaddress.ip_interface(_strip_scope(value))
    else:
        text = str(value)
        addr, sep, prefix = text.partition("/")
        addr = addr.split("%", 1)[0]
        iface = ipaddress.ip_interface(addr + sep + prefix)
    return iface


def normalize_adapters(
    adapters: Mapping[str, Iterable[object]],
) -> dict[str, list[IPInterface]]:
    """Adapter name -> list of ``ip_interface`` objects, order kept."""
    return {name: [_to_interface(v) for v in ips] for name, ips in adapters.items()}


def is_loopback_adapter(name: str, ips: Sequence[IPInterface]) -> bool:
    """``lo`` or any adapter whose every address is a loopback address."""
    if name == "lo":
        return True
    return bool(ips) and all(i.ip.is_loopback for i in ips)


def _ips_text(ips: Sequence[IPInterface]) -> str:
    return ", ".join(str(i.ip) for i in ips) if ips else "no address"


def _list_interfaces(adapters: Mapping[str, Sequence[IPInterface]]) -> str:
    if not adapters:
        return "none"
    return "; ".join(f"{name} ({_ips_text(ips)})" for name, ips in adapters.items())


# --------------------------------------------------------------------------
# The pure decision
# --------------------------------------------------------------------------


def select_address(
    adapters: Mapping[str, Iterable[object]],
    routes: Sequence[Route] = (),
    address: str | IPAddress | None = None,
    interface: str | None = None,
) -> AddressChoice:
    """Decide which address to advertise. Pure: no I/O.

    ``adapters`` maps an interface name to its addresses, in the machine's
    order (each an ``ip_interface``/``ip_address`` object or a string such as
    ``"10.0.0.2/24"``); ``routes`` is the parsed IPv4 route table. See the
    module docstring for the rules. Raises :class:`AddressError`.
    """
    table = normalize_adapters(adapters)
    if address is not None and str(address).strip() == "":
        raise AddressError("--address is empty: give an IP address of this machine")
    if interface is not None and interface.strip() == "":
        raise AddressError("--interface is empty: give the name of a network interface")

    if address is not None:
        choice = _by_address(table, address)
        if interface is not None and choice.interface != interface:
            if interface not in table:
                raise AddressError(
                    f"--interface {interface!r} does not exist; existing interfaces: "
                    f"{_list_interfaces(table)}"
                )
            raise AddressError(
                f"--address {address} is on interface {choice.interface}, not on "
                f"--interface {interface} ({interface} has {_ips_text(table[interface])})"
            )
        if interface is not None:
            return AddressChoice(choice.address, interface, f"given with --address and --interface {interface}")
        return choice
    choice = _by_interface(table, interface) if interface is not None else _automatic(table, routes)
    return _with_alternate(choice, table, routes)


def _by_address(table: Mapping[str, Sequence[IPInterface]], value: str | IPAddress) -> AddressChoice:
    try:
        wanted = value if isinstance(value, (ipaddress.IPv4Address, ipaddress.IPv6Address)) else ipaddress.ip_address(str(value).strip())
    except ValueError:
        raise AddressError(f"--address {str(value)!r} is not a valid IP address") from None
    if wanted.is_unspecified:
        raise AddressError(f"--address {wanted} is the unspecified address: peers cannot reach it; give this machine's IP")
    if wanted.is_multicast:
        raise AddressError(f"--address {wanted} is a multicast address: give an IP assigned to this machine")
    bare = _strip_scope(wanted)
    scope = wanted.scope_id if isinstance(wanted, ipaddress.IPv6Address) else None

    def scoped(name: str) -> IPAddress:
        # A link-local IPv6 address is only usable with its zone.
        if isinstance(bare, ipaddress.IPv6Address) and bare.is_link_local:
            return ipaddress.IPv6Address(f"{bare}%{name}")
        return bare

    for name, ips in table.items():
        if scope and not scope.isdigit() and scope != name:
            continue
        if any(i.ip == bare for i in ips):
            return AddressChoice(scoped(name), name, f"given with --address, on interface {name}")
    if bare.is_loopback:
        for name, ips in table.items():
            if is_loopback_adapter(name, ips) and any(bare in i.network for i in ips):
                return AddressChoice(bare, name, f"given with --address, on loopback interface {name}")
    raise AddressError(
        f"--address {value} is not assigned to any interface of this machine; "
        f"local addresses: {_list_interfaces(table)}"
    )


def _by_interface(table: Mapping[str, Sequence[IPInterface]], name: str) -> AddressChoice:
    if name not in table:
        raise AddressError(
            f"--interface {name!r} does not exist; existing interfaces: {_list_interfaces(table)}"
        )
    ips = table[name]
    for i in ips:
        if i.version == 4:
            return AddressChoice(i.ip, name, f"interface {name} given with --interface")
    for i in ips:
        if i.version == 6 and not i.ip.is_link_local:
            return AddressChoice(i.ip, name, f"interface {name} given with --interface (it has no IPv4 address)")
    raise AddressError(
        f"--interface {name} has no usable address ({_ips_text(ips)}; link-local IPv6 is not used); "
        f"existing interfaces: {_list_interfaces(table)}"
    )


def _first_usable_ipv4(ips: Sequence[IPInterface], gateway: ipaddress.IPv4Address | None = None) -> IPAddress | None:
    usable = [i for i in ips if is_usable_ipv4(i.ip)]
    if gateway is not None and not gateway.is_unspecified:
        for i in usable:
            if gateway in i.network:
                return i.ip
    return usable[0].ip if usable else None


def _exclusion(name: str, ips: Sequence[IPInterface]) -> str | None:
    if is_loopback_adapter(name, ips):
        return "loopback"
    prefix = excluded_prefix(name)
    if prefix is not None:
        return f"container/VM/tunnel interface (name starts with {prefix!r})"
    return None


def is_usable_ipv6(ip: IPAddress) -> bool:
    """A global or unique local (fc00::/7) IPv6 address: not link-local, loopback or multicast."""
    return (
        isinstance(ip, ipaddress.IPv6Address)
        and (ip.is_global or ip in ipaddress.IPv6Network("fc00::/7"))
        and not (ip.is_link_local or ip.is_loopback or ip.is_multicast)
    )


def _ipv6_default(table: Mapping[str, Sequence[IPInterface]], route: Route | None) -> AddressChoice | None:
    """An IPv6-only host: the first usable IPv6 address of the IPv6 default route's interface."""
    if route is None or route.interface not in table or _exclusion(route.interface, table[route.interface]):
        return None
    usable = [i.ip for i in table[route.interface] if is_usable_ipv6(i.ip)]
    if not usable:
        return None
    reason = f"interface {route.interface} carries the IPv6 default route (no usable IPv4 one)"
    return AddressChoice(usable[0], route.interface, reason)


def _with_alternate(
    choice: AddressChoice, table: Mapping[str, Sequence[IPInterface]], routes: Sequence[Route]
) -> AddressChoice:
    """The choice with this host's address of the other family: on the chosen interface,
    else on the interface of that family's default route (unless excluded)."""
    other, usable = (6, is_usable_ipv6) if choice.address.version == 4 else (4, is_usable_ipv4)
    route = default_route(routes, other)
    names = [choice.interface]
    if route is not None and route.interface in table and not _exclusion(route.interface, table[route.interface]):
        names.append(route.interface)
    for name in names:
        found = [i.ip for i in table.get(name or "", ()) if usable(i.ip)]
        if found:
            return replace(choice, alternate=found[0])
    return choice


def _automatic(table: Mapping[str, Sequence[IPInterface]], routes: Sequence[Route]) -> AddressChoice:
    notes: list[str] = []
    route = default_route(routes)
    if route is None:
        notes.append("no IPv4 default route")
    elif route.interface not in table:
        notes.append(f"the default route is on {route.interface}, which has no address")
    else:
        why = _exclusion(route.interface, table[route.interface])
        if why is not None:
            notes.append(f"the default route is on {route.interface}, skipped: {why}")
        else:
            ip = _first_usable_ipv4(table[route.interface], route.gateway)
            if ip is not None:
                return AddressChoice(ip, route.interface, f"interface {route.interface} carries the default route")
            notes.append(
                f"the default route is on {route.interface}, which has no private or global IPv4 address"
            )

    ipv6 = _ipv6_default(table, default_route(routes, 6))
    if ipv6 is not None:
        return ipv6
    rejected: list[str] = []
    for name, ips in table.items():
        why = _exclusion(name, ips)
        if why is None:
            ip = _first_usable_ipv4(ips)
            if ip is not None:
                log.debug("address fallback: %s (%s)", name, "; ".join(notes))
                return AddressChoice(
                    ip, name, f"interface {name} is the first with a private or global IPv4 address ({notes[0]})"
                )
            why = f"no private or global IPv4 address ({_ips_text(ips)})"
        rejected.append(f"{name}: {why}")
    raise AddressError(
        "no usable network address found ("
        + "; ".join(notes)
        + "). Candidates: "
        + ("; ".join(rejected) if rejected else "no network interface at all")
        + ". Choose one with --address IP or --interface NAME."
    )


# --------------------------------------------------------------------------
# Thin readers and the entry point
# --------------------------------------------------------------------------


def read_adapters() -> dict[str, list[IPInterface]]:
    """The machine's adapters (name -> addresses), in the system's order.

    IPv4 alias labels (``eth0:1``) are merged into their interface.
    """
    table: dict[str, list[IPInterface]] = {}
    for label, iface in interfaces.read():
        ips = table.setdefault(label.split(":", 1)[0], [])
        if iface not in ips:
            ips.append(iface)
    return table


def read_routes(path: str = ROUTE_FILE, parse: Callable[[str], list[Route]] = parse_routes) -> list[Route]:
    """A route table (IPv4 by default); empty when it cannot be read (not Linux)."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return parse(f.read())
    except OSError as e:
        log.debug("cannot read %s: %s", path, e)
        return []


def choose_address(address: str | None = None, interface: str | None = None) -> AddressChoice:
    """Choose the address to advertise on this machine; see :func:`select_address`."""
    adapters = read_adapters()
    automatic = address is None and interface is None
    routes = read_routes() + read_routes(IPV6_ROUTE_FILE, parse_ipv6_routes) if automatic else []
    choice = select_address(adapters, routes, address, interface)
    log.debug("advertised address %s: %s", choice.address, choice.reason)
    return choice
