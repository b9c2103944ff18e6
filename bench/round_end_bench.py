"""What a command gets when its round ends, measured: two `rendezvous join --expect 2` on
127.0.0.2 and 127.0.0.3 (loopback), default graces unless given.

Commands: `plain` (tests/support/plain_mwms.py: a MultiWorkerMirroredStrategy script with no
signal handling of its own, so TensorFlow's coordination service keeps SIGTERM as a
preemption notice), `helper` (the same calling rendezvous.script.exit_on_sigterm() after the
strategy), `trainer` (the bundled trainer, --threads 1, digits, 5 steps an epoch).

Events, once both commands train:
  abort  kill -9 of one command; figures: kill -> the other command gone ("stopped"),
         kill -> both round-2 commands started ("restarted"), kill -> both round-2
         commands training ("training": the first step for plain and helper, the first
         epoch's end, 5 steps, for the trainer)
  stop   SIGTERM to both daemons (as Ctrl-C or systemctl stop); figure: signal -> both
         daemons exited, their commands gone ("stopped")

    python bench/round_end_bench.py abort plain [--runs 3] [-- JOIN OPTIONS...]
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLAIN = REPO / "tests" / "support" / "plain_mwms.py"
ADDRESSES = ("127.0.0.2", "127.0.0.3")


def command(kind: str, out: Path) -> list[str]:
    if kind == "trainer":  # no command after --: the bundled trainer with these options
        return ["--threads", "1", "--epochs", "1000", "--steps-per-epoch", "5"]
    extra = ["--exit-on-sigterm"] if kind == "helper" else []
    return [sys.executable, str(PLAIN), str(out), *extra]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def commands_of(daemon: int) -> list[int]:
    """The processes under `daemon`'s gates that are Python (the command, not the gate)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        pid, ppid = int(name), int(fields[1])
        if ppid != daemon and b"rendezvous-gate" not in Path(f"/proc/{name}/comm").read_bytes() \
                and _ancestor(ppid, daemon) and argv and b"python" in argv[0]:
            found.append(pid)
    return found


def _ancestor(pid: int, of: int) -> bool:
    for _ in range(4):
        if pid == of:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def wait_for(predicate, what: str, logs: list[Path], timeout: float = 180.0) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.005)
    tails = "".join(f"\n--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:]) for p in logs)
    raise TimeoutError(f"{what} did not happen within {timeout:g} s{tails}")


def training(logs: list[Path], kind: str, times: int) -> bool:
    mark = "epoch 1/" if kind == "trainer" else "training in round"
    return all(p.read_text(errors="replace").count(mark) >= times for p in logs)


def one_run(event: str, kind: str, options: list[str], keep: Path | None = None) -> tuple[float, ...]:
    job = f"bench-{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return _measure(event, kind, options, job, Path(tmp))
        finally:
            if keep is not None:  # the daemons' logs, to see why a figure is what it is
                keep.mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    (keep / f"{job}-{log.name}").write_bytes(log.read_bytes())


def _measure(event: str, kind: str, options: list[str], job: str, tmp: Path) -> tuple[float, ...]:
    if True:
        out = tmp
        logs = [out / f"{a}.log" for a in ADDRESSES]
        env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2",
               "RENDEZVOUS_RUNTIME_DIR": str(out / "run")}
        daemons = []
        for address, log in zip(ADDRESSES, logs):
            argv = [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--job", job,
                    "--address", address, "--timeout", "120", "--log-format", "plain", *options,
                    "--", *command(kind, out)]
            with open(log, "w") as f:
                daemons.append(subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT))
        try:
            wait_for(lambda: training(logs, kind, 1), "both commands training", logs)
            first = [commands_of(d.pid) for d in daemons]
            assert all(len(c) == 1 for c in first), first
            began = time.monotonic()
            if event == "stop":
                for d in daemons:
                    d.send_signal(signal.SIGTERM)
                end = wait_for(lambda: all(d.poll() is not None for d in daemons)
                               and not any(alive(c[0]) for c in first), "the daemons exiting", logs)
                return (end - began,)
            os.kill(first[1][0], signal.SIGKILL)
            stopped = wait_for(lambda: not alive(first[0][0]), "the other command stopping", logs)
            restarted = wait_for(lambda: all(commands_of(d.pid) and commands_of(d.pid) != c
                                             for d, c in zip(daemons, first)), "round 2 starting", logs)
            trained = wait_for(lambda: training(logs, kind, 2), "round 2 training", logs)
            return stopped - began, restarted - began, trained - began
        finally:
            for d in daemons:
                if d.poll() is None:
                    d.send_signal(signal.SIGINT)
            for d in daemons:
                try:
                    d.wait(30)
                except subprocess.TimeoutExpired:
                    d.kill()
                    d.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("event", choices=("abort", "stop"))
    p.add_argument("kind", choices=("plain", "helper", "trainer"))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--keep-logs", type=Path, metavar="DIR", help="copy the daemons' logs of every run here")
    argv = sys.argv[1:]
    options = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.options = options  # after --: options for every `rendezvous join`
    results = []
    names = ("stopped", "restarted", "training")
    for run in range(args.runs):
        figures = one_run(args.event, args.kind, args.options, args.keep_logs)
        results.append(figures)
        print(f"run {run + 1}: " + ", ".join(f"{n} {f:.2f} s" for n, f in zip(names, figures)), flush=True)
    medians = [statistics.median(column) for column in zip(*results)]
    print(f"{args.event} {args.kind} {' '.join(args.options)}: median "
          + ", ".join(f"{n} {m:.2f} s" for n, m in zip(names, medians))
          + f" (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
