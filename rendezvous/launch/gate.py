"""The command's process until the round starts: a gate that waits, then becomes the command.

A gate is a process in a session of its own (so a process group of its own), there before
the freeze so that the freeze waits for no process to start. It blocks on a pipe until the
daemon writes the start time, the command and its environment and closes the pipe; then it
sleeps until the start and execs the command. At the common start time every node does
nothing but one exec: no fork, no daemon wake-up. A pipe closed without a start (the round
was aborted, the daemon died) ends the gate with 125 before anything runs.

A gate comes one of two ways, and runs the same `run` either way:
- the spare: forked by the `rendezvous` command's process first thing, while it is small and
  has one thread (`fork_spare`), when `join` has a command after `--` (one from a config
  file is known too late), and taken by the first round: no interpreter starts;
- spawned: `python -I -S gate.py ...`, for every later round and wherever no spare exists:
  an interpreter start, about 13 ms of CPU. (Forking the running daemon instead would copy a
  process with gRPC's threads, whose locks a child cannot trust. And Python, not sh: dash
  can neither read from file descriptors above 9 nor sleep until a given time.)

So that a spawned gate starts fast, this module imports nothing but a few of the standard
library's modules, and none of the package's.
"""

from __future__ import annotations

import _signal  # not `signal`: it imports enum, which would double a spawned gate's start
import os
import struct
import sys
import time

ABORTED = 125  # the gate's exit code when the round was called off before its start

# The message: start time (seconds since the epoch) and the number of the command's
# arguments, then each argument and each NAME=VALUE of the environment, ended by a NUL.
_HEADER = struct.Struct("!dI")
_PR_SET_NAME, _PR_SET_PDEATHSIG = 15, 1


def encode(start_at: float, command, env) -> bytes:
    """What the daemon writes to a gate: `command` (str items) to run at `start_at` with
    exactly the environment `env` (names and values free of NUL, names free of '=')."""
    items = list(command) + [f"{name}={value}" for name, value in env.items()]
    return _HEADER.pack(start_at, len(command)) + b"".join(os.fsencode(i) + b"\0" for i in items)


def decode(data: bytes):
    """(start_at, argv, env) from `encode`'s bytes, or None for anything else."""
    if len(data) < _HEADER.size:
        return None
    start_at, count = _HEADER.unpack_from(data)
    items = data[_HEADER.size:].split(b"\0")
    if items.pop() != b"" or not 0 < count <= len(items):
        return None
    env = dict(item.partition(b"=")[::2] for item in items[count:])
    return start_at, items[:count], env


def run(ready: int, gate: int, daemon: int):
    """The gate, in its own process: never returns."""
    import ctypes  # a spare finds it imported already

    # Die with the daemon, even killed with -9, instead of training on as an orphan that
    # holds the TF port and the GPU. Kept across exec; the daemon's pid is checked after
    # setting it, in case the daemon died in between.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, _signal.SIGKILL)
    libc.prctl(_PR_SET_NAME, b"rendezvous-gate")  # what ps -e and top call it until the exec
    if os.getppid() != daemon:
        os._exit(ABORTED)
    os.close(ready)  # the daemon sees EOF: this gate is up and waiting
    data = chunk = os.read(gate, 65536)
    while chunk:  # until the daemon closes the pipe: a long environment fits too
        chunk = os.read(gate, 65536)
        data += chunk
    os.close(gate)
    message = decode(data)
    if message is None:
        os._exit(ABORTED)
    start_at, argv, env = message
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    # What Python ignores for itself, the command gets back as every program expects it:
    # with SIGPIPE ignored, `yes | head -1` would report a broken pipe instead of ending.
    for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as error:
        program, reason = os.fsdecode(argv[0]), error.strerror
        if isinstance(error, FileNotFoundError) and os.sep in program and os.path.exists(program):
            reason = "the interpreter its #! line names (or its ELF loader) was not found"
        os.write(2, f"rendezvous: cannot run {program!r}: {reason}\n".encode())
        os._exit(127 if isinstance(error, FileNotFoundError) else 126)


def _close_all_but(*keep: int) -> None:
    """Close every descriptor but `keep`, as subprocess does for a spawned gate: none that this
    process inherited reaches the command."""
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
    ends, the read end of its ready pipe and the write end of its gate pipe."""

    def __init__(self, pid: int, pidfd: int, ready: int, gate: int) -> None:
        self.pid, self.pidfd, self.ready, self.gate = pid, pidfd, ready, gate


_spare = None


def fork_spare():
    """Fork the first round's gate now, and return its pid: call it while the process has a
    single thread.

    Without pidfds (Linux before 5.3) there is no spare (None): the daemon could not wait
    for a child that asyncio did not start, and every round spawns its gate."""
    global _spare
    if _spare is not None or not hasattr(os, "pidfd_open"):
        return None
    import ctypes  # noqa: F401  for the child's prctl; the daemon imports it anyway (interfaces)

    ready_read, ready_write = os.pipe()
    gate_read, gate_write = os.pipe()
    daemon = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            _close_all_but(0, 1, 2, ready_write, gate_read)
            os.setsid()
            run(ready_write, gate_read, daemon)
        except BaseException as error:
            os.write(2, f"rendezvous: the command's gate failed: {error!r}\n".encode())
        finally:
            os._exit(ABORTED)
    os.close(ready_write)
    os.close(gate_read)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        os.close(gate_write)  # the gate sees EOF and ends
        os.close(ready_read)
        os.waitpid(pid, 0)
        return None
    _spare = Spare(pid, pidfd, ready_read, gate_write)
    return pid


def take_spare():
    """The spare gate (once), or None."""
    global _spare
    spare, _spare = _spare, None
    return spare


if __name__ == "__main__":  # a spawned gate: ready and gate pipes, the daemon's pid
    run(*(int(arg) for arg in sys.argv[1:4]))
