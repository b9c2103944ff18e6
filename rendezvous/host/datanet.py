"""The data network: `--data-interface NAME` / `--data-address IP`.

Many labs have a fast network for the training traffic beside the office network that
discovery and the rendezvous use. A node given one announces its address there (with its
advert and its Join); the TensorFlow workers reach each other at those addresses
(TF_CONFIG), and NCCL and Gloo are told the interface. The rendezvous itself stays on
the control address (`host.address`).

Like `--address`, a data address must be one of this machine's: anything else is refused
(exit status 5) with the list of its interfaces. `select_data_address` decides from plain
data; `choose_data_address` reads the machine.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Iterable, Mapping, Optional, Sequence

from ..errors import AddressError
from .address import (
    AddressChoice, IPInterface, _list_interfaces, is_loopback_adapter, normalize_adapters, read_adapters,
)

log = logging.getLogger(__name__)


def _on_interface(table: Mapping[str, Sequence[IPInterface]], name: str) -> AddressChoice:
    """The first IPv4 address of interface `name`, else its first IPv6 one that is not
    link-local (a link-local one would need a zone no peer can use)."""
    if name not in table:
        raise AddressError(f"--data-interface {name!r} does not exist; existing interfaces: {_list_interfaces(table)}")
    ips = table[name]
    usable = [i.ip for i in ips if i.version == 4] + [i.ip for i in ips if i.version == 6 and not i.ip.is_link_local]
    if not usable:
        raise AddressError(f"--data-interface {name} has no usable address (link-local IPv6 is not used); "
                           f"existing interfaces: {_list_interfaces(table)}")
    return AddressChoice(usable[0], name, f"interface {name} given with --data-interface")


def _holding(table: Mapping[str, Sequence[IPInterface]], text: str) -> AddressChoice:
    """The interface that holds the address `text`."""
    try:
        wanted = ipaddress.ip_address(text.strip())
    except ValueError:
        raise AddressError(f"--data-address {text!r} is not a valid IP address") from None
    if wanted.is_unspecified or wanted.is_multicast or (wanted.version == 6 and wanted.is_link_local):
        raise AddressError(f"--data-address {wanted} cannot be reached by the other nodes: give this machine's "
                           f"address on the data network; local addresses: {_list_interfaces(table)}")
    for name, ips in table.items():
        if any(i.ip == wanted for i in ips):
            return AddressChoice(wanted, name, f"given with --data-address, on interface {name}")
    for name, ips in table.items():  # as with --address: Linux routes all of 127.0.0.0/8 to lo
        if wanted.is_loopback and is_loopback_adapter(name, ips) and any(wanted in i.network for i in ips):
            return AddressChoice(wanted, name, f"given with --data-address, on loopback interface {name}")
    raise AddressError(f"--data-address {wanted} is not assigned to any interface of this machine; "
                       f"local addresses: {_list_interfaces(table)}")


def select_data_address(adapters: Mapping[str, Iterable[object]], address: Optional[str] = None,
                        interface: Optional[str] = None) -> Optional[AddressChoice]:
    """This node's data network (address and interface), or None when neither option is
    given. Pure: `adapters` maps each interface name to its addresses. Both given: the
    address must be on that interface. Raises AddressError naming the option."""
    if address is None and interface is None:
        return None
    table = normalize_adapters(adapters)
    if address is None:
        assert interface is not None
        return _on_interface(table, interface)
    choice = _holding(table, address)
    if interface is not None and choice.interface != interface:
        if interface not in table:
            raise AddressError(f"--data-interface {interface!r} does not exist; existing interfaces: "
                               f"{_list_interfaces(table)}")
        raise AddressError(f"--data-address {address} is on interface {choice.interface}, not on "
                           f"--data-interface {interface}; existing interfaces: {_list_interfaces(table)}")
    return choice


def choose_data_address(address: Optional[str] = None, interface: Optional[str] = None) -> Optional[AddressChoice]:
    """This machine's data network, as `select_data_address` decides it."""
    if address is None and interface is None:
        return None
    choice = select_data_address(read_adapters(), address, interface)
    if choice is not None:
        log.debug("data network: %s (%s)", choice.address, choice.reason)
    return choice
