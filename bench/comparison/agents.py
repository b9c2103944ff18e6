"""Starting the agents of one round (rendezvous or torchrun) and the trainer, and reading what
their commands recorded.

Every agent runs the same command, a shell that forks `date` first thing, so no interpreter
start-up hides in the figures, then copies its parent's (the agent's) /proc stat and status:
the agent's CPU seconds and RSS at the moment its command started.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from .figures import FigureError, Round, cpu_seconds, parse_notify, parse_start, parse_status_kib
from .install import REPO, Programs

TICKS = os.sysconf("SC_CLK_TCK")

# What the trainer is started through, in both ways: the moment it starts, then the trainer.
TRAINER_STARTED = 'date +%s.%N > "$0" && exec "$@"'

# The agent is the command's parent, or, under rendezvous, its supervisor's parent.
RECORD = ('date +%s.%N > "$0.start"; a=$PPID; '
          '[ "$(cat /proc/$a/comm)" = rendezvous-gate ] && a=$(cut -d" " -f4 /proc/$a/stat); '
          'cat /proc/$a/stat > "$0.stat"; cat /proc/$a/status > "$0.status"')


def settled_marker(tool: str, n: int) -> str:
    """What an agent's log says once it waits for the missing peer (rendezvous with
    `--log-format plain`, torchrun with LOGLEVEL=INFO)."""
    return f" {n - 1}/{n} peers seen" if tool == "rendezvous" else "Rendezvous'ing worker group"


class RoundError(RuntimeError):
    """A round did not complete: an agent failed or timed out. The message has its log's tail."""


def record_command(prefix: Path, hold: float = 0) -> list[str]:
    script = RECORD + (f"; sleep {hold:g}" if hold else "")
    return ["/bin/sh", "-c", script, str(prefix)]


def clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment without anything that would change how an agent behaves."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RENDEZVOUS_", "TORCHELASTIC_")) and k not in
           ("TF_CONFIG", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LOGLEVEL",
            "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(extra)
    return env


def rendezvous_argv(program: str, n: int, job: str, address: Optional[str], command: Sequence[str],
                    timeout: float = 120) -> list[str]:
    """`program`: rendezvous's console script."""
    argv = [program, "join", "--expect", str(n), "--job", job,
            "--timeout", f"{timeout:g}", "--log-format", "plain"]
    if address:
        argv += ["--address", address]
    return argv + ["--", *command]


def torchrun_argv(torchrun: str, n: int, endpoint: str, run_id: str, is_host: bool,
                  command: Sequence[str]) -> list[str]:
    # is_host: the first agent serves the c10d store. Without it torchrun guesses by resolving
    # names: on loopback every agent guesses yes, and all but one fall back after a failed bind.
    return [torchrun, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", endpoint, "--rdzv-id", run_id,
            "--rdzv-conf", f"is_host={int(is_host)}", "--max-restarts", "0", "--no-python", *command]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@dataclass
class Started:
    """Processes of one round, each in its own session so all of it can be killed."""

    procs: list[subprocess.Popen] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    def start(self, argv: Sequence[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True, cwd=REPO)
        self.procs.append(proc)
        self.logs.append(log)
        return proc

    def wait(self, deadline: float) -> list[int]:
        codes = []
        for proc, log in zip(self.procs, self.logs):
            try:
                codes.append(proc.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.kill()
                raise RoundError(f"{log.stem} did not finish in time:\n{tail(log)}") from None
        for code, log in zip(codes, self.logs):
            if code != 0:
                raise RoundError(f"{log.stem} exited {code}:\n{tail(log)}")
        return codes

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()

    def __enter__(self) -> "Started":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait_for_text(paths: Sequence[Path], text: str, deadline: float) -> None:
    while True:
        missing = [p for p in paths if text not in p.read_text(errors="replace")]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RoundError(f"{missing[0].stem} never logged {text!r}:\n{tail(missing[0])}")
        time.sleep(0.02)


def read_record(prefix: Path) -> tuple[float, float, int]:
    """(command start, agent CPU seconds, agent RSS KiB) that one command recorded."""
    try:
        start = parse_start(Path(f"{prefix}.start").read_text())
        cpu = cpu_seconds(Path(f"{prefix}.stat").read_text(), TICKS)
        rss = parse_status_kib(Path(f"{prefix}.status").read_text(), "VmRSS") or 0
    except (OSError, FigureError) as e:
        raise RoundError(f"the command of {prefix.name} recorded nothing readable: {e}") from None
    return start, cpu, rss


def run_round(tool: str, place, n: int, warm: bool, workdir: Path, programs: Programs, *,
              settle: float = 1.0, timeout: float = 120, notify: Optional["NotifyListener"] = None) -> Round:
    """Start `n` agents of `tool` in `place` and wait for all of them to finish.

    Cold: all launched one after the other at once. Warm: the first n-1 are launched, and the
    last only once they all wait for it (their logs say so) plus `settle` seconds."""
    tag = secrets.token_hex(4)
    out = workdir / f"{tool}-{place.name}-n{n}-{'warm' if warm else 'cold'}-{tag}"
    out.mkdir(parents=True)
    deadline = time.monotonic() + timeout
    if tool == "rendezvous":
        env = clean_env(RENDEZVOUS_RUNTIME_DIR=str(out / "run"))
        if notify is not None:
            env["NOTIFY_SOCKET"] = notify.path
        argvs = [rendezvous_argv(programs.rendezvous, n, f"cmp-{tag}",
                                 place.address(i) if place.name == "loopback" else None,
                                 record_command(out / f"a{i}"), timeout) for i in range(n)]
    else:
        torchrun = programs.torchrun
        assert torchrun is not None
        env = clean_env(LOGLEVEL="INFO")
        host = "127.0.0.1" if place.name == "loopback" else place.address(0)
        port = free_port() if place.name == "loopback" else 29400 + secrets.randbelow(1000)
        argvs = [torchrun_argv(torchrun, n, f"{host}:{port}", f"cmp-{tag}", i == 0,
                               record_command(out / f"a{i}")) for i in range(n)]
    with Started() as started:
        launched = 0.0
        for i in range(n):
            if warm and i == n - 1:
                wait_for_text(started.logs, settled_marker(tool, n), deadline)
                time.sleep(settle)
            launched = time.time()
            started.start(place.wrap(i, argvs[i]), out / f"a{i}.log", env)
        started.wait(deadline)
        pids = [p.pid for p in started.procs]
    records = [read_record(out / f"a{i}") for i in range(n)]
    ready_cpu = notify.take(pids) if notify is not None else ()
    return Round(launched, tuple(r[0] for r in records), tuple(r[1] for r in records),
                 tuple(r[2] for r in records), tuple(ready_cpu))


# -- systemd's notify protocol, from the receiving end ---------------------------------------


class NotifyListener:
    """A NOTIFY_SOCKET for many daemons at once: the sender's pid comes with each datagram
    (SO_PASSCRED). On READY=1 it notes the time and reads the sender's CPU seconds at once."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind(self.path)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._sock.settimeout(0.1)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self.ready_at: dict[int, float] = {}
        self.ready_cpu: dict[int, float] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name="notify", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        cred_size = struct.calcsize("3i")
        while not self._stop:
            try:
                data, ancdata, _, _ = self._sock.recvmsg(4096, socket.CMSG_SPACE(cred_size))
            except socket.timeout:
                continue
            except OSError:
                return
            now = time.time()
            pid = None
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid = struct.unpack("3i", payload[:cred_size])[0]
            if pid is None or parse_notify(data).get("READY") != "1":
                continue
            cpu = read_cpu(pid)
            with self._cond:
                self.ready_at[pid] = now
                if cpu is not None:
                    self.ready_cpu[pid] = cpu
                self._cond.notify_all()

    def wait_ready(self, pid: int, deadline: float) -> float:
        with self._cond:
            while pid not in self.ready_at:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RoundError(f"daemon {pid} never said READY=1")
                self._cond.wait(left)
            return self.ready_at[pid]

    def take(self, pids: Sequence[int]) -> list[float]:
        """The CPU seconds at READY of these daemons, forgetting them (a pid may be reused)."""
        with self._lock:
            for pid in pids:
                self.ready_at.pop(pid, None)
            return [cpu for cpu in (self.ready_cpu.pop(pid, None) for pid in pids) if cpu is not None]

    def __enter__(self) -> "NotifyListener":
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True
        self._thread.join(1)
        self._sock.close()


def read_cpu(pid: int) -> Optional[float]:
    try:
        return cpu_seconds(Path(f"/proc/{pid}/stat").read_text(), TICKS)
    except (OSError, FigureError):
        return None


def read_status_kib(pid: int, name: str) -> Optional[int]:
    try:
        return parse_status_kib(Path(f"/proc/{pid}/status").read_text(), name)
    except (OSError, FigureError):
        return None


# -- the trainer -----------------------------------------------------------------------------


def trainer_round(tool: str, workdir: Path, programs: Programs, trainer_args: Sequence[str],
                  timeout: float = 600) -> dict:
    """Two trainer workers on loopback, with a TF_CONFIG written here or through `rendezvous join`.

    Returns seconds from the last launch to the last worker's trainer started (a shell that
    forks `date` and execs the trainer: rendezvous's share, the daemon's start and the
    rendezvous), to the slowest worker's first training step (the end of its first batch,
    `timing.first_step_unix` in the trainer's --result-file) and to the exit of both."""
    tag = secrets.token_hex(4)
    out = workdir / f"trainer-{tool}-{tag}"
    out.mkdir(parents=True)
    addresses = ["127.0.0.2", "127.0.0.3"]
    ports = [free_port() for _ in addresses]
    env = clean_env(TF_CPP_MIN_LOG_LEVEL="2", RENDEZVOUS_RUNTIME_DIR=str(out / "run"))
    results = [out / f"w{i}.json" for i in range(2)]
    with Started() as started:
        launched = 0.0
        for i in range(2):
            trainer = ["/bin/sh", "-c", TRAINER_STARTED, str(out / f"w{i}.start"),
                       programs.python, "-m", "trainer", *trainer_args, "--result-file", str(results[i])]
            worker_env = dict(env)
            if tool == "tf_config":
                worker_env["TF_CONFIG"] = json.dumps({
                    "cluster": {"worker": [f"{a}:{p}" for a, p in zip(addresses, ports)]},
                    "task": {"type": "worker", "index": i},
                })
                argv = trainer
            else:
                argv = rendezvous_argv(programs.rendezvous, 2, f"cmp-{tag}", addresses[i], trainer, timeout)
            launched = time.time()
            started.start(argv, out / f"w{i}.log", worker_env)
        started.wait(time.monotonic() + timeout)
        ended = time.time()
    try:
        first = max(json.loads(r.read_text())["timing"]["first_step_unix"] for r in results)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RoundError(f"the trainer's --result-file cannot be read: {e}") from None
    try:
        started = max(parse_start((out / f"w{i}.start").read_text()) for i in range(2))
    except (OSError, FigureError) as e:
        raise RoundError(f"the trainer's start was not recorded: {e}") from None
    return {"started": started - launched, "first_step": first - launched, "total": ended - launched}
