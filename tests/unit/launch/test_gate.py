"""The command's gate (rendezvous.launch.gate): its message, and the spare that the `rendezvous`
command forks first thing, with real processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from peers import alive, wait_gone
from rendezvous.launch import gate
from rendezvous.launch.gatelink import encode
from rendezvous.launch.launcher import Launcher
from paths import SUPPORT

HELPER = str((SUPPORT / "spare_gate.py"))
SIGPIPE_BIT = 1 << (signal.SIGPIPE - 1)


def test_a_message_decodes_to_what_was_encoded():
    env = {"TF_CONFIG": '{"a": [1]}', "EQUALS": "a=b=c", "EMPTY": "", "WIDE": "caf\u00e9\n"}
    start_at, graces, argv, decoded, liveness = gate.decode(encode(1234.5, ["python", "-c", "", "x y"], env, 2.5, 0.5,
                                                                   7.5))
    assert (start_at, graces, liveness) == (1234.5, (2.5, 0.5), 7.5)
    assert gate.decode(encode(1.0, ["true"], {}, 2.5))[1] == (2.5, 2.5)  # one grace for both
    assert argv == [b"python", b"-c", b"", b"x y"]
    assert decoded == {k.encode(): v.encode() for k, v in env.items()}


@pytest.mark.parametrize("data", [
    b"",  # the pipe closed without a start: an aborted round
    b"\x00" * 35,  # shorter than the header
    encode(1.0, ["true"], {})[:-1],  # the last item not ended
    encode(1.0, ["true"], {}).replace(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00"),  # no command
    encode(1.0, ["true"], {}).replace(b"\x00\x00\x00\x01", b"\x00\x00\x00\x02"),  # more than sent
])
def test_anything_else_decodes_to_nothing(data):
    assert gate.decode(data) is None


def _helper(action: str, command: list[str], env: dict | None = None, **popen):
    environ = dict(os.environ, NOTIFY_SOCKET="/run/the-daemons-own", INHERITED="yes")
    return subprocess.Popen([sys.executable, HELPER, action, json.dumps(env or {}), *command],
                            stdout=subprocess.PIPE, text=True, env=environ, **popen)


def _line(proc: subprocess.Popen) -> dict:
    line = proc.stdout.readline()
    assert line, f"the helper exited {proc.wait(10)} without a word"
    return json.loads(line)


def _code(proc: subprocess.Popen) -> dict:
    """The exit code line, after the line with the command's pid (`fire`)."""
    line = _line(proc)
    return _line(proc) if "command" in line else line


def test_the_first_launch_runs_in_the_spare_with_the_rounds_environment(tmp_path):
    out = tmp_path / "seen"
    script = f'{{ echo "$ROUND|$INHERITED|${{NOTIFY_SOCKET-unset}}|$$"; grep SigIgn /proc/self/status; }} > {out}; exit 4'
    proc = _helper("fire", ["sh", "-c", script], {"ROUND": "3"})
    started = _line(proc)
    assert started["spare"] is not None and started["gate"] == started["spare"]
    assert started["again"] is False  # the spare is taken once: later rounds spawn theirs
    assert _code(proc) == {"code": 4}
    assert proc.wait(10) == 0
    first, ignored = out.read_text().splitlines()
    round_, inherited, notify, pid = first.split("|")
    assert (round_, inherited, notify) == ("3", "yes", "unset")
    assert int(pid) != started["spare"]  # a child of the spare, which supervises it
    assert int(ignored.split()[1], 16) & SIGPIPE_BIT == 0


def test_no_descriptor_the_daemon_inherited_reaches_the_command(tmp_path):
    out = tmp_path / "fds"
    read, write = os.pipe()
    try:
        proc = _helper("fire", ["sh", "-c", f"ls /proc/$$/fd > {out}"], pass_fds=(write,))
    finally:
        os.close(write)
    assert _line(proc)["spare"] is not None
    assert _code(proc) == {"code": 0}
    proc.wait(10)
    assert write not in {int(fd) for fd in out.read_text().split()}
    assert os.read(read, 1) == b""  # no process holds the write end any more
    os.close(read)


def test_a_spare_disarmed_before_the_start_runs_nothing(tmp_path):
    out = tmp_path / "ran"
    proc = _helper("stop", ["sh", "-c", f"touch {out}"])
    assert _line(proc)["spare"] is not None
    assert _line(proc) == {"code": gate.ABORTED}
    assert proc.wait(10) == 0
    assert not out.exists()


def test_a_command_killed_by_a_signal_reports_it_shell_style():
    proc = _helper("fire", ["sh", "-c", "kill -TERM $$"])
    assert _line(proc)["spare"] is not None
    assert _code(proc) == {"code": 128 + signal.SIGTERM}
    proc.wait(10)


@pytest.mark.parametrize("action", ["hold", "fire"])
def test_the_spare_and_its_command_die_with_a_daemon_killed_with_sigkill(action):
    # hold: the spare waits for its start; fire: it supervises a command that would run for a minute
    proc = _helper(action, ["sleep", "60"])
    spare = _line(proc)["spare"]
    pids = [spare] if action == "hold" else [spare, _line(proc)["command"]]
    assert all(alive(pid) for pid in pids)
    proc.kill()
    proc.wait(10)
    for pid in pids:
        assert wait_gone(pid), f"{'the waiting spare' if pid == spare else 'the command'} outlived its daemon"


def test_a_spawned_gate_also_gives_the_command_sigpipe_back(tmp_path):
    out = tmp_path / "status"

    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", f"grep SigIgn /proc/self/status > {out}; yes | head -1 >/dev/null"], {})
        launcher.fire(time.time())
        return await launcher.wait()

    assert asyncio.run(scenario()) == 0
    assert int(out.read_text().split()[1], 16) & SIGPIPE_BIT == 0


def test_join_with_a_command_forks_the_spare_and_launches_in_it(tmp_path):
    out = tmp_path / "pid"
    done = subprocess.run(
        [sys.executable, "-m", "rendezvous", "join", "--expect", "1", "--address", "127.0.0.9", "--job", "spare",
         "-v", "--log-format", "plain", "--", "sh", "-c", f"echo $$ > {out}"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, RENDEZVOUS_RUNTIME_DIR=str(tmp_path / "run")))
    assert done.returncode == 0, done.stderr
    pid = int(out.read_text().strip())
    spare = int(done.stderr.split("the command's gate: the spare forked at this process's start (pid ")[1].split(")")[0])
    assert pid != spare  # the command ran under the spare, in a process group of its own
