"""The command's process: a gate that waits for the round's start, then supervises the command.

A gate is a process in a session of its own, there before the freeze so that the freeze
waits for no process to start. It blocks on a pipe until the daemon writes the start time,
the command and its environment; then it sleeps until the start and starts the command
(posix_spawn: a vfork, no copy of the gate) in a process group of its own, and hears the
daemon beat on that pipe while the command runs. A pipe closed without a start (the round
was aborted, the daemon died) ends the gate with 125 before anything runs.

From then on the gate is the command's whole process tree to the daemon. It is a child
subreaper (PR_SET_CHILD_SUBREAPER): whatever the command starts stays below it, even a
process whose parent exited (`sh -c 'python train.py'` killed, `sleep 300 &` left behind),
so it finds every descendant through /proc and ends the gate only once all are reaped. The
daemon signals the gate, never the command:
- SIGTERM, SIGINT, SIGHUP: passed on to the command's group and every descendant, with a
  SIGCONT so that a stopped one can handle it;
- SIGUSR1 (also the gate's parent-death signal: the daemon died, even with kill -9; and
  what the gate sends itself when the daemon stopped beating for the round's liveness
  timeout): SIGKILL to all of them, again each time one is reaped, until none is left.
When the command ends by itself, whatever it left behind gets SIGTERM, and SIGKILL after the
grace the daemon sent with the start: its --stop-grace when the command exited 0, its
--abort-grace when it failed (its round is then aborted, and nothing is saved by waiting).
The gate then exits as the command did: the same exit code, or death by the same signal. What still escapes: a process that is not a descendant,
started for the command by another service (`systemd-run`, a container engine, ssh to this
host), and anything left when the gate itself is killed with SIGKILL; a systemd unit ends
what is left in its cgroup with the unit (KillMode=mixed or control-group).

A gate comes one of two ways, and runs the same `run` either way: forked by the `rendezvous`
command's process first thing (rendezvous.launch.firstgate), or spawned, `python -I -S
gate.py ...`, for every later round and wherever no fork exists: an interpreter start,
about 13 ms of CPU.

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

# Both ways the gate and the daemon speak in frames: a kind, a length, then that many bytes.
# The daemon's, on the gate pipe:
# - WARM, at most one, before the START: start the warm interpreter at once
#   (rendezvous.launch.prewarm); FOREGROUND: the round waits for it (a spare imports at the
#   lowest priority until then, or until the release);
# - START: the command. WARM and START carry a message: start time (seconds since the
#   epoch), the graces of what the command leaves behind when it exits 0 and when it fails, the
#   round's liveness timeout, the number of the command's arguments, then each argument and
#   each NAME=VALUE of the environment, ended by a NUL;
# - BEAT, empty, every fifth of the liveness timeout once the command runs: a daemon not
#   heard for the liveness timeout (stopped, hung) has its command ended as if it had died.
# The gate's, on the ready pipe: UP once it waits, then STARTED once the command runs: its
# pid, then b"warm", or b"plain" and why the warm interpreter was not used. (The daemon's
# side: rendezvous.launch.gatelink.)
HEADER = struct.Struct("!ddddI")
_FRAME = struct.Struct("!cI")
PID = struct.Struct("!I")
WARM, FOREGROUND, START, BEAT = b"W", b"F", b"S", b"B"
UP, STARTED = b"U", b"R"
# In a WARM message's arguments, what the gate writes in (each item's first occurrence).
RELEASE_FD, STATUS_FD, GATE_PID = "{release}", "{status}", "{gate}"
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NAME, _PR_SET_CHILD_SUBREAPER = 1, 4, 15, 36
_PASSED_ON = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)


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
    """(start_at, (grace, failed_grace), argv, env, liveness) from `encode`'s bytes, or None
    for anything else."""
    if len(data) < HEADER.size:
        return None
    start_at, grace, failed, liveness, count = HEADER.unpack_from(data)
    items = data[HEADER.size:].split(b"\0")
    if items.pop() != b"" or not 0 < count <= len(items):
        return None
    env = dict(item.partition(b"=")[::2] for item in items[count:])
    return start_at, (grace, failed), items[:count], env, liveness


def started(pid: int, warm: bool, why: str = "") -> bytes:
    """A STARTED report: the command's pid, and whether it runs in the warm interpreter (else
    why not, if there was one)."""
    return PID.pack(pid) + (b"warm" if warm else b"plain\0" + why.encode(errors="replace"))


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


def _supervise(libc, daemon: int, graces, argv, env, warm, ready: int, watch) -> None:
    """Start the command under this gate (or release the warm interpreter to run it), tell
    the daemon on `ready` which it was, wait for its whole tree, exit as the command did.
    `watch`: the gate pipe and the round's liveness timeout, to hear the daemon's beats."""
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
    if watch is not None:  # a thread with every signal blocked (inherited): they stay the main thread's
        import _thread

        _thread.start_new_thread(_watch, watch)
    why: object = ""  # no warm interpreter; None: the command runs in it
    if warm is not None:
        tree.command = warm.pid
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, everything)  # a stop reaches it while it imports
        why = warm.release(argv, env, watch[1] / 5 if watch else 0.0)
        _signal.pthread_sigmask(_signal.SIG_BLOCK, everything)
        if why is not None and tree.asked:  # stopped before it could run the command
            os._exit(ABORTED)
        if why is not None:
            tree.command = 0
            os.write(2, f"rendezvous: {why}: starting the command without it\n".encode())
    if tree.command == 0:
        try:
            tree.command = _spawn(argv, env)
        except OSError as error:
            program, reason = os.fsdecode(argv[0]), error.strerror
            if isinstance(error, FileNotFoundError) and os.sep in program and os.path.exists(program):
                reason = "the interpreter its #! line names (or its ELF loader) was not found"
            os.write(2, f"rendezvous: cannot run {program!r}: {reason}\n".encode())
            os._exit(127 if isinstance(error, FileNotFoundError) else 126)
    try:
        os.write(ready, frame(STARTED, started(tree.command, why is None, str(why or ""))))
    except OSError:  # the daemon is gone: its parent-death signal follows
        pass
    os.close(ready)
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


def _watch(fd: int, liveness: float) -> None:
    """Hear the daemon's beats on `fd`: a daemon silent for `liveness` seconds (stopped,
    hung) gets its command ended as a dead one's is (KILL to this gate), so that a command
    never runs on unwatched beside the next round's. A wait that ends far later than asked
    means this gate did not run either (a loaded or suspended machine): not the daemon's
    silence. The pipe closed: the daemon stopped watching (its death is the parent-death
    signal's)."""
    import select

    every = liveness / 5
    heard = time.monotonic()
    while True:
        asked = time.monotonic()
        readable = select.select([fd], [], [], every)[0]
        now = time.monotonic()
        if readable:
            if not os.read(fd, 4096):
                return
            heard = now
        elif now - asked > 2 * every:
            heard = now
        elif now - heard >= liveness:
            os.write(2, f"rendezvous: the daemon (pid {os.getppid()}) did not answer for {now - heard:.1f} s, "
                        f"its round's liveness timeout being {liveness:g} s: ending the command\n".encode())
            os.kill(os.getpid(), KILL)
            return


def _spawn(argv, env, **fds) -> int:
    """A process of the command's kind: a group of its own, an empty signal mask, the
    default action of what Python ignores."""
    defaults = [getattr(_signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(_signal, n)]
    return os.posix_spawnp(argv[0], argv, env, setpgroup=0, setsigmask=(), setsigdef=defaults)


# The system calls ioprio_set and ioprio_get by machine, and their IOPRIO_WHO_PROCESS.
_IOPRIO, _IOPRIO_WHO_PROCESS = {"x86_64": (251, 252), "aarch64": (30, 31), "riscv64": (30, 31)}, 1


class _Warm:
    """The warm interpreter (rendezvous.launch.prewarm): its pid, the pipe it reads the
    release from, the pipe it says on whether its imports went well and that it took the
    release. A spare (for a later round) lowers its own CPU and I/O priority while it
    imports (rendezvous/launch/_warm.py); `foreground` gives it this gate's back."""

    def __init__(self, libc, argv, env) -> None:
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
        self._libc = libc
        try:
            self.pid = _spawn(argv, env)
        except OSError as error:
            self.why = f"the warm interpreter {os.fsdecode(argv[0])!r} did not start: {error.strerror}"
        finally:
            os.close(release_read)
            os.close(status_write)

    def foreground(self) -> None:
        """The round waits for it: every thread of it at this gate's CPU and I/O priority."""
        nice, calls = os.getpriority(os.PRIO_PROCESS, 0), _IOPRIO.get(os.uname().machine)
        io = self._libc.syscall(calls[1], _IOPRIO_WHO_PROCESS, 0) if calls else -1
        try:
            tasks = [int(task) for task in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:  # gone
            tasks = []
        for task in tasks:
            try:
                os.setpriority(os.PRIO_PROCESS, task, nice)
            except OSError:  # gone, or not allowed (then it never lowered it: _warm.py)
                pass
            if calls and io >= 0:
                self._libc.syscall(calls[0], _IOPRIO_WHO_PROCESS, task, io)

    def _answer(self, bound: float):
        """The next line the interpreter writes on its status pipe (b"" if it closed the pipe),
        or None once it stayed stopped (SIGSTOP) for `bound` seconds (0: no bound)."""
        import select

        said, stopped_since = b"", None
        while not said.endswith(b"\n"):
            if bound <= 0 or select.select([self.status_fd], [], [], bound / 10)[0]:
                chunk = os.read(self.status_fd, 4096)
                if not chunk:
                    return said
                said += chunk
                continue
            now = time.monotonic()
            try:
                with open(f"/proc/{self.pid}/stat", "rb") as f:  # state T: stopped (t: by a tracer)
                    stopped = f.read().rpartition(b")")[2].split()[0] in (b"T", b"t")
            except (OSError, IndexError):  # gone: its pipe tells
                stopped = False
            stopped_since = (stopped_since or now) if stopped else None
            if stopped_since is not None and now - stopped_since >= bound:
                return None
        return said

    def _why(self, said, bound: float) -> str:
        """Why it cannot run the command, from what it said instead of its answer."""
        if said is None:
            return f"the warm interpreter (pid {self.pid}) was stopped (SIGSTOP) for {bound:g} s and did not answer"
        if said.startswith(b"error "):
            return "the warm interpreter " + said[6:].decode(errors="replace").strip()
        return "the warm interpreter ended before its release"

    def release(self, argv, env, bound: float = 0.0):
        """Send it the command and its environment once it imported its modules, and wait for
        its word that it took them: None, or why it cannot run the command (then it is ended
        and reaped). Stopped for `bound` seconds at either step, it is taken for lost (a fifth
        of the round's liveness timeout: well before a stopped command fails its round)."""
        self.foreground()
        said = None if self.why else self._answer(bound)
        why = self.why or (None if said == b"ok\n" else self._why(said, bound))
        if why is None and self.pid and os.waitpid(self.pid, os.WNOHANG)[0]:  # ended after its imports
            self.pid = 0  # reaped
            why = self._why(b"", bound)
        if why is None:  # the message rendezvous/launch/_warm.py reads
            items = [os.getcwdb(), str(len(argv)).encode(), *argv, *(k + b"=" + v for k, v in env.items())]
            data = memoryview(b"".join(item + b"\0" for item in items))
            try:
                while data:
                    data = data[os.write(self.release_fd, data):]
            except BrokenPipeError:
                pass  # it ended right after its imports: no word follows
        os.close(self.release_fd)  # it reads to the end
        if why is None:
            said = self._answer(bound)
            why = None if said == b"go\n" else self._why(said, bound)
        os.close(self.status_fd)
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
    os.set_inheritable(gate, False)  # neither reaches the warm interpreter nor the command
    os.set_inheritable(ready, False)
    os.write(ready, frame(UP, b""))  # the daemon sees this gate up and waiting
    warm = start = None
    pending, chunk = b"", b"-"
    while start is None and chunk:  # a long environment takes several reads
        chunk = os.read(gate, 65536)
        found, pending = frames(pending + chunk)
        for kind, payload in found:
            message = decode(payload) if kind in (WARM, START) else None
            if kind == WARM and warm is None and start is None and message is not None:
                warm = _Warm(libc, message[2], message[3])
            elif kind == FOREGROUND and warm is not None:
                warm.foreground()
            elif kind == START and start is None:
                start = message or ()  # a START that does not decode calls the round off too
    if not start:  # the pipe closed without a start: the round was called off, or the daemon died
        if warm is not None:
            warm.end()
        os._exit(ABORTED)
    start_at, graces, argv, env, liveness = start
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)
    if liveness <= 0:
        os.close(gate)
    _supervise(libc, daemon, graces, argv, env, warm, ready, (gate, liveness) if liveness > 0 else None)


if __name__ == "__main__":  # a spawned gate: ready and gate pipes, the daemon's pid
    run(*(int(arg) for arg in sys.argv[1:4]))
