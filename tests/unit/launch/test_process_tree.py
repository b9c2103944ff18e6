"""The command's whole process tree is its unit, with real processes: a stop, the command's own
end and the daemon's death end every process of it, and the launcher waits for all of them."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from peers import alive, leaves_behind, running, wait_gone
from rendezvous.launch import gate
from rendezvous.launch.launcher import Launcher
from paths import SUPPORT

SLOW_EXIT = str(SUPPORT / "slow_exit.py")



async def until(condition, deadline: float, what: str):
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


def unique_seconds() -> str:
    """A sleep duration no other process uses: it finds the test's own `sleep`."""
    return f"{300 + int.from_bytes(os.urandom(3), 'big') / 1e4:.4f}"


def records(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in out.glob("*.json")]


def test_a_stop_waits_for_the_child_of_a_wrapper_that_does_not_exec(tmp_path):
    """`sh -c 'python child.py; exit $?'`: SIGTERM ends the shell at once, its child holds on
    for a second; the stop returns only when the child is gone too."""

    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", f'{sys.executable} {SLOW_EXIT} {tmp_path} --term-delay 1; exit $?'], {})
        launcher.fire(time.time())
        await until(lambda: records(tmp_path), time.monotonic() + 30, "the child never started")
        code = await launcher.stop(grace=10)
        return code, records(tmp_path)[0]["pid"], alive(records(tmp_path)[0]["pid"])

    code, child, child_alive = asyncio.run(scenario())
    assert not child_alive, "the stop returned while the wrapper's child still ran"
    assert code == 128 + signal.SIGTERM


def test_a_killed_wrapper_ends_once_its_orphaned_child_is_gone(tmp_path):
    """kill -9 of the wrapper: its child is the gate's now, gets SIGTERM, SIGKILL after the
    abort grace (the shell died of a signal: a failure) since it ignores SIGTERM; the command's
    end is the shell's, 137."""

    async def scenario():
        launcher = Launcher(abort_grace=0.5)
        await launcher.arm(["sh", "-c", f'{sys.executable} {SLOW_EXIT} {tmp_path} --ignore-term; exit $?'], {})
        launcher.fire(time.time())
        await until(lambda: records(tmp_path), time.monotonic() + 30, "the child never started")
        record = records(tmp_path)[0]
        os.kill(record["ppid"], signal.SIGKILL)
        code = await asyncio.wait_for(launcher.wait(), 30)
        return code, record["pid"]

    code, child = asyncio.run(scenario())
    assert code == 128 + signal.SIGKILL
    assert not alive(child)


def test_a_stop_ends_a_process_that_left_the_commands_session():
    """setsid and a double fork leave the command's group and session, not the gate's tree."""
    seconds = unique_seconds()

    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", f"setsid sh -c 'sleep {seconds} &'; sleep 60"], {})
        launcher.fire(time.time())
        await until(lambda: running(f"sleep\0{seconds}"), time.monotonic() + 30, "the escaping sleep never ran")
        [escaped] = running(f"sleep\0{seconds}")
        assert os.getpgid(escaped) != launcher.pid
        return await launcher.stop(grace=5), escaped

    code, escaped = asyncio.run(scenario())
    assert code == 128 + signal.SIGTERM
    assert not alive(escaped)


def test_sigkill_after_the_grace_reaches_every_process_of_the_tree(tmp_path):
    seconds = unique_seconds()
    script = f"trap '' TERM; sh -c \"trap '' TERM; sleep {seconds}\" & wait"

    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", script], {})
        launcher.fire(time.time())
        await until(lambda: running(f"sleep\0{seconds}"), time.monotonic() + 30, "the sleep never ran")
        began = time.monotonic()
        code = await launcher.stop(grace=0.3)
        return code, time.monotonic() - began

    code, took = asyncio.run(scenario())
    assert code == 128 + signal.SIGKILL
    assert took >= 0.3 and not running(f"sleep\0{seconds}")


def test_what_a_finished_command_left_behind_is_ended_before_its_end_is_told(tmp_path):
    seconds = unique_seconds()

    async def scenario():
        launcher = Launcher(abort_grace=0.2)
        await launcher.arm(leaves_behind(seconds, 3, tmp_path / "ready"), {})
        launcher.fire(time.time())
        return await asyncio.wait_for(launcher.wait(), 30)

    assert asyncio.run(scenario()) == 3
    assert not running(f"sleep\0{seconds}")


@pytest.mark.parametrize("exit_code, stop_grace, abort_grace", [(0, 4.0, 0.2), (3, 0.2, 4.0)])
def test_what_a_command_left_behind_gets_the_grace_of_how_the_command_ended(exit_code, stop_grace, abort_grace,
                                                                          tmp_path):
    """--stop-grace after an exit 0 (the round may complete), --abort-grace after a failure
    (the round is aborted): a leftover that ignores SIGTERM is killed after the one that applies."""
    seconds = unique_seconds()

    async def scenario():
        launcher = Launcher(stop_grace=stop_grace, abort_grace=abort_grace)
        await launcher.arm(leaves_behind(seconds, exit_code, tmp_path / "ready"), {})
        # from before the start: the grace runs from the command's exit, which may come before
        # this test sees the sleep running
        began = time.monotonic()
        launcher.fire(time.time())
        await until(lambda: running(f"sleep\0{seconds}"), time.monotonic() + 30, "the sleep never ran")
        code = await asyncio.wait_for(launcher.wait(), 60)
        return code, time.monotonic() - began

    code, took = asyncio.run(scenario())
    assert code == exit_code
    assert took >= 4.0 and not running(f"sleep\0{seconds}")  # the 4 s grace, not 0.2 (nor 3)


def test_the_pid_and_group_are_the_commands_and_a_stopped_command_is_seen():
    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sleep", "60"], {})
        launcher.fire(time.time())
        gate_pid = launcher._process.pid
        await until(lambda: launcher.pid != gate_pid, time.monotonic() + 30, "the command never started")
        pid = launcher.pid
        assert os.getpgid(pid) == pid and Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x0060\x00"
        assert launcher.stopped_since(None, 1.0) is None
        os.kill(pid, signal.SIGSTOP)
        await until(lambda: launcher.stopped_since(None, 2.0) == 2.0, time.monotonic() + 30, "not seen stopped")
        code = await launcher.stop(grace=5)  # SIGCONT after SIGTERM: the stopped command ends
        return code, pid

    code, pid = asyncio.run(scenario())
    assert code == 128 + signal.SIGTERM and not alive(pid)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGSEGV])
def test_a_command_killed_by_a_signal_leaves_its_gate_dead_of_the_same(signum, tmp_path):
    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", f"kill -{signum} $$"], {})
        launcher.fire(time.time())
        code = await launcher.wait()
        return code, launcher._process.returncode

    assert asyncio.run(scenario()) == (128 + signum, -signum)


def test_a_killed_daemon_leaves_no_process_of_its_commands_tree():
    """kill -9 of the process that runs the launcher: the gate hears of it (its parent-death
    signal) and takes the command's whole tree along, not only its direct child."""
    seconds = unique_seconds()
    helper = subprocess.Popen([sys.executable, str(SUPPORT / "spare_gate.py"), "fire", "{}",
                               "sh", "-c", f"sleep {seconds} & wait"], stdout=subprocess.PIPE, text=True)
    try:
        spare = json.loads(helper.stdout.readline())["spare"]
        deadline = time.monotonic() + 30
        while not running(f"sleep\0{seconds}"):
            assert time.monotonic() < deadline and helper.poll() is None, "the sleep never ran"
            time.sleep(0.01)
        [sleep] = running(f"sleep\0{seconds}")
    finally:
        helper.kill()
        helper.wait(10)
    # nothing waits for a grace here: SIGKILL at once, and the kernel's reaping only
    assert wait_gone(spare) and wait_gone(sleep), "the command's tree outlived its daemon"


def test_the_gate_is_import_light():
    folder = os.path.dirname(gate.__file__)
    done = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c",
                           f"import sys; sys.path.insert(0, {folder!r}); import gate"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert not imported & {"signal", "enum", "subprocess", "asyncio", "rendezvous"}, imported


def test_a_supervisor_killed_with_sigkill_leaves_none_of_its_command_behind(caplog):
    """kill -9 of the gate itself (a process found as the daemon's child): its orphans are
    still in its session, which the launcher ends."""
    seconds = unique_seconds()

    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", f"sleep {seconds} & wait"], {})
        launcher.fire(time.time())
        await until(lambda: running(f"sleep\0{seconds}"), time.monotonic() + 30, "the sleep never ran")
        shell = launcher.pid
        os.kill(launcher._process.pid, signal.SIGKILL)
        return await asyncio.wait_for(launcher.wait(), 30), shell

    code, shell = asyncio.run(scenario())
    assert code == 128 + signal.SIGKILL
    assert wait_gone(shell, timeout=30)
    # The session's SIGKILL is sent; the orphan's end is waited for, not assumed instant.
    asyncio.run(until(lambda: not running(f"sleep\0{seconds}"), time.monotonic() + 30, "the sleep lived on"))
    assert "the command's supervisor was killed" in caplog.text
