"""The command's process: a gate that waits for the round's start, then supervises the command.

A gate is a process in a session of its own, there before the freeze so that the freeze
waits for no process to start. It blocks on a pipe until the daemon writes the start time,
the command and its environment and closes the pipe; then it sleeps until the start and
starts the command (posix_spawn: a vfork, no copy of the gate) in a process group of its
own. A pipe closed without a start (the round was aborted, the daemon died) ends the gate
with 125 before anything runs.

From then on the gate is the command's whole process tree to the daemon. It is a child
subreaper (PR_SET_CHILD_SUBREAPER): whatever the command starts stays below it, even a
process whose parent exited (`sh -c 'python train.py'` killed, `sleep 300 &` left behind),
so it finds every descendant through /proc and ends the gate only once all are reaped. The
daemon signals the gate, never the command:
- SIGTERM, SIGINT, SIGHUP: passed on to the command's group and every descendant, with a
  SIGCONT so that a stopped one can handle it;
- SIGUSR1 (also the gate's parent-death signal: the daemon died, even with kill -9):
  SIGKILL to all of them, again each time one is reaped, until none is left.
When the command ends by itself, whatever it left behind gets SIGTERM, and SIGKILL after the
grace the daemon sent with the start: its --stop-grace when the command exited 0, its
--abort-grace when it failed (its round is then aborted, and nothing is saved by waiting). The gate then exits as the command did: the same exit
code, or death by the same signal. What still escapes: a process that is not a descendant,
started for the command by another service (`systemd-run`, a container engine, ssh to this
host), and anything left when the gate itself is killed with SIGKILL; a systemd unit ends
what is left in its cgroup with the unit (KillMode=mixed or control-group).

A gate comes one of two ways, and runs the same `run` either way:
- the spare: forked by the `rendezvous` command's process first thing, while it is small and
  has one thread (`fork_spare`), when `join` has a command after `--` (one from a config
  file is known too late), and taken by the first round: no interpreter starts;
- spawned: `python -I -S gate.py ...`, for every later round and wherever no spare exists:
  an interpreter start, about 13 ms of CPU. (Forking the running daemon instead would copy a
  process with gRPC's threads, whose locks a child cannot trust. And Python, not sh: dash
  can neither read from file descriptors above 9 nor sleep until a given time.)

Either way the gate's stderr, which the command inherits, is a pipe the daemon reads
(rendezvous.launch.output: the tail of a failure); with --output-dir its stdout too, which
a spare, forked before the options are read, lacks: the first round then spawns its gate.

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
KILL = _signal.SIGUSR1  # to a gate: SIGKILL to the command's whole tree, now

# The daemon's messages, each a frame: its kind (WARM, START), its length, then its bytes.
# WARM, at most one, before the START, starts the warm interpreter at once
# (rendezvous.launch.prewarm); START, which the daemon sends by closing the pipe, starts the
# command. Each message: start time (seconds since the epoch), the graces of what the command
# leaves behind when it exits 0 and when it fails, and the number of the command's arguments,
# then each argument and each NAME=VALUE of the environment, ended by a NUL.
_HEADER = struct.Struct("!dddI")
_FRAME = struct.Struct("!cI")
WARM, START = b"W", b"S"
# In a WARM message's arguments, what the gate writes in (each item's first occurrence).
RELEASE_FD, STATUS_FD, GATE_PID = "{release}", "{status}", "{gate}"
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NAME, _PR_SET_CHILD_SUBREAPER = 1, 4, 15, 36
_PASSED_ON = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)


def encode(start_at: float, command, env, grace: float = 0.0, failed_grace=None) -> bytes:
    """What the daemon writes to a gate: `command` (str items) to run at `start_at` with
    exactly the environment `env` (names and values free of NUL, names free of '='); what
    the command leaves running when it ends gets `grace` seconds between SIGTERM and SIGKILL
    after an exit 0, `failed_grace` (default: `grace`) after any other end."""
    items = list(command) + [f"{name}={value}" for name, value in env.items()]
    failed = grace if failed_grace is None else failed_grace
    return _HEADER.pack(start_at, grace, failed, len(command)) + b"".join(os.fsencode(i) + b"\0" for i in items)


def frame(kind: bytes, payload: bytes) -> bytes:
    return _FRAME.pack(kind, len(payload)) + payload


def frames(data: bytes):
    """The complete frames in `data` as (kind, payload), and the bytes left over."""
    found = []
    while len(data) >= _FRAME.size:
        kind, size = _FRAME.unpack_from(data)
        if len(data) < _FRAME.size + size:
            break
        found.append((kind, data[_FRAME.size:_FRAME.size + size]))
        data = data[_FRAME.size + size:]
    return found, data


def decode(data: bytes):
    """(start_at, (grace, failed_grace), argv, env) from `encode`'s bytes, or None for
    anything else."""
    if len(data) < _HEADER.size:
        return None
    start_at, grace, failed, count = _HEADER.unpack_from(data)
    items = data[_HEADER.size:].split(b"\0")
    if items.pop() != b"" or not 0 < count <= len(items):
        return None
    env = dict(item.partition(b"=")[::2] for item in items[count:])
    return start_at, (grace, failed), items[:count], env


def descendants(root: int) -> list:
    """Every process below `root`, from the parent of each in /proc (whose per-task
    `children` lists not every kernel has)."""
    below: dict = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    ppid = int(f.read().rpartition(b")")[2].split()[1])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                continue
            below.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        children = below.get(todo.pop(), ())
        found += children
        todo += children
    return found


class _Tree:
    """The command and every process below the gate, as the gate's signal handlers see it."""

    def __init__(self, graces) -> None:
        self.graces = graces  # (after an exit 0, after a failure)
        self.command = 0  # its pid once started, its process group's too
        self.status = None  # its wait status once reaped
        self.killing = False
        self.asked = False  # whether the daemon asked the command to end

    def signal(self, signum: int) -> None:
        # The group first: a process forking right now gets a group's signal in its child too.
        if self.command and self.status is None:  # an unreaped command keeps its group's id ours
            try:
                os.killpg(self.command, signum)
            except OSError:
                pass
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def pass_on(self, signum: int, _frame=None) -> None:
        self.asked = True
        self.signal(signum)
        self.signal(_signal.SIGCONT)  # a stopped process must run to handle it

    def kill(self, _signum=None, _frame=None) -> None:
        self.killing = self.asked = True
        self.signal(_signal.SIGKILL)

    def reap(self) -> None:
        """Wait for every process of the tree, the command first of all or not."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:  # none left: as a subreaper, the tree is gone
                return
            if pid == self.command:
                self.status = status
                if not self.killing and _any_left():  # the command left processes behind
                    self.pass_on(_signal.SIGTERM)
                    grace = self.graces[0] if status == 0 else self.graces[1]
                    _signal.setitimer(_signal.ITIMER_REAL, max(grace, 0.001))
            if self.killing:
                self.kill()  # the ones started between two sweeps


def _any_left() -> bool:
    """Whether this process has a child still running, reaping those that ended."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                return True
        except ChildProcessError:
            return False


def _supervise(libc, daemon: int, graces, argv, env, warm=None) -> None:
    """Start the command under this gate (or release the warm interpreter to run it), wait
    for its whole tree, exit as the command did."""
    tree = _Tree(graces)
    everything = _signal.valid_signals() - {_signal.SIGKILL, _signal.SIGSTOP}
    # Blocked until the command's pid is known, so that a handler never misses it; the
    # command gets an empty mask and the default action of what Python ignores (with
    # SIGPIPE ignored, `yes | head -1` would report a broken pipe instead of ending).
    _signal.pthread_sigmask(_signal.SIG_BLOCK, everything)
    for signum in _PASSED_ON:
        _signal.signal(signum, tree.pass_on)
    _signal.signal(KILL, tree.kill)
    _signal.signal(_signal.SIGALRM, tree.kill)  # what the command left outlived the grace
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1)
    if warm is not None:
        tree.command = warm.pid
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, everything)  # a stop reaches it while it imports
        why = warm.release(argv, env)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, everything)
        if why is not None and tree.asked:  # stopped before it could run the command
            os._exit(ABORTED)
        if why is None:
            warm = None
        else:
            tree.command = 0
    if tree.command == 0:
        if warm is not None:
            os.write(2, f"rendezvous: {why}: starting the command without it\n".encode())
        try:
            tree.command = _spawn(argv, env)
        except OSError as error:
            program, reason = os.fsdecode(argv[0]), error.strerror
            if isinstance(error, FileNotFoundError) and os.sep in program and os.path.exists(program):
                reason = "the interpreter its #! line names (or its ELF loader) was not found"
            os.write(2, f"rendezvous: cannot run {program!r}: {reason}\n".encode())
            os._exit(127 if isinstance(error, FileNotFoundError) else 126)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, everything)
    if os.getppid() != daemon:  # the daemon died before the parent-death signal could tell
        tree.kill()
    tree.reap()
    _signal.setitimer(_signal.ITIMER_REAL, 0)
    assert tree.status is not None  # reap() returns once the command is reaped
    code = os.waitstatus_to_exitcode(tree.status)
    if code < 0:  # die of the command's signal, as the command did, but dump no core
        libc.prctl(_PR_SET_DUMPABLE, 0)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, everything)
        if -code != _signal.SIGKILL:
            _signal.signal(-code, _signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {-code})
        code = 128 - code  # a signal that does not kill (never a command's death)
    os._exit(code)


def _spawn(argv, env, **fds) -> int:
    """A process of the command's kind: a group of its own, an empty signal mask, the
    default action of what Python ignores."""
    defaults = [getattr(_signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(_signal, n)]
    return os.posix_spawnp(argv[0], argv, env, setpgroup=0, setsigmask=(), setsigdef=defaults)


class _Warm:
    """The warm interpreter (rendezvous.launch.prewarm): its pid, the pipe it reads the
    release from, the pipe it says on whether its imports went well."""

    def __init__(self, argv, env) -> None:
        release_read, self.release_fd = os.pipe()
        self.status_fd, status_write = os.pipe()
        os.set_inheritable(release_read, True)
        os.set_inheritable(status_write, True)
        given = {RELEASE_FD.encode(): release_read, STATUS_FD.encode(): status_write, GATE_PID.encode(): os.getpid()}
        argv = list(argv)
        for i, item in enumerate(argv):
            if item in given:
                argv[i] = str(given.pop(item)).encode()
        self.pid = 0
        self.why = None
        try:
            self.pid = _spawn(argv, env)
        except OSError as error:
            self.why = f"the warm interpreter {os.fsdecode(argv[0])!r} did not start: {error.strerror}"
        finally:
            os.close(release_read)
            os.close(status_write)

    def _ready(self):
        """None once the interpreter imported its modules, else why it cannot run the command."""
        said = chunk = os.read(self.status_fd, 4096)
        while chunk and not said.endswith(b"\n"):
            chunk = os.read(self.status_fd, 4096)
            said += chunk
        os.close(self.status_fd)
        if said == b"ok\n":
            return None
        if said.startswith(b"error "):
            return "the warm interpreter " + said[6:].decode(errors="replace").strip()
        return "the warm interpreter ended before its release"

    def release(self, argv, env):
        """Send it the command and its environment: None, or why it cannot run the command
        (then it is ended and reaped)."""
        why = self.why or self._ready()
        if why is None and self.pid and os.waitpid(self.pid, os.WNOHANG)[0]:  # ended after its imports
            self.pid = 0  # reaped
            why = "the warm interpreter ended before its release"
        if why is None:  # the message rendezvous/launch/_warm.py reads
            items = [os.getcwdb(), str(len(argv)).encode(), *argv, *(k + b"=" + v for k, v in env.items())]
            data = memoryview(b"".join(item + b"\0" for item in items))
            try:
                while data:
                    data = data[os.write(self.release_fd, data):]
            except BrokenPipeError:
                pass  # it ended right after its imports: its exit status tells
        os.close(self.release_fd)
        if why is not None:
            self.end()
        return why

    def end(self) -> None:
        if self.pid:
            try:
                os.killpg(self.pid, _signal.SIGKILL)
            except OSError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = 0


def run(ready: int, gate: int, daemon: int):
    """The gate, in its own process: never returns."""
    import ctypes  # a spare finds it imported already

    # Hear of the daemon's death, even by kill -9, and take the command's tree along instead
    # of leaving an orphan that holds the TF port and the GPU. Until the command starts the
    # signal's default action ends the gate; the daemon's pid is checked after setting it,
    # in case the daemon died in between.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, KILL)
    libc.prctl(_PR_SET_NAME, b"rendezvous-gate")  # what ps -e and top call it
    if os.getppid() != daemon:
        os._exit(ABORTED)
    os.close(ready)  # the daemon sees EOF: this gate is up and waiting
    os.set_inheritable(gate, False)  # not the warm interpreter's
    warm = start = None
    pending = chunk = os.read(gate, 65536)
    while chunk:  # until the daemon closes the pipe: a long environment fits too
        found, pending = frames(pending)
        for kind, payload in found:
            message = decode(payload)
            if kind == WARM and warm is None and start is None and message is not None:
                warm = _Warm(message[2], message[3])
            elif kind == START:
                start = message
        chunk = os.read(gate, 65536)
        pending += chunk
    os.close(gate)
    if start is None or pending:
        if warm is not None:
            warm.end()
        os._exit(ABORTED)
    start_at, graces, argv, env = start
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    _supervise(libc, daemon, graces, argv, env, warm)


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
            run(ready_write, gate_read, daemon)
        except BaseException as error:
            os.write(2, f"rendezvous: the command's gate failed: {error!r}\n".encode())
        finally:
            os._exit(ABORTED)
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


if __name__ == "__main__":  # a spawned gate: ready and gate pipes, the daemon's pid
    run(*(int(arg) for arg in sys.argv[1:4]))
