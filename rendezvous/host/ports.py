"""Ports this node listens on: the gRPC server's, checked before gRPC binds it, and the
TensorFlow worker's, held until the command starts."""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from typing import Optional

from ..errors import AddressError

log = logging.getLogger(__name__)

# How long the next round waits for its TF port: the last round's whole process tree is
# gone by then, so only a socket closing in the kernel, or another program, holds it.
REBIND_WAIT = 3.0
REBIND_INTERVAL = 0.05


def _bind(host: str, port: int, family: socket.AddressFamily) -> socket.socket:
    """A TCP socket bound to host:port. A fixed port gets SO_REUSEADDR, as gRPC's and
    TensorFlow's listeners set it: a port held only by connections in TIME_WAIT (the
    previous run's) counts as free, one some process listens on does not. Port 0 does
    not: two sockets could then be handed the same port. The IPv6 wildcard takes IPv4
    too (IPV6_V6ONLY off, whatever the system's default)."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if host == "::":
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        if port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def check_port_free(host: str, port: int) -> None:
    """Raise OSError if host:port cannot be bound, found with a plain socket before gRPC
    tries: gRPC would also print a native error line of its own to stderr."""
    if port == 0:
        return
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return  # not numeric: left to gRPC
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        _bind(str(address), port, family).close()
    except OSError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


class PortReservation:
    """Holds the TF worker port until the command starts, so nothing else takes it.

    TensorFlow's gRPC server listens on every interface whatever TF_CONFIG says, so the
    port is checked free on the wildcard address, not only on the advertised one. With
    `ipv6` that is the IPv6 wildcard, which also holds the port for IPv4 (a dual-stack
    node may be told to use either family).
    """

    def __init__(self, port: int = 0, ipv6: bool = False) -> None:
        family = socket.AF_INET6 if ipv6 else socket.AF_INET
        try:
            self._socket: Optional[socket.socket] = _bind("::" if ipv6 else "0.0.0.0", port, family)
        except OSError as exc:
            raise AddressError(f"--tf-port {port} is not free on this machine: {exc.strerror}") from None
        self.port: int = self._socket.getsockname()[1]

    def release(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def reserve_again(port: int, ipv6: bool = False, wait: float = REBIND_WAIT) -> PortReservation:
    """Hold `port` again for the next round, waiting up to `wait` seconds while something
    still listens on it; AddressError if it is still busy then."""
    deadline = time.monotonic() + wait
    said = False
    while True:
        try:
            return PortReservation(port, ipv6=ipv6)
        except AddressError:
            if time.monotonic() >= deadline:
                raise
            if not said:
                said = True
                log.info("TF port %d is still busy: waiting up to %gs for it", port, wait)
        time.sleep(REBIND_INTERVAL)
