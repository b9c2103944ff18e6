"""A command's whole process tree is its unit, with real `rendezvous join` processes on
127.0.0.x: a wrapper that does not exec, a daemon killed with -9 under a command that left
a child behind, and --abort-grace for a command that ignores SIGTERM."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

import pytest

from peers import alive, join_argv, leaves_behind, start_peer, running, wait_gone
from paths import SUPPORT

SLOW_EXIT = str(SUPPORT / "slow_exit.py")
TIMINGS = ["--liveness-timeout", "1.5", "--timings", "keepalive=1,suspect-after=1,end-grace=0.5,conflict-linger=0.2"]
ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


@pytest.fixture
def job() -> str:
    return f"t-{secrets.token_hex(4)}"


def start(tmp_path: Path, job: str, address: str, command: list[str], options=(), expect: int = 3):
    argv = join_argv(expect, job, tmp_path, address=address, options=[*TIMINGS, *options], command=command)
    return start_peer(argv, tmp_path, f"peer-{address}")


def starts(out: Path, round_: int) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in out.glob(f"*-{round_}.json")), key=lambda r: r["rank"])


def wait_for_starts(out: Path, round_: int, count: int, peers, timeout: float = 40) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(starts(out, round_)) < count:
        if time.monotonic() > deadline or any(p.proc.poll() is not None for p in peers):
            logs = "\n".join(p.log for p in peers)
            raise AssertionError(f"round {round_}: {len(starts(out, round_))} of {count} commands started\n{logs}")
        time.sleep(0.05)
    return starts(out, round_)



def test_a_killed_wrapper_restarts_the_round_and_the_job_completes_everywhere(tmp_path, job):
    """`sh -c 'python child.py; exit $?'`, the child holding its TF port and taking 2 s to
    obey SIGTERM: kill -9 of one shell ends the round on every node, each waits for its
    child to let go of the port, and the next round takes the same ports and completes."""
    out = tmp_path / "out"
    out.mkdir()
    command = ["sh", "-c", f"{sys.executable} {SLOW_EXIT} {out} --term-delay 2; exit $?"]
    peers = [start(tmp_path, job, a, command, options=["--abort-grace", "10"]) for a in ADDRESSES]
    first = wait_for_starts(out, 1, 3, peers)
    os.kill(first[1]["ppid"], signal.SIGKILL)  # the shell, not the child holding the port
    for peer in peers:
        assert peer.wait() == 0, peer.log
    second = starts(out, 2)
    assert len(second) == 3 and starts(out, 3) == []
    assert sorted(r["port"] for r in second) == sorted(r["port"] for r in first)
    for record in first:
        assert not alive(record["pid"])
    assert "command exited with code 137" in peers[1].log, peers[1].log


def test_a_daemon_killed_with_sigkill_leaves_nothing_of_its_commands_tree(tmp_path, job):
    seconds = f"{300 + secrets.randbelow(10**4) / 1e4:.4f}"  # finds this test's own sleep
    command = ["sh", "-c", f"sleep {seconds} & wait"]
    stop_grace = 2.0
    peer = start(tmp_path, job, "127.0.0.2", command, options=["--stop-grace", str(stop_grace)], expect=1)
    deadline = time.monotonic() + 40
    while not running(f"sleep\0{seconds}"):
        assert time.monotonic() < deadline and peer.proc.poll() is None, peer.log
        time.sleep(0.02)
    [sleep] = running(f"sleep\0{seconds}")
    peer.proc.kill()
    peer.proc.wait()
    # the gate SIGKILLs at once; it is given what a stop of the daemon would take
    assert wait_gone(sleep, timeout=stop_grace), f"sleep {seconds} outlived its killed daemon"
    assert not running(f"sleep\0{seconds}")


def test_abort_grace_bounds_an_aborted_rounds_command_that_ignores_sigterm(tmp_path, job):
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, SLOW_EXIT, str(out), "--ignore-term"]
    options = ["--stop-grace", "60", "--abort-grace", "0.5"]
    peers = [start(tmp_path, job, a, command, options=options, expect=2) for a in ADDRESSES[:2]]
    first = wait_for_starts(out, 1, 2, peers)
    os.kill(first[1]["pid"], signal.SIGKILL)
    for peer in peers:
        assert peer.wait() == 0, peer.log  # long before --stop-grace would have passed
    assert len(starts(out, 2)) == 2
    assert "the command ignored SIGTERM for 0.5s: SIGKILL" in peers[0].log, peers[0].log


@pytest.mark.parametrize("exit_code, options", [
    (0, ["--stop-grace", "5", "--abort-grace", "0.5"]),
    (3, ["--stop-grace", "0.5", "--abort-grace", "5", "--max-restarts", "0"]),
])
def test_what_a_finished_command_left_behind_gets_the_grace_of_its_end(tmp_path, job, exit_code, options):
    """A command that exits leaving a child that ignores SIGTERM: the daemon's gate kills the
    child after --stop-grace when the command exited 0, after --abort-grace when it failed."""
    seconds = f"{300 + secrets.randbelow(10**6) / 10**6:.6f}"
    started = tmp_path / "started"
    command = leaves_behind(seconds, exit_code, tmp_path / "ready", first=f"date +%s.%N > {started}; ")
    peer = start(tmp_path, job, ADDRESSES[0], command, options=options, expect=1)
    assert peer.wait(timeout=60) == exit_code, peer.log
    assert time.time() - float(started.read_text()) >= 5.0, peer.log  # the 5 s grace, not 0.5 (nor 3)
    assert not running(f"sleep\0{seconds}")
