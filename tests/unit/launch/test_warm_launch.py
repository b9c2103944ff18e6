"""--prewarm with real processes: a script or module run by the warm interpreter sees what it
sees when started the plain way (its name, file, argv, sys.path, environment, process group,
command line), ends the same way (exit code, traceback, SIGTERM), and a warm interpreter that
cannot run it gives way to the plain start, saying why."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

from patience import wait_until
from peers import alive, wait_gone
from rendezvous.launch import gate
from rendezvous.launch.launcher import Launcher

APP = Path(__file__).resolve().parents[2] / "support" / "warm_app"
SHOW = APP / "show.py"
MARKER = ("warm_marker",)  # a module of the app's directory, imported ahead by the warm start


def launch(command, modules=(), *, stop_after=None, before_release=None):
    """Run `command` through a launcher (warm with `modules`); its exit code."""
    async def scenario():
        launcher = Launcher()
        await launcher.prepare(command, modules)
        if before_release is not None:
            await asyncio.to_thread(before_release, launcher)
        await launcher.arm(command, {"ROUND_VAR": "given at the release"})
        launcher.fire(0.0)
        if stop_after is not None:
            await asyncio.to_thread(stop_after, launcher)
            return await launcher.stop(5.0)
        return await launcher.wait()
    return asyncio.run(scenario())


def both(tmp_path, command_of_out, **kw):
    """The command's record and exit code, warm then plain."""
    results = []
    out = tmp_path / "out.json"  # one path: the command lines compared are the same
    for modules in (MARKER, ()):
        code = launch(command_of_out(out), modules, **kw)
        results.append((json.loads(out.read_text()) if out.exists() else None, code))
        out.unlink(missing_ok=True)
    return results


def test_a_script_started_warm_sees_what_it_sees_started_plain(tmp_path):
    def command(out):
        return [sys.executable, "-u", str(SHOW), str(out), "ok", "--flag"]
    (warm, warm_code), (plain, plain_code) = both(tmp_path, command)
    assert warm["warm_marker"] and not plain["warm_marker"]
    assert warm_code == plain_code == 0
    for seen in (warm, plain):
        del seen["warm_marker"], seen["pid"]
    assert warm == plain
    assert warm["name"] == "__main__" and warm["file"] == str(SHOW) and warm["neighbour"] == "neighbour"
    assert warm["argv"][0] == str(SHOW) and warm["argv"][2:] == ["ok", "--flag"]
    assert warm["cmdline"][0] == sys.executable and warm["cmdline"][-2:] == ["ok", "--flag"]  # what ps shows
    assert warm["round_var"] == "given at the release" and warm["pgid_is_pid"] and warm["unbuffered"]
    assert warm["marker_set"] == "by warm_marker"  # what an import set stays set
    assert warm["mask"] == [] and warm["path0"] == str(APP) and warm["doc"].startswith("A user's script")


def test_a_package_run_with_dash_m_started_warm_runs_as_it_does_plain(tmp_path, monkeypatch):
    monkeypatch.chdir(APP)  # `python -m pkg` finds pkg in the working directory
    (warm, warm_code), (plain, plain_code) = both(tmp_path, lambda out: [sys.executable, "-m", "pkg", str(out)])
    assert warm.pop("warm_marker") and not plain.pop("warm_marker")
    assert warm == plain and warm_code == plain_code == 0
    assert warm["name"] == "__main__" and warm["part"] == "relative" and warm["argv"][0] == str(APP / "pkg" / "__main__.py")


def test_a_console_script_whose_shebang_names_python_starts_warm(tmp_path):
    app = tmp_path / "app"
    shutil.copytree(APP, app)
    tool = app / "tool"
    tool.write_text(f"#!{sys.executable}\n" + SHOW.read_text())
    tool.chmod(0o755)
    (warm, _), (plain, _) = both(tmp_path, lambda out: [str(tool), str(out), "ok"])
    assert warm.pop("warm_marker") and not plain.pop("warm_marker")
    warm.pop("pid"), plain.pop("pid")
    assert warm == plain and warm["cmdline"][:2] == [sys.executable, str(tool)]


def test_exit_codes_and_tracebacks_are_the_plain_starts(tmp_path, capfd):
    (_, warm_code), (_, plain_code) = both(tmp_path, lambda out: [sys.executable, str(SHOW), str(out), "exit:3"])
    assert warm_code == plain_code == 3
    tracebacks = []
    for modules in (MARKER, ()):
        capfd.readouterr()
        assert launch([sys.executable, str(SHOW), str(tmp_path / "r.json"), "raise"], modules) == 1
        tracebacks.append(capfd.readouterr().err)
    assert tracebacks[0] == tracebacks[1], tracebacks
    assert tracebacks[0].startswith("Traceback") and "ValueError: the user's error" in tracebacks[0]
    assert "<string>" not in tracebacks[0]


def test_sigterm_of_a_stop_reaches_the_warm_command(tmp_path):
    def running(out):
        return lambda launcher: wait_until(lambda: out.exists(), "the command started")
    codes = []
    for modules in (MARKER, ()):
        out = tmp_path / f"sleep-{len(modules)}.json"
        codes.append(launch([sys.executable, str(SHOW), str(out), "sleep"], modules, stop_after=running(out)))
        wait_gone(json.loads(out.read_text())["pid"])
    assert codes == [128 + signal.SIGTERM] * 2


def test_a_warm_interpreter_that_cannot_import_a_module_gives_way_to_the_plain_start(tmp_path, capfd):
    out = tmp_path / "out.json"
    assert launch([sys.executable, str(SHOW), str(out), "exit:0"], ("no_such_module_xyz",)) == 0
    assert not json.loads(out.read_text())["warm_marker"]
    err = capfd.readouterr().err
    assert "cannot import no_such_module_xyz: ModuleNotFoundError" in err and "starting the command without it" in err


def test_a_warm_interpreter_killed_before_the_release_gives_way_to_the_plain_start(tmp_path, capfd):
    out = tmp_path / "out.json"

    def kill_warm(launcher):
        pid = wait_until(launcher.warm_pid, "the warm interpreter")
        os.kill(pid, signal.SIGKILL)
        wait_gone(pid)
    assert launch([sys.executable, str(SHOW), str(out), "exit:4"], MARKER, before_release=kill_warm) == 4
    assert not json.loads(out.read_text())["warm_marker"]
    assert "the warm interpreter ended before its release: starting the command without it" in capfd.readouterr().err


def test_a_round_called_off_before_the_release_ends_the_warm_interpreter(tmp_path):
    async def scenario():
        launcher = Launcher()
        command = [sys.executable, str(SHOW), str(tmp_path / "never.json"), "ok"]
        await launcher.prepare(command, MARKER)
        pid = await asyncio.to_thread(wait_until, launcher.warm_pid, "the warm interpreter")

        def shown():
            return [os.fsdecode(w) for w in Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")]
        # ps shows the command while it waits (once the bootstrap wrote it over its own)
        await asyncio.to_thread(wait_until, lambda: shown() == command, lambda: f"{shown()[:3]} shown")
        code = await launcher.stop(1.0)
        return pid, code
    pid, code = asyncio.run(scenario())
    assert code == 125 and wait_gone(pid) and not alive(pid)
    assert not (tmp_path / "never.json").exists()


def test_a_warm_interpreter_dies_with_its_gate_before_the_release(tmp_path):
    # the gate's parent-death signal (the daemon died, even by kill -9) ends the gate before
    # the release; the warm interpreter's own parent-death signal then ends it
    async def scenario():
        launcher = Launcher()
        await launcher.prepare([sys.executable, str(SHOW), str(tmp_path / "never.json"), "ok"], MARKER)
        pid = await asyncio.to_thread(wait_until, launcher.warm_pid, "the warm interpreter")
        os.kill(launcher._process.pid, gate.KILL)
        await launcher.wait()
        return pid
    pid = asyncio.run(scenario())
    assert wait_gone(pid), "the warm interpreter outlived its gate"
    assert not (tmp_path / "never.json").exists()


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_a_warm_interpreter_killed_or_stopped_before_the_release_starts_the_command_plain_and_says_so(
        tmp_path, caplog, how):
    # stopped: the gate waits a fifth of the liveness timeout for its answer, then kills it
    out = tmp_path / "out.json"
    warm = []

    def hit_warm(launcher):
        warm.append(wait_until(launcher.warm_pid, "the warm interpreter"))
        os.kill(warm[0], how)
    with caplog.at_level(logging.INFO, logger="rendezvous.launch.launcher"):
        assert launch([sys.executable, str(SHOW), str(out), "exit:4"], MARKER, before_release=hit_warm) == 4
    assert not json.loads(out.read_text())["warm_marker"] and wait_gone(warm[0])
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("starting ")]
    assert len(started) == 1 and not started[0].endswith(", warm)"), started
    assert "the warm interpreter was not used" in caplog.text


def test_the_start_line_says_warm_when_the_command_runs_in_the_warm_interpreter(tmp_path, caplog):
    out = tmp_path / "out.json"
    with caplog.at_level(logging.INFO, logger="rendezvous.launch.launcher"):
        assert launch([sys.executable, str(SHOW), str(out), "exit:0"], MARKER) == 0
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("starting ")]
    assert json.loads(out.read_text())["warm_marker"]
    assert len(started) == 1 and started[0].endswith(f"(pid {json.loads(out.read_text())['pid']}, warm)"), started
