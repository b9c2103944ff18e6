"""The machine's network interfaces and their IP addresses, read from the C library.

On Linux, :func:`read` calls ``getifaddrs(3)`` through ctypes itself. ``ifaddr``, which
zeroconf depends on, reads the same list, but importing it runs ``ldconfig -p`` in a child
process (``ctypes.util.find_library``) and imports ``platform``: about 7 ms of the CPU every
daemon spends before it is ready, on each of a job's nodes starting at once. Elsewhere
``ifaddr`` is used.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from typing import Union

IPInterface = Union[ipaddress.IPv4Interface, ipaddress.IPv6Interface]


def read() -> list[tuple[str, IPInterface]]:
    """Every (interface name, address with its prefix) of the machine, in the system's order:
    IPv4 alias labels (``eth0:1``) as the system names them, IPv6 link-local addresses
    without their ``%scope``, addresses whose netmask is not a prefix left out."""
    if sys.platform != "linux":
        return _read_ifaddr()
    import ctypes

    class sockaddr(ctypes.Structure):
        _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14)]

    class sockaddr_in(ctypes.Structure):
        _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16), ("addr", ctypes.c_ubyte * 4)]

    class sockaddr_in6(ctypes.Structure):
        _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16), ("flowinfo", ctypes.c_uint32),
                    ("addr", ctypes.c_ubyte * 16), ("scope_id", ctypes.c_uint32)]

    class ifaddrs(ctypes.Structure):
        pass

    ifaddrs._fields_ = [("next", ctypes.POINTER(ifaddrs)), ("name", ctypes.c_char_p), ("flags", ctypes.c_uint),
                        ("addr", ctypes.POINTER(sockaddr)), ("netmask", ctypes.POINTER(sockaddr)),
                        ("broadaddr", ctypes.POINTER(sockaddr)), ("data", ctypes.c_void_p)]
    layouts = {socket.AF_INET: sockaddr_in, socket.AF_INET6: sockaddr_in6}

    def packed(pointer, family: int) -> bytes:
        return bytes(ctypes.cast(pointer, ctypes.POINTER(layouts[family])).contents.addr)

    libc = ctypes.CDLL(None, use_errno=True)
    head = ctypes.POINTER(ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"getifaddrs: {os.strerror(errno)}")
    found = []
    try:
        entry = head
        while entry:
            item = entry.contents
            entry = item.next
            family = item.addr.contents.family if item.addr else None
            if family not in layouts or not item.netmask:
                continue
            address = ipaddress.ip_address(packed(item.addr, family))
            raw_mask = packed(item.netmask, family)  # the address's family: a netmask's own is 0 on some
            mask, bits = int.from_bytes(raw_mask, "big"), len(raw_mask) * 8
            prefix = bin(mask).count("1")
            if mask != (1 << bits) - (1 << (bits - prefix)):
                continue
            found.append((item.name.decode(errors="replace"), ipaddress.ip_interface((address, prefix))))
    finally:
        libc.freeifaddrs(head)
    return found


def _read_ifaddr() -> list[tuple[str, IPInterface]]:
    import ifaddr

    found = []
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            raw = ip.ip[0] if isinstance(ip.ip, tuple) else ip.ip
            try:
                found.append((str(adapter.nice_name), ipaddress.ip_interface(f"{raw.split('%', 1)[0]}/{ip.network_prefix}")))
            except ValueError:
                continue
    return found
