"""The launcher with real processes: the armed gate, the common start, stop and exit codes."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import threading
import time

import pytest

from peers import wait_gone
from rendezvous.errors import AddressError, LaunchError
from rendezvous.launch.launcher import Launcher, check_command, exit_code_of
from rendezvous.host.ports import PortReservation, reserve_again

STAMP = [sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').write(repr(time.time()))"]


def run(coro):
    return asyncio.run(coro)


def test_exit_code_of_signal_death_is_shell_style():
    assert exit_code_of(0) == 0
    assert exit_code_of(3) == 3
    assert exit_code_of(-signal.SIGTERM) == 143
    assert exit_code_of(-signal.SIGKILL) == 137


def test_check_command(tmp_path):
    plain = tmp_path / "train.py"
    plain.write_text("print('hi')")
    assert check_command(["sh"]).endswith("/sh")
    with pytest.raises(LaunchError, match="'no-such-program-xyz'"):
        check_command(["no-such-program-xyz"])
    with pytest.raises(LaunchError, match="/nonexistent/x") as missing:
        check_command(["/nonexistent/x"])
    with pytest.raises(LaunchError, match="not executable") as not_executable:
        check_command([str(plain)])
    with pytest.raises(LaunchError, match="directory") as directory:
        check_command([str(tmp_path)])
    assert (not_executable.value.exit_code, directory.value.exit_code, missing.value.exit_code) == (126, 126, 127)


def test_armed_command_starts_at_the_given_time(tmp_path):
    out = tmp_path / "stamp"

    async def scenario():
        launcher = Launcher()
        await launcher.arm([*STAMP, str(out)], {})
        await asyncio.sleep(0.3)
        assert not out.exists(), "the armed command ran before it was fired"
        start_at = time.time() + 0.4
        launcher.fire(start_at)
        assert await launcher.wait() == 0
        return start_at

    start_at = run(scenario())
    started = float(out.read_text())
    # the interpreter's own start-up comes after the exec, so only a lower bound is exact
    assert started >= start_at


def test_disarmed_command_never_runs(tmp_path):
    out = tmp_path / "stamp"

    async def scenario():
        launcher = Launcher()
        await launcher.arm([*STAMP, str(out)], {})
        return await launcher.stop(grace=1)

    assert run(scenario()) == 125
    assert not out.exists()


def test_environment_is_passed_and_output_inherited(tmp_path, capfd):
    async def scenario():
        launcher = Launcher()
        await launcher.arm(["sh", "-c", 'echo "got $RENDEZVOUS_RANK"; exit 4'], {"RENDEZVOUS_RANK": "3"})
        launcher.fire(time.time())
        return await launcher.wait()

    assert run(scenario()) == 4
    assert "got 3" in capfd.readouterr().out


def test_a_gate_prepared_at_the_round_start_waits_and_gets_the_rounds_variables_at_the_release(tmp_path, monkeypatch):
    out = tmp_path / "env"
    dump = [sys.executable, "-c", "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))", str(out)]
    monkeypatch.setenv("INHERITED", "from the daemon")
    monkeypatch.setenv("OVERRIDDEN", "old")
    round_env = {
        "TF_CONFIG": '{"cluster": {"worker": ["10.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}',
        "OVERRIDDEN": "new",
        "TRICKY": "a=b\nc\u00e9",
        "LONG": "x" * 100_000,  # more than a pipe holds (64 KiB)
    }

    async def scenario():
        launcher = Launcher()
        await launcher.prepare(dump)
        monkeypatch.setenv("INHERITED", "changed after the gate started")
        await asyncio.sleep(0.3)
        assert launcher._process.returncode is None and launcher.pid is None  # waiting, not started
        await launcher.arm(dump, round_env)
        launcher.fire(time.time())
        return await launcher.wait()

    assert run(scenario()) == 0
    seen = json.loads(out.read_text())
    assert {name: seen[name] for name in round_env} == round_env
    assert seen["INHERITED"] == "from the daemon"


def test_a_prepared_gate_stopped_before_the_freeze_never_runs_its_command(tmp_path):
    out = tmp_path / "stamp"

    async def scenario():
        launcher = Launcher()
        await launcher.prepare([*STAMP, str(out)])
        return await launcher.stop(grace=1)

    assert run(scenario()) == 125
    assert not out.exists()


@pytest.mark.parametrize("env", [{"A=B": "1"}, {"": "1"}, {"A": "nul\0inside"}])
def test_variables_the_command_cannot_get_are_refused_when_armed(env):
    async def scenario():
        launcher = Launcher()
        try:
            await launcher.arm(["true"], env)
        finally:
            await launcher.stop(grace=1)

    with pytest.raises(LaunchError, match="cannot pass the environment variable"):
        run(scenario())


def test_stop_terminates_the_whole_process_group(tmp_path):
    pids = tmp_path / "pids"

    async def scenario():
        launcher = Launcher()
        # the command starts a grandchild; both must go
        script = f'sleep 60 & echo $! > {pids}; echo $$ >> {pids}; wait'
        await launcher.arm(["sh", "-c", script], {})
        launcher.fire(time.time())
        for _ in range(100):
            if pids.exists() and len(pids.read_text().split()) == 2:
                break
            await asyncio.sleep(0.02)
        return await launcher.stop(grace=2)

    assert run(scenario()) == 143
    for pid in map(int, pids.read_text().split()):
        assert wait_gone(pid), f"process {pid} survived the stop"


def test_port_reservation_holds_the_port_on_all_interfaces():
    reservation = PortReservation()
    port = reservation.port
    with pytest.raises(AddressError, match=str(port)):
        PortReservation(port)
    probe = socket.socket()
    with pytest.raises(OSError):
        probe.bind(("127.0.0.5", port))
    probe.close()
    reservation.release()
    PortReservation(port).release()


def test_a_fixed_port_in_time_wait_can_be_reserved_but_not_a_listening_one():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the side that closes first keeps the port in TIME_WAIT
    time.sleep(0.05)
    client.close()
    with pytest.raises(AddressError, match=str(port)):
        PortReservation(port)  # still listening
    listener.close()
    PortReservation(port).release()  # only TIME_WAIT is left: the next run may take it


def run_script(path, text: str) -> int:
    """Write an executable script, start it through an armed launcher, return its exit code."""
    path.write_text(text)
    path.chmod(0o755)

    async def scenario():
        launcher = Launcher()
        await launcher.arm([str(path)], {})
        launcher.fire(time.time())
        return await launcher.wait()

    return run(scenario())


def test_a_command_the_kernel_cannot_run_exits_126_with_one_line(tmp_path, capfd):
    script = tmp_path / "train"
    assert run_script(script, "no shebang here\n") == 126
    err = capfd.readouterr().err
    assert str(script) in err and "Traceback" not in err


def test_a_script_whose_interpreter_is_missing_exits_127_naming_the_interpreter(tmp_path, capfd):
    """The script is there; what exec did not find is the interpreter its #! line names.
    Saying "No such file or directory" of a file the user can see would send them looking
    in the wrong place."""
    script = tmp_path / "train"
    assert run_script(script, "#!/nonexistent/python3\nprint('hi')\n") == 127
    err = capfd.readouterr().err
    assert f"rendezvous: cannot run {str(script)!r}: the interpreter its #! line names" in err
    assert "Traceback" not in err and "gate failed" not in err


def test_the_next_rounds_port_is_waited_for_while_it_is_still_busy():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    port = listener.getsockname()[1]
    with pytest.raises(AddressError, match=str(port)):
        reserve_again(port, wait=0.1)  # still listening when the wait is over
    closing = threading.Timer(0.2, listener.close)  # the last round's command, slow to let go
    closing.start()
    try:
        reservation = reserve_again(port, wait=60)
    finally:
        closing.join()
    assert reservation.port == port
    reservation.release()
