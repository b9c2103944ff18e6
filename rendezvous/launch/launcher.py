"""Starting and stopping the command: its whole process tree, its environment, its exit code."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import sys
import time
from typing import Mapping, Optional, Sequence, Union

from . import firstgate, gate, prewarm
from .gatelink import GateLink, Started, encode
from .output import OutputSettings, Plumbing, check_output_dir
from ..config.options import BY_NAME
from ..errors import CommandNotExecutable, ConfigError, LaunchError
from ..core.tf_config import NOTIFY_VARIABLES
from ..host.runtime import process_state

log = logging.getLogger(__name__)

# The option table's defaults, for a launcher made without a config (tests, benchmarks).
STOP_GRACE: float = BY_NAME["stop_grace"].default  # type: ignore[assignment]
ABORT_GRACE: float = BY_NAME["abort_grace"].default  # type: ignore[assignment]
LIVENESS: float = BY_NAME["liveness_timeout"].default  # type: ignore[assignment]


def command_of(gate_pid: int) -> Optional[int]:
    """The command a gate started: the gate's oldest child that leads its own process
    group (the others are orphans of the command's tree), or None."""
    found = []
    for pid in gate.descendants(gate_pid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == gate_pid and int(fields[2]) == pid:
            found.append((int(fields[19]), pid))  # started (clock ticks since boot), pid
    return min(found)[1] if found else None


def kill_session(session: int) -> int:
    """SIGKILL to every process of `session` (a gate's pid: its command's whole tree but what
    left the session); how many there were. None is left when the gate ended as it should:
    only a gate killed with SIGKILL itself leaves its tree behind, orphaned."""
    killed = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    if int(f.read().rpartition(b")")[2].split()[3]) != session:
                        continue
                os.kill(int(name), signal.SIGKILL)
                killed += 1
            except (OSError, IndexError, ValueError):  # gone meanwhile
                pass
    return killed


def exit_code_of(returncode: int) -> int:
    """A shell-style exit code: death by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def check_variables(env: Mapping[str, str]) -> None:
    """Refuse, before the start, a variable that the command's environment cannot hold."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise LaunchError(f"cannot pass the environment variable {name!r}={value!r} to the command")


async def _readable(fd: int) -> None:
    """Wait until `fd` is readable, then close it: a pipe once all its writers closed it, a
    pidfd once its process ended."""
    loop = asyncio.get_running_loop()
    readable = loop.create_future()
    loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
    try:
        await readable
    finally:
        loop.remove_reader(fd)
        os.close(fd)


class _Forked:
    """The spare gate as the launcher sees a process (pid, returncode, wait): a child of
    this process that asyncio did not start, reaped once its pidfd says it ended."""

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self.returncode: Optional[int] = None
        self._ended = asyncio.ensure_future(self._reap(pidfd))

    async def _reap(self, pidfd: int) -> None:
        await _readable(pidfd)
        # -N for death by signal N, as asyncio reports it
        self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])

    async def wait(self) -> int:
        await asyncio.shield(self._ended)
        assert self.returncode is not None
        return self.returncode


def check_command(command: Sequence[str]) -> str:
    """Fail before the rendezvous, not after it, when the command cannot run."""
    program = command[0]
    if os.sep in program:
        path = program
        if os.path.isdir(path):
            raise CommandNotExecutable(f"command is a directory: {program!r}")
        if not os.path.isfile(path):
            raise LaunchError(f"command not found: {program!r}")
    else:
        found = shutil.which(program)
        if found is None:
            raise LaunchError(f"command not found in PATH: {program!r}")
        path = found
    if not os.access(path, os.X_OK):
        raise CommandNotExecutable(f"command is not executable: {program!r}")
    return path


class Launcher:
    """Runs one command in a process group of its own, with output passed through, and
    stops and waits for its whole process tree.

    `prepare` has the command's process ready, as a gate that waits (rendezvous.launch.gate), when
    a round begins; `arm` gives it the round's environment once the membership is frozen;
    `fire` lets it start the command, which it then supervises. `stop` handles a waiting and a
    running command alike. The launcher signals only the gate: the gate passes signals on to
    every process of the command's tree, and ends once none is left.

    What the command leaves running when it ends by itself gets SIGTERM, then SIGKILL after
    `stop_grace` (--stop-grace) if it exited 0, after `abort_grace` (--abort-grace) if it
    failed: the graces the daemon gives the command itself when its round completes or aborts.
    """

    def __init__(self, stop_grace: float = STOP_GRACE, abort_grace: float = ABORT_GRACE,
                 output: Optional[OutputSettings] = None, spare: Optional[firstgate.Spare] = None) -> None:
        self.stop_grace = stop_grace
        self._spare = spare  # a gate forked at the process's start (firstgate.fork_spare), taken once
        self.abort_grace = abort_grace
        self.output = Plumbing(output or OutputSettings())  # the command's stderr (and stdout) pipes
        self._drained: Optional[asyncio.Future] = None  # the pipes read to their end
        self._discarded: Optional[_Forked] = None  # a spare gate not taken, until it is reaped
        self.signal: Optional[int] = None  # the signal the command died of
        self._process: Optional[Union[asyncio.subprocess.Process, _Forked]] = None
        self._link: Optional[GateLink] = None  # the gate's pipes
        self._command: tuple[str, ...] = ()
        self._env: dict[str, str] = {}  # the command's: this daemon's at `prepare`, the round's from `arm`
        self._command_pid: Optional[int] = None
        self.warm: Optional[prewarm.WarmPlan] = None  # set when the command starts warm
        self.started_at: Optional[float] = None  # time.monotonic() when the command started
        self.finished_at: Optional[float] = None

    @property
    def pid(self) -> Optional[int]:
        """The command's pid once it was started (its gate's until the gate says it started it)."""
        if self._process is None or self.started_at is None:
            return None
        return self._command_pid or self._process.pid

    def uptime(self, now: float) -> Optional[float]:
        """Seconds the command has run by `now` (time.monotonic()), or ran until it ended."""
        if self.started_at is None:
            return None
        return max(0.0, (self.finished_at or now) - self.started_at)

    async def prepare(self, command: Sequence[str], modules: Sequence[str] = (), optional: bool = False,
                      spare: bool = False) -> None:
        """Have the gate that will exec `command`: the one it was given (forked at the process's
        start, rendezvous.launch.firstgate), else one spawned now, an interpreter start that the freeze then
        need not wait for. With `modules` (--prewarm), and a command that is a Python running
        a script or a module, the gate starts that interpreter now, which imports them
        (all of them, or with `optional` those it finds) and then waits for the release;
        as a `spare` (for a later round) at the lowest CPU and I/O priority until `foreground`."""
        if self._process is not None:
            return
        check_command(command)
        directory = self.output.settings.directory
        if directory is not None:
            try:
                check_output_dir(directory, self.output.settings.job)
            except OSError as exc:
                raise ConfigError(f"--output-dir {directory}: cannot make {directory / self.output.settings.job}: "
                                  f"{exc.strerror or exc}") from None
        # systemd's notify socket is the daemon's (NotifyAccess=main): not the command's.
        self._env = {k: v for k, v in os.environ.items() if k not in NOTIFY_VARIABLES}
        forked, self._spare = self._spare, None
        if forked is not None and self.output.captures_stdout:  # forked with only its stderr piped
            self._discard(forked)
            forked = None
        if forked is not None:
            self._process, ready_read, gate_write = _Forked(forked.pid, forked.pidfd), forked.ready, forked.gate
            self.output.adopt(forked.stderr)
            log.debug("the command's gate: the spare forked at this process's start (pid %d)", forked.pid)
        else:
            ready_read, ready_write = os.pipe()
            gate_read, gate_write = os.pipe()
            ends = self.output.ends()
            try:
                self._process = await asyncio.create_subprocess_exec(
                    sys.executable, "-I", "-S", gate.__file__, str(ready_write), str(gate_read), str(os.getpid()),
                    # a session of its own is also a process group of its own (process_group=0: 3.11+)
                    pass_fds=(ready_write, gate_read), start_new_session=True, stdout=ends.get(1), stderr=ends[2],
                )
            except BaseException:
                os.close(gate_write)
                os.close(ready_read)
                raise
            finally:
                os.close(gate_read)
                os.close(ready_write)
                self.output.close_ends()
            log.debug("the command's gate: spawned (pid %d)", self._process.pid)
        self._link = GateLink(gate_write, ready_read)
        self._command = tuple(command)
        if modules:
            self._prewarm(modules, optional, spare)

    def _prewarm(self, modules: Sequence[str], optional: bool, spare: bool) -> None:
        plan = prewarm.plan(self._command)
        if plan is None:
            if not optional:
                log.warning("--prewarm %s: the command is not a Python interpreter running a script or a "
                            "module: it starts the plain way", ",".join(modules))
            return
        assert self._process is not None
        assert self._link is not None
        argv = plan.argv(modules, optional, gate.RELEASE_FD, gate.STATUS_FD, gate.GATE_PID, low=spare)
        self._link.send(gate.WARM, encode(0.0, argv, self._env))
        self.warm = plan
        log.debug("the warm interpreter: %s importing %s (gate pid %d)", " ".join(plan.interpreter),
                  ",".join(modules), self._process.pid)

    def foreground(self) -> None:
        """A spare taken for a round: its warm interpreter, if still importing, at the usual
        priority from now on (it was at the lowest while another round ran)."""
        if self._link is not None and self.warm is not None:
            self._link.send(gate.FOREGROUND)

    def warm_memory(self) -> Optional[tuple[int, int]]:
        """The waiting warm interpreter's pid and resident memory (bytes), if there is one."""
        pid = self.warm_pid()
        if pid is None:
            return None
        try:
            with open(f"/proc/{pid}/statm") as f:
                return pid, int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            return None

    def warm_pid(self) -> Optional[int]:
        """The warm interpreter waiting for its release, if any."""
        if self.warm is None or self.started_at is not None or self._process is None:
            return None
        if self._process.returncode is not None:
            return None
        return command_of(self._process.pid)

    async def arm(self, command: Sequence[str], env: Mapping[str, str]) -> None:
        """The round's variables for the command (started now if `prepare` was not called);
        returns once its gate waits, so that `fire` only has to write to it."""
        check_variables(env)  # refuse what cannot be passed now, not at the start
        await self.prepare(command)
        assert self._link is not None
        await asyncio.shield(self._link.up)
        self._env.update(env)

    def fire(self, start_at: float, liveness: float = LIVENESS) -> None:
        """Let the armed command start at `start_at` (seconds since the epoch). The gate ends
        it if this process does not beat for `liveness` seconds (the round's timeout)."""
        assert self._process is not None and self._link is not None, "fire() before arm()"
        self._link.start(encode(start_at, self._command, self._env, self.stop_grace, self.abort_grace, liveness),
                         liveness)
        self.started_at = time.monotonic() + max(0.0, start_at - time.time())
        self._link.started.add_done_callback(self._started)

    def _started(self, reported: asyncio.Future) -> None:
        """The gate started the command: the start line says how, and a warm interpreter not
        used says why."""
        started: Optional[Started] = None if reported.cancelled() else reported.result()
        if started is None:  # the gate ended first (stopped, killed): `wait` tells
            return
        self._command_pid = started.pid
        if self.warm is not None and not started.warm:
            log.warning("the warm interpreter was not used: %s; the command starts the plain way", started.why)
            self.warm = None
        log.info("starting %s (pid %d%s)", " ".join(self._command), started.pid, ", warm" if started.warm else "")

    def _discard(self, spare: firstgate.Spare) -> None:
        """A spare gate this launcher does not take: it ends without running anything."""
        for fd in (spare.gate, spare.ready, spare.stderr):
            os.close(fd)
        self._discarded = _Forked(spare.pid, spare.pidfd)

    def record_output(self, round: int, rank: int) -> Optional[str]:
        """With --output-dir: the round's output file from now on (its path, logged)."""
        path = self.output.record(round, rank)
        if path is not None:
            log.info("the command's output (stdout and stderr) goes to %s, and to this terminal", path)
        return str(path) if path else None

    def tail(self) -> tuple[str, ...]:
        """The last lines the command wrote to stderr (complete once `wait` returned)."""
        return self.output.tail()

    async def wait(self) -> int:
        assert self._process is not None
        returncode = await self._process.wait()  # the gate's: the whole tree has ended
        if self._drained is None:
            self._drained = asyncio.ensure_future(asyncio.to_thread(self.output.finish))
        await asyncio.shield(self._drained)  # what it wrote last is in the tail and the file
        if self._link is not None:
            self._link.close()
        code = exit_code_of(returncode)
        self.signal = -returncode if returncode < 0 else None
        if self.finished_at is None:
            self.finished_at = time.monotonic()
            if self.started_at is not None and kill_session(self._process.pid):
                log.warning("the command's supervisor was killed: SIGKILL to what it left of the command")
        return code

    async def stop(self, grace: float) -> int:
        """SIGTERM to the command's whole tree, SIGKILL after `grace` seconds; returns the
        exit code once no process of the tree is left."""
        if self._process is None:
            return 0
        if self.started_at is None:
            if self._link is not None:
                self._link.close_gate()  # disarm: the waiting gate exits without running anything
            return await self.wait()
        if self._process.returncode is None:
            log.info("stopping the command (SIGTERM, SIGKILL after %gs)", grace)
            self._signal_gate(signal.SIGTERM)  # passed on with a SIGCONT: a stopped command must run to handle it
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
        pid = self.pid
        if pid is None or process_state(pid) not in (b"T", b"t"):
            return None
        return now if since is None else since

    def kill(self) -> None:
        """SIGKILL to the command's whole tree (a gate that has not started it just ends)."""
        self._signal_gate(gate.KILL)

    def _signal_gate(self, signum: int) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        try:
            os.kill(self._process.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
