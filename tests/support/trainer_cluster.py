"""Helpers to run ``python -m trainer`` workers as subprocesses on loopback."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    """A port that is free on every interface (TF's gRPC server binds all of them)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def tf_config(ports: list[int], index: int) -> str:
    return json.dumps({
        "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
        "task": {"type": "worker", "index": index},
    })


def trainer_env(config: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    env.pop("TF_USE_LEGACY_KERAS", None)
    if config is not None:
        env["TF_CONFIG"] = config
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


class Worker:
    """One trainer subprocess; stdout is collected line by line, stderr goes to a file."""

    def __init__(self, argv: list[str], env: dict[str, str], stderr_path: Path):
        self.stderr_path = stderr_path
        self._stderr = open(stderr_path, "w")
        self.proc = subprocess.Popen(
            argv, env=env, cwd=REPO, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=self._stderr, text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self._queue.put(line)
        self._queue.put(None)

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no line starting {prefix!r} in {timeout}s: {self.lines}")
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(
                    f"worker exited ({self.proc.wait()}) before a line starting {prefix!r}: "
                    f"{self.lines}\n{self.stderr()}"
                )
            if line.startswith(prefix):
                return line

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._stderr.close()

    def stdout(self) -> str:
        return "\n".join(self.lines)

    def stderr(self) -> str:
        return self.stderr_path.read_text()


def start_workers(n: int, args: list[str], workdir: Path, tag: str = "run") -> list[Worker]:
    """Start ``n`` workers of one cluster with a hand-written TF_CONFIG each.
    Worker ``i`` writes its result to ``workdir/{tag}-{i}.json``."""
    ports = [free_port() for _ in range(n)]
    workers = []
    for i in range(n):
        argv = [PYTHON, "-m", "trainer", *args, "--result-file", str(workdir / f"{tag}-{i}.json")]
        env = trainer_env(tf_config(ports, i) if n > 1 else None)
        workers.append(Worker(argv, env, workdir / f"{tag}-{i}.stderr"))
    return workers


def finish(workers: list[Worker], timeout: float) -> list[int]:
    """Wait for every worker; on timeout kill them all and fail."""
    deadline = time.monotonic() + timeout
    try:
        return [w.wait(max(0.1, deadline - time.monotonic())) for w in workers]
    except subprocess.TimeoutExpired:
        raise AssertionError(
            "workers did not finish in time:\n"
            + "\n".join(f"--- {i}\n{w.stdout()}\n{w.stderr()[-2000:]}" for i, w in enumerate(workers))
        ) from None
    finally:
        for w in workers:
            w.kill()


def result(workdir: Path, tag: str, index: int) -> dict:
    return json.loads((workdir / f"{tag}-{index}.json").read_text())


def run_python(code: str, config: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-c", code], env=trainer_env(config), cwd=REPO,
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )


def run_trainer(args: list[str], config: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "trainer", *args], env=trainer_env(config), cwd=REPO,
        capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
    )
