"""Starting real `rendezvous join` processes and reading what their commands recorded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from patience import HANG

RECORDER = Path(__file__).with_name("record_start.py")
# The fault tests' command: records each start as OUT/<node>-<round>.json (fault_command.py)
FAULT_COMMAND = Path(__file__).with_name("fault_command.py")

# Small timings for the fault tests: every fault is noticed within a second or two.
FAST = ["--liveness-timeout", "1.5", "--timings", "keepalive=1,suspect-after=1,end-grace=0.5,conflict-linger=0.2",
        "--stop-grace", "2"]

# Every join in a test ends on its own: no test can hang on a rendezvous.
DEFAULT_TIMEOUT = 40


def alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie is not running: an orphan reparented to an init
    that reaps slowly (or never, as in some containers) stays a zombie for a while."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between it and the read
        return False


def wait_gone(pid: int, timeout: float = HANG) -> bool:
    """Wait up to ``timeout`` seconds for ``pid`` to stop running; whether it did."""
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def interruptible() -> None:
    """A child's SIGINT does what Ctrl-C does on a terminal (a `preexec_fn`): a test run
    started in the background, or under nohup, ignores SIGINT, and its children inherit that,
    so a program that relies on Python's default handler would never see the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def join_argv(
    expect: int,
    job: str,
    out_dir: Path,
    address: Optional[str] = None,
    options: Sequence[str] = (),
    command: Optional[Sequence[str]] = None,
    record_args: Sequence[str] = (),
) -> list[str]:
    argv = [sys.executable, "-m", "rendezvous", "join", "--expect", str(expect), "--job", job]
    if address:
        argv += ["--address", address]
    if "--timeout" not in options:
        argv += ["--timeout", str(DEFAULT_TIMEOUT)]
    argv += [*options, "--"]
    argv += command if command is not None else [sys.executable, str(RECORDER), str(out_dir), *record_args]
    return argv


@dataclass
class Peer:
    """One running `rendezvous join`, its output going to files (never a full pipe)."""

    name: str
    proc: subprocess.Popen
    log_path: Path

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait(self, timeout: float = HANG) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"peer {self.name} did not exit within {timeout}s:\n{self.log}")


def run_join(*options: str, job: Optional[str] = None, timeout: float = HANG,
             output: Optional[int] = None) -> subprocess.CompletedProcess:
    """One `rendezvous join` on 127.0.0.2 (job random unless given), run to its end with no
    RENDEZVOUS_* variables of the caller but --prewarm none; its output captured as text, or with `output`
    (a file descriptor) written there."""
    job = job or f"c-{os.urandom(4).hex()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RENDEZVOUS_")}
    env["RENDEZVOUS_PREWARM"] = "none"  # as for every test daemon (conftest): no TensorFlow imported ahead
    streams: dict = {"capture_output": True, "text": True} if output is None else {"stdout": output, "stderr": output}
    return subprocess.run(
        [sys.executable, "-m", "rendezvous", "join", "--job", job, "--address", "127.0.0.2", *options],
        timeout=timeout, env=env, stdin=subprocess.DEVNULL, **streams,
    )


def start_peer(
    argv: list[str], log_dir: Path, name: str, popen: Callable[..., subprocess.Popen] = subprocess.Popen,
    extra_env: Optional[dict[str, str]] = None,
) -> Peer:
    log_path = log_dir / f"{name}.log"
    out = open(log_path, "wb")
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    # where the daemon registers for `rendezvous status`: the test's, not the machine's
    env.setdefault("RENDEZVOUS_RUNTIME_DIR", str(log_dir / "run"))
    proc = popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    out.close()
    return Peer(name, proc, log_path)


def records(out_dir: Path) -> list[dict]:
    """What every started command recorded, in worker order."""
    found = [json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))]
    return sorted(found, key=lambda r: int(r["env"]["RENDEZVOUS_RANK"]))


def wait_for_records(out_dir: Path, count: int, timeout: float = HANG) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = list(out_dir.glob("*.json"))
        if len(found) >= count:
            return records(out_dir)
        time.sleep(0.05)
    raise AssertionError(f"only {len(list(out_dir.glob('*.json')))} of {count} commands started")


def assert_consistent(recs: list[dict], addresses: Sequence[str]) -> None:
    """Every worker got the same ordered list, its own index, and worker 0 is the lowest address."""
    import ipaddress

    assert len(recs) == len(addresses)
    clusters = [r["tf_config"]["cluster"]["worker"] for r in recs]
    assert all(c == clusters[0] for c in clusters), clusters
    workers = clusters[0]
    hosts = [w.rsplit(":", 1)[0].strip("[]") for w in workers]  # IPv6 in brackets
    assert hosts == sorted(addresses, key=lambda a: int(ipaddress.ip_address(a))), hosts
    for rank, rec in enumerate(recs):
        assert rec["tf_config"]["task"] == {"type": "worker", "index": rank}
        assert rec["env"]["RENDEZVOUS_RANK"] == str(rank)
        assert rec["env"]["RENDEZVOUS_WORLD_SIZE"] == str(len(addresses))
    digests = {r["env"]["RENDEZVOUS_CLUSTER_DIGEST"] for r in recs}
    assert len(digests) == 1
    ports = [int(w.rsplit(":", 1)[1]) for w in workers]
    assert len(set(ports)) == len(ports) or len(set(hosts)) == len(hosts)


def job_status(host, job: str, *args: str, check: bool = True):
    """`rendezvous status --job JOB` run on `host` (netns): parsed with --json; None for a
    failure when not `check`."""
    result = host.run(
        [sys.executable, "-m", "rendezvous", "status", "--job", job, "--timeout", "5", *args],
        capture_output=True, text=True, timeout=HANG, stdin=subprocess.DEVNULL,
    )
    if result.returncode != 0 and not check:
        return None
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if "--json" in args else result.stdout


def wait_for_job(host, job, ready, timeout=HANG):
    """`status --job --json` until `ready(status)` holds (nobody answering: not yet); that status."""
    deadline = time.monotonic() + timeout
    while True:
        status = job_status(host, job, "--json", check=False)
        if status is not None and ready(status):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.3)


def starts(tmp_path: Path, round_: int) -> list[dict]:
    """What the fault command recorded of each start in round `round_` (tmp_path/out)."""
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "out").glob(f"*-{round_}.json"))]


def wait_for_starts(tmp_path: Path, round_: int, count: int, timeout: float = HANG) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = starts(tmp_path, round_)
        if len(found) >= count:
            return sorted(found, key=lambda r: r["rank"])
        time.sleep(0.05)
    raise AssertionError(f"round {round_}: {len(starts(tmp_path, round_))} of {count} commands started")


def leaves_behind(seconds: str, exit_code: int, ready: Path, first: str = "") -> list[str]:
    """A command that (after the shell commands `first`) starts a child that ignores SIGTERM
    and sleeps `seconds`, waits until the child has set SIGTERM aside (the file `ready`),
    however loaded the machine, then exits `exit_code`."""
    return ["sh", "-c", f"{first}sh -c \"trap '' TERM; : > {ready}; sleep {seconds}\" & "
                        f"while [ ! -e {ready} ]; do sleep 0.02; done; exit {exit_code}"]


def running(marker: str) -> list[int]:
    """The live processes (this one aside) whose command line holds `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and alive(int(name)):
                found.append(int(name))
    return found
