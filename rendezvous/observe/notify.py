"""systemd's notify protocol (sd_notify(3)) in a few lines: READY=1, STATUS=..., WATCHDOG=1
and STOPPING=1 as datagrams to the AF_UNIX socket named by $NOTIFY_SOCKET. Without
NOTIFY_SOCKET (not run by systemd as Type=notify) nothing is sent.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Mapping, Optional

from ..core.status import NodeStatus, status_line
from .report import Reporter

log = logging.getLogger(__name__)



def notify_message(**fields: str) -> bytes:
    """`notify_message(READY="1", STATUS="x")` -> b"READY=1\\nSTATUS=x". The protocol is one
    assignment per line, so a newline inside a value would start a bogus assignment."""
    lines = [f"{key}={' '.join(str(value).splitlines())}" for key, value in fields.items()]
    return "\n".join(lines).encode("utf-8", "replace")


def socket_address(value: str) -> Optional[str]:
    """The address to send to: a path, or `@name` for an abstract socket. None for the
    forms this module does not speak (vsock:...)."""
    if value.startswith("@"):
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    return None


def watchdog_interval(usec: Optional[str], pid: Optional[str], my_pid: int) -> Optional[float]:
    """Seconds between WATCHDOG=1 pings: half of WATCHDOG_USEC, as sd_watchdog_enabled(3)
    advises. None when there is no watchdog, or it watches another process (WATCHDOG_PID)."""
    if not usec:
        return None
    if pid and pid.strip() != str(my_pid):
        return None
    try:
        timeout = int(usec)
    except ValueError:
        return None
    return timeout / 2e6 if timeout > 0 else None


class SystemdNotifier(Reporter):
    """Reports a node's life to systemd: READY once it listens, its phase as STATUS, watchdog
    pings from a task on the node's loop (so a stuck loop stops them), STOPPING at shutdown."""

    def __init__(self, address: str, watchdog: Optional[float] = None) -> None:
        self.address = address
        self.watchdog = watchdog
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self._socket.setblocking(False)
        self._last_status: Optional[str] = None
        self._pinger: Optional[asyncio.Task] = None
        self._warned = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], pid: int) -> Optional["SystemdNotifier"]:
        value = environ.get("NOTIFY_SOCKET")
        if not value:
            return None
        address = socket_address(value)
        if address is None:
            log.warning("NOTIFY_SOCKET=%r is not a socket path or @abstract name: not notifying systemd", value)
            return None
        interval = watchdog_interval(environ.get("WATCHDOG_USEC"), environ.get("WATCHDOG_PID"), pid)
        return cls(address, interval)

    def send(self, **fields: str) -> bool:
        """Send one message; a failure is logged once, never raised: systemd may be gone."""
        try:
            self._socket.sendto(notify_message(**fields), self.address)
            return True
        except OSError as exc:
            if not self._warned:
                self._warned = True
                log.warning("cannot notify systemd at %r: %s", self.address.replace("\0", "@"), exc)
            return False

    def ready(self) -> None:
        self.send(READY="1")
        if self.watchdog is not None and self._pinger is None:
            self._pinger = asyncio.get_running_loop().create_task(self._ping(self.watchdog), name="watchdog")

    def update(self, status: NodeStatus) -> None:
        line = status_line(status)
        if line != self._last_status:
            self._last_status = line
            self.send(STATUS=line)

    def stopping(self) -> None:
        if self._last_status and ", finished" in self._last_status:
            self.send(STOPPING="1")  # keep the exit code in view
        else:
            self.send(STOPPING="1", STATUS="stopping")

    async def _ping(self, interval: float) -> None:
        while True:
            self.send(WATCHDOG="1")
            await asyncio.sleep(interval)

    def close(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            self._pinger = None
        self._socket.close()
