"""Starting and stopping the command: its own process group, its environment, its exit code."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import struct
import sys
import time
from typing import Mapping, Optional, Sequence

from .errors import LaunchError
from .notify import NOTIFY_VARIABLES

log = logging.getLogger(__name__)


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: death by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


# Runs in the command's own process, started when a round begins. It blocks on the gate
# pipe until the daemon writes the start time (seconds since the epoch, a double) and the
# round's variables (NAME=VALUE, each ended by a NUL) and closes it; then it sets them,
# sleeps until the start and execs the command. So the freeze waits for no interpreter to
# start, and at the common start time every node does nothing but one exec: no fork, no
# daemon wake-up. A gate closed without a start time (the round was aborted) exits 125
# without running anything. (Python, not sh: dash cannot read from file descriptors above
# 9, nor sleep until a given time.)
_GATE = (
    # Not `signal`: it imports enum, which would double the time this takes to start.
    # SIGKILL's number comes from the daemon.
    "import ctypes, os, struct, sys, time\n"
    # Die with the daemon, even killed with -9, instead of training on as an orphan that
    # holds the TF port and the GPU. Kept across exec; the daemon's pid is checked after
    # setting it, in case the daemon died in between.
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[4]))\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[3]): sys.exit(125)\n"
    "ready, gate = int(sys.argv[1]), int(sys.argv[2])\n"
    "os.close(ready)\n"  # the daemon sees EOF: this process is up and waiting
    "data = chunk = os.read(gate, 65536)\n"
    "while chunk:\n"
    "    chunk = os.read(gate, 65536)\n"
    "    data += chunk\n"
    "os.close(gate)\n"
    "if len(data) < 8: sys.exit(125)\n"
    "for item in data[8:].split(b'\\0')[:-1]:\n"
    "    name, _, value = item.partition(b'=')\n"
    "    os.environb[name] = value\n"
    "delay = struct.unpack('!d', data[:8])[0] - time.time()\n"
    "if delay > 0: time.sleep(delay)\n"
    "try:\n"
    "    os.execvp(sys.argv[5], sys.argv[5:])\n"
    "except OSError as error:\n"
    "    print(f'rendezvous: cannot run {sys.argv[5]!r}: {error.strerror}', file=sys.stderr)\n"
    "    os._exit(127 if isinstance(error, FileNotFoundError) else 126)\n"
)


def encode_variables(env: Mapping[str, str]) -> bytes:
    """What the gate reads after the start time: each variable as NAME=VALUE and a NUL."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise LaunchError(f"cannot pass the environment variable {name!r}={value!r} to the command")
    return b"".join(f"{name}={value}".encode() + b"\0" for name, value in env.items())


async def _until_closed(fd: int) -> None:
    """Wait until every writer of the pipe `fd` has closed it; then close `fd`."""
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    loop.add_reader(fd, lambda: closed.done() or closed.set_result(None))
    try:
        await closed
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def check_command(command: Sequence[str]) -> str:
    """Fail before the rendezvous, not after it, when the command cannot run."""
    program = command[0]
    if os.sep in program:
        path = program
        if os.path.isdir(path):
            raise LaunchError(f"command is a directory: {program!r}")
        if not os.path.isfile(path):
            raise LaunchError(f"command not found: {program!r}")
    else:
        found = shutil.which(program)
        if found is None:
            raise LaunchError(f"command not found in PATH: {program!r}")
        path = found
    if not os.access(path, os.X_OK):
        raise LaunchError(f"command is not executable: {program!r}")
    return path


class Launcher:
    """Runs one command in a process group of its own, with output passed through.

    `prepare` starts the command's process as a gate that waits, when a round begins;
    `arm` gives it the round's environment once the membership is frozen; `fire` lets it
    exec the command. `stop` handles a waiting and a running command alike.
    """

    def __init__(self) -> None:
        self._process: Optional[asyncio.subprocess.Process] = None
        self._up: Optional[asyncio.Future] = None  # done once the gate waits
        self._gate: Optional[int] = None
        self._command: tuple[str, ...] = ()
        self._variables = b""  # the round's, encoded for the gate by `arm`
        self.started_at: Optional[float] = None  # time.monotonic() when the command started
        self.finished_at: Optional[float] = None

    @property
    def pid(self) -> Optional[int]:
        return self._process.pid if self._process and self.started_at is not None else None

    def uptime(self, now: float) -> Optional[float]:
        """Seconds the command has run by `now` (time.monotonic()), or ran until it ended."""
        if self.started_at is None:
            return None
        return max(0.0, (self.finished_at or now) - self.started_at)

    async def prepare(self, command: Sequence[str]) -> None:
        """Start the gate that will exec `command`, with this daemon's environment: an
        interpreter start (about 20 ms of CPU) that the freeze then need not wait for."""
        if self._process is not None:
            return
        check_command(command)
        # systemd's notify socket is the daemon's (NotifyAccess=main): not the command's.
        inherited = {k: v for k, v in os.environ.items() if k not in NOTIFY_VARIABLES}
        ready_read, ready_write = os.pipe()
        gate_read, gate_write = os.pipe()
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-I", "-S", "-c", _GATE, str(ready_write), str(gate_read), str(os.getpid()),
                str(int(signal.SIGKILL)), *command,
                # a session of its own is also a process group of its own (process_group=0: 3.11+)
                env=inherited, pass_fds=(ready_write, gate_read), start_new_session=True,
            )
        except BaseException:
            os.close(gate_write)
            os.close(ready_read)
            raise
        finally:
            os.close(gate_read)
            os.close(ready_write)
        self._gate = gate_write
        self._command = tuple(command)
        self._up = asyncio.ensure_future(_until_closed(ready_read))

    async def arm(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        """The round's variables for the command (started now if `prepare` was not called);
        returns once its gate waits, so that `fire` only has to write to it."""
        variables = encode_variables(env)  # refuse what cannot be passed now, not at the start
        await self.prepare(command)
        assert self._up is not None
        await asyncio.shield(self._up)
        self._variables = variables

    def fire(self, start_at: float) -> None:
        """Let the armed command start at `start_at` (seconds since the epoch)."""
        assert self._process is not None and self._gate is not None, "fire() before arm()"
        data = memoryview(struct.pack("!d", start_at) + self._variables)
        try:
            while data:  # the gate reads until the pipe is closed: a long environment fits too
                data = data[os.write(self._gate, data):]
        except BrokenPipeError:
            pass  # the gate is gone; `wait` tells its exit code
        self._close_gate()
        self.started_at = time.monotonic() + max(0.0, start_at - time.time())
        log.info("starting %s (pid %d)", " ".join(self._command), self._process.pid)

    def _close_gate(self) -> None:
        if self._gate is not None:
            os.close(self._gate)
            self._gate = None

    async def wait(self) -> int:
        assert self._process is not None
        code = exit_code_of(await self._process.wait())
        if self.finished_at is None:
            self.finished_at = time.monotonic()
        self._signal_group(signal.SIGTERM)  # leftovers of the command's own children
        return code

    async def stop(self, grace: float) -> int:
        """SIGTERM to the whole group, SIGKILL after `grace` seconds; returns the exit code."""
        if self._process is None:
            return 0
        if self.started_at is None:
            self._close_gate()  # disarm: the waiting gate exits without running anything
            code = await self.wait()
            if self._up is not None:
                self._up.cancel()
            return code
        if self._process.returncode is None:
            log.info("stopping the command (SIGTERM, SIGKILL after %gs)", grace)
            self._signal_group(signal.SIGTERM)
            self._signal_group(signal.SIGCONT)  # a stopped command must run to handle it
            try:
                await asyncio.wait_for(asyncio.shield(self._process.wait()), grace)
            except asyncio.TimeoutError:
                log.warning("the command ignored SIGTERM for %gs: SIGKILL", grace)
                self.kill()
        return await self.wait()

    def stopped_since(self, since: Optional[float], now: float) -> Optional[float]:
        """Since when the running command has been stopped (SIGSTOP, state T in /proc):
        `since` if it still is, `now` if it just became so, None if it runs."""
        if self._process is None or self.started_at is None or self._process.returncode is not None:
            return None
        try:
            with open(f"/proc/{self._process.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return None
        if state not in (b"T", b"t"):
            return None
        return now if since is None else since

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, signum: int) -> None:
        if self._process is None:
            return
        try:
            os.killpg(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
