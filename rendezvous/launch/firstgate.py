"""The first round's gate, forked by the `rendezvous` command's process first thing, while it
is small and has one thread (rendezvous.launch.gate says why), and passed to the first round's
launcher (rendezvous.cli.startup -> cli.main -> run_node -> Launcher(spare=...))."""

from __future__ import annotations

import os
from typing import Iterable

from . import gate


def _close_all_but(*keep: int) -> None:
    """Close every descriptor but `keep`, as subprocess does for a spawned gate: none that this
    process inherited reaches the command."""
    fds: Iterable[int]
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every one there can be (in a child that waits, not the daemon)
        fds = range(os.sysconf("SC_OPEN_MAX"))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:  # not open (the listed directory's own, closed already)
                pass


class Spare:
    """A forked gate, waiting to be taken: its pid, a pidfd that becomes readable when it
    ends, the read end of its ready pipe, the write end of its gate pipe and the read end
    of the pipe that is its (and its command's) stderr."""

    def __init__(self, pid: int, pidfd: int, ready: int, gate: int, stderr: int) -> None:
        self.pid, self.pidfd, self.ready, self.gate, self.stderr = pid, pidfd, ready, gate, stderr


def fork_spare():
    """Fork the first round's gate now, and return it, for the first round's launcher: call
    it while the process has a single thread.

    Without pidfds (Linux before 5.3) there is no spare (None): the daemon could not wait
    for a child that asyncio did not start, and every round spawns its gate."""
    if not hasattr(os, "pidfd_open"):
        return None
    import ctypes  # noqa: F401  for the child's prctl; the daemon imports it anyway (interfaces)

    ready_read, ready_write = os.pipe()
    gate_read, gate_write = os.pipe()
    stderr_read, stderr_write = os.pipe()  # the command's stderr, read by the daemon (launch/output.py)
    daemon = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(stderr_write, 2)
            _close_all_but(0, 1, 2, ready_write, gate_read)
            os.setsid()
            gate.run(ready_write, gate_read, daemon)
        except BaseException as error:
            os.write(2, f"rendezvous: the command's gate failed: {error!r}\n".encode())
        finally:
            os._exit(gate.ABORTED)
    os.close(ready_write)
    os.close(gate_read)
    os.close(stderr_write)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        os.close(gate_write)  # the gate sees EOF and ends
        os.close(ready_read)
        os.close(stderr_read)
        os.waitpid(pid, 0)
        return None
    return Spare(pid, pidfd, ready_read, gate_write, stderr_read)
