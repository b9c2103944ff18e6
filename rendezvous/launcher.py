"""Starting and stopping the command: its own process group, its environment, its exit code."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from typing import Mapping, Optional, Sequence

from .errors import ConfigError, LaunchError

log = logging.getLogger(__name__)


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: death by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class PortReservation:
    """Holds the TF worker port until the command starts, so nothing else takes it.

    TensorFlow's gRPC server listens on every interface whatever TF_CONFIG says, so the
    port is checked free on the wildcard address, not only on the advertised one.
    """

    def __init__(self, port: int = 0, ipv6: bool = False) -> None:
        family = socket.AF_INET6 if ipv6 else socket.AF_INET
        self._socket: Optional[socket.socket] = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._socket.bind(("::" if ipv6 else "0.0.0.0", port))
        except OSError as exc:
            self._socket.close()
            raise ConfigError(f"--tf-port {port} is not free on this machine: {exc.strerror}") from None
        self.port: int = self._socket.getsockname()[1]

    def release(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


class Launcher:
    """Runs one command in a process group of its own, with output passed through."""

    def __init__(self) -> None:
        self._process: Optional[asyncio.subprocess.Process] = None
        self.started_at: Optional[float] = None

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process else None

    async def start(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        try:
            self._process = await asyncio.create_subprocess_exec(
                *command, env={**os.environ, **env}, process_group=0
            )
        except FileNotFoundError:
            raise LaunchError(f"command not found: {command[0]!r}") from None
        except PermissionError:
            raise LaunchError(f"command is not executable: {command[0]!r}") from None
        self.started_at = time.monotonic()
        log.info("started %s (pid %d)", " ".join(command), self._process.pid)

    async def wait(self) -> int:
        assert self._process is not None
        code = exit_code_of(await self._process.wait())
        self._signal_group(signal.SIGTERM)  # leftovers of the command's own children
        return code

    async def stop(self, grace: float) -> int:
        """SIGTERM to the whole group, SIGKILL after `grace` seconds; returns the exit code."""
        if self._process is None:
            return 0
        if self._process.returncode is None:
            log.info("stopping the command (SIGTERM, SIGKILL after %gs)", grace)
            self._signal_group(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(self._process.wait()), grace)
            except asyncio.TimeoutError:
                log.warning("the command ignored SIGTERM for %gs: SIGKILL", grace)
                self.kill()
        return await self.wait()

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
