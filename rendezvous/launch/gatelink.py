"""The daemon's side of a gate's two pipes (rendezvous.launch.gate has the gate's, and the
frames both speak): what the daemon writes to the gate (the warm interpreter, the start,
the beats while the command runs) and what the gate reports back (up, and how the command
started)."""

from __future__ import annotations

import asyncio
import os
from typing import Optional

from . import gate
from ..core.record import record
from ..core.round import heartbeat_interval


def encode(start_at: float, command, env, grace: float = 0.0, failed_grace=None, liveness: float = 0.0) -> bytes:
    """A WARM or START message: `command` (str items) to run at `start_at` with exactly the
    environment `env` (names and values free of NUL, names free of '='); what the command
    leaves running when it ends gets `grace` seconds between SIGTERM and SIGKILL after an
    exit 0, `failed_grace` (default: `grace`) after any other end. With `liveness`, the
    daemon beats while the command runs; not heard for that long, it counts as dead."""
    items = list(command) + [f"{name}={value}" for name, value in env.items()]
    failed = grace if failed_grace is None else failed_grace
    header = gate.HEADER.pack(start_at, grace, failed, liveness, len(command))
    return header + b"".join(os.fsencode(i) + b"\0" for i in items)


@record
class Started:
    """How a gate started its command: `pid`, whether in the `warm` interpreter, and if not
    `why` not (empty: there was none)."""

    pid: int
    warm: bool
    why: str


def decode_started(payload: bytes) -> Optional[Started]:
    if len(payload) < gate.PID.size:
        return None
    kind, _, why = payload[gate.PID.size:].partition(b"\0")
    return Started(gate.PID.unpack_from(payload)[0], kind == b"warm", why.decode(errors="replace"))


class GateLink:
    """The write end of a gate's pipe and the read end of its ready pipe. `up` is done once
    the gate waits (or ended before), `started` once it started the command (None: it ended
    without)."""

    def __init__(self, to_gate: int, from_gate: int) -> None:
        loop = asyncio.get_running_loop()
        self._to_gate: Optional[int] = to_gate
        self._from_gate: Optional[int] = from_gate
        self._pending = b""
        self.up: asyncio.Future = loop.create_future()
        self.started: asyncio.Future = loop.create_future()
        self._beats: Optional[asyncio.TimerHandle] = None
        loop.add_reader(from_gate, self._read)

    def _read(self) -> None:
        assert self._from_gate is not None
        chunk = os.read(self._from_gate, 4096)
        found, self._pending = gate.frames(self._pending + chunk)
        for kind, payload in found:
            if kind == gate.UP and not self.up.done():
                self.up.set_result(None)
            elif kind == gate.STARTED and not self.started.done():
                self.started.set_result(decode_started(payload))
        if not chunk:  # the gate ended, or has nothing more to say
            self._close_reports()

    def _close_reports(self) -> None:
        for future in (self.up, self.started):
            if not future.done():
                future.set_result(None)
        if self._from_gate is not None:
            asyncio.get_running_loop().remove_reader(self._from_gate)
            os.close(self._from_gate)
            self._from_gate = None

    def send(self, kind: bytes, payload: bytes = b"") -> None:
        """One frame to the gate (it reads all the time: a long environment fits too)."""
        if self._to_gate is None:
            return
        view = memoryview(gate.frame(kind, payload))
        try:
            while view:
                view = view[os.write(self._to_gate, view):]
        except BrokenPipeError:
            pass  # the gate is gone; the launcher's `wait` tells its exit code
        except BlockingIOError:
            pass  # a beat to a gate that does not read (stopped): the next one will do

    def start(self, message: bytes, liveness: float) -> None:
        """The START; then, with `liveness`, a beat every fifth of it while this loop runs:
        a daemon that stops (SIGSTOP) or hangs stops beating, and its gate ends the command."""
        self.send(gate.START, message)
        if liveness > 0 and self._to_gate is not None:
            os.set_blocking(self._to_gate, False)
            self._beat(heartbeat_interval(liveness))
        else:
            self.close_gate()

    def _beat(self, every: float) -> None:
        self.send(gate.BEAT)
        self._beats = asyncio.get_running_loop().call_later(every, self._beat, every)

    def close_gate(self) -> None:
        """Close the gate's pipe: before the start, the gate then ends without running anything;
        after it, it stops hearing beats."""
        if self._beats is not None:
            self._beats.cancel()
            self._beats = None
        if self._to_gate is not None:
            os.close(self._to_gate)
            self._to_gate = None

    def close(self) -> None:
        self.close_gate()
        self._close_reports()
