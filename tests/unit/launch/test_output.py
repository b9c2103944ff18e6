"""The command's output on its way through the daemon: passed on unchanged, its stderr's tail
kept, each round's file capped and old rounds removed; with real pipes, gates and commands."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from paths import SUPPORT
from rendezvous.core.failure import MAX_TAIL_BYTES
from rendezvous.launch.errorfile import ErrorFile
from rendezvous.launch.launcher import Launcher
from rendezvous.launch.output import OutputSettings, Pump, RoundFile, prune_rounds, round_file_path


def test_the_pump_passes_every_byte_on_and_keeps_the_tail(capfdbinary):
    read, write = os.pipe()
    pump = Pump(read)
    data = b"".join(b"line %d \x1b[31m\xff\n" % i for i in range(20_000))  # more than a pipe holds
    os.write(write, data[:1000])
    with os.fdopen(write, "wb") as f:
        f.write(data[1000:])
    pump.finish()
    assert capfdbinary.readouterr().err == data  # unchanged: invalid UTF-8 and escapes alike
    lines = pump.tail.lines()
    assert len(lines) == 40 and lines[-1] == "line 19999 \ufffd" and lines[0] == "line 19960 \ufffd"
    assert len(pump.tail._data) <= 2 * MAX_TAIL_BYTES


def test_the_pump_stops_after_the_tree_ended_even_if_a_writer_lives_on(capfd):
    read, write = os.pipe()
    pump = Pump(read)
    os.write(write, b"before the end\n")
    time.sleep(0.05)
    pump.finish()  # `write` stays open, as in a process that escaped the tree
    assert pump.tail.lines() == ("before the end",)
    os.close(write)


def test_a_round_file_keeps_the_newest_output_within_its_cap(tmp_path):
    path = tmp_path / "round-1.0.log"
    capped = RoundFile(path, 100)
    data = bytes(range(48, 48 + 70)) * 4  # 280 bytes
    for i in range(0, len(data), 30):
        capped.write(data[i:i + 30])
    capped.close()
    kept = (tmp_path / "round-1.0.log.1").read_bytes() + path.read_bytes()
    assert len(kept) <= 100 and data.endswith(kept) and len(path.read_bytes()) <= 50


def test_old_rounds_are_removed_other_files_stay(tmp_path):
    for name in ("round-1.0.log", "round-1.0.log.1", "round-2.3.log", "round-3.0.log", "round-4.1.log", "notes.txt"):
        (tmp_path / name).write_text("x")
    removed = prune_rounds(tmp_path, current=4, keep=2)
    assert sorted(p.name for p in removed) == ["round-1.0.log", "round-1.0.log.1", "round-2.3.log"]
    assert sorted(os.listdir(tmp_path)) == ["notes.txt", "round-3.0.log", "round-4.1.log"]
    assert round_file_path(tmp_path, "job", 3, 1) == tmp_path / "job" / "round-3.1.log"


SCRIPT = "for i in 1 2 3; do echo out $i; echo err $i >&2; done; echo 'ValueError: bad' >&2; exit 5"


def test_a_launcher_keeps_the_tail_and_writes_the_rounds_file(tmp_path, capfd):
    async def scenario():
        launcher = Launcher(output=OutputSettings(tmp_path / "out", "j", 1 << 20, 2))
        await launcher.arm(["sh", "-c", SCRIPT], {})
        assert launcher.record_output(round=3, rank=1) == str(tmp_path / "out" / "j" / "round-3.1.log")
        launcher.fire(time.time())
        return await launcher.wait(), launcher.tail()

    code, tail = asyncio.run(scenario())
    assert code == 5 and tail == ("err 1", "err 2", "err 3", "ValueError: bad")
    # each stream in its order; between the two, lines written at the same instant may swap
    written = (tmp_path / "out" / "j" / "round-3.1.log").read_text().splitlines()
    assert [line for line in written if line.startswith("out")] == ["out 1", "out 2", "out 3"]
    assert [line for line in written if not line.startswith("out")] == ["err 1", "err 2", "err 3", "ValueError: bad"]
    shown = capfd.readouterr()
    assert "out 1\nout 2\nout 3\n" == shown.out and "err 1\nerr 2\nerr 3\nValueError: bad\n" in shown.err


def test_without_an_output_dir_stdout_is_the_daemons_own(tmp_path):
    probe = "import os, sys; print(os.path.samestat(os.fstat(1), os.stat(sys.argv[1])))"
    out = tmp_path / "stdout"

    async def scenario():
        launcher = Launcher()
        await launcher.arm([sys.executable, "-c", probe, str(out)], {})
        launcher.fire(time.time())
        return await launcher.wait()

    with open(out, "wb") as f:
        saved = os.dup(1)
        os.dup2(f.fileno(), 1)
        try:
            assert asyncio.run(scenario()) == 0
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    assert out.read_text() == "True\n"


def test_the_tail_of_a_spare_gates_command(tmp_path):
    proc = subprocess.run([sys.executable, str(SUPPORT / "spare_gate.py"), "fire", "{}", "sh", "-c",
                           "echo one >&2; echo two >&2; kill -9 $$"], capture_output=True, text=True, timeout=60)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["spare"] is not None and lines[0]["gate"] == lines[0]["spare"]
    assert lines[-2:] == [{"code": 137}, {"tail": ["one", "two"]}]
    assert proc.stderr == "one\ntwo\n"


def test_the_error_file_is_read_only_when_it_is_a_file_of_its_own(tmp_path, caplog):
    errors = ErrorFile(tmp_path, "node")
    assert errors.read() is None and not caplog.records  # nothing written: the stderr tail is the cause
    errors.path.write_text(json.dumps({"type": "KeyError", "message": "'x'"}))
    assert errors.read().error_type == "KeyError"
    errors.path.unlink()
    os.mkfifo(errors.path)  # would block a plain open
    assert errors.read() is None
    errors.path.unlink()
    errors.path.symlink_to(tmp_path / "elsewhere")
    assert errors.read() is None
    errors.path.unlink()
    errors.path.write_text("Traceback: not JSON")
    assert errors.read() is None
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        "not a regular file; the stderr tail is the cause", "it is a symbolic link; the stderr tail is the cause",
        "not a JSON object with a type or a message; the stderr tail is the cause"]
    errors.close()
    assert not errors.path.parent.exists()


def test_an_output_dir_that_cannot_be_made_fails_before_the_command(tmp_path):
    import pytest

    from rendezvous.errors import ConfigError

    (tmp_path / "file").write_text("")

    async def scenario():
        await Launcher(output=OutputSettings(tmp_path / "file", "j")).prepare(["true"])

    with pytest.raises(ConfigError, match=r"--output-dir .*/file: cannot make .*/file/j: Not a directory"):
        asyncio.run(scenario())
