"""The trainer's temporary directory is gone however the trainer ends itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from paths import REPO


PROGRAM = """
import sys, tempfile
from trainer import scratch
scratch.use_own_directory()
with tempfile.NamedTemporaryFile(suffix=".py", delete=False) as f:  # as autograph does
    print(f.name, flush=True)
if sys.argv[1] == "leave":
    scratch.leave(7)
sys.exit(0)
"""


@pytest.mark.parametrize("way, code", [("leave", 7), ("exit", 0)])
def test_nothing_is_left_in_the_temporary_directory(tmp_path, way, code):
    done = subprocess.run([sys.executable, "-c", PROGRAM, way], capture_output=True, text=True,
                          env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, cwd=REPO)
    assert done.returncode == code, done.stderr
    assert done.stdout.startswith(str(tmp_path) + "/trainer-")  # the file went where it should
    assert list(tmp_path.iterdir()) == []



HOLD = """
import sys, tempfile, time
from trainer import scratch
scratch.use_own_directory()
print(tempfile.gettempdir(), flush=True)
time.sleep(60)
"""


def hold(tmp_path):
    """A trainer-like process that made its directory and lives on; (process, directory)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True,
                            env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, cwd=REPO)
    directory = Path(proc.stdout.readline().strip())
    assert directory.parent == tmp_path and directory.name.startswith("trainer-"), directory
    (directory / "generated.py").write_text("x = 1\n")
    return proc, directory


def test_the_next_trainer_removes_what_a_killed_one_left_and_nothing_else(tmp_path):
    killed, abandoned = hold(tmp_path)
    live, in_use = hold(tmp_path)
    others = [tmp_path / "trainer-file", tmp_path / "trainer.d", tmp_path / "mine"]
    others[0].write_text("not a directory")
    others[1].mkdir()
    others[2].mkdir()
    try:
        killed.kill()  # SIGKILL: nothing of its own runs
        killed.wait()
        assert abandoned.exists()
        done = subprocess.run([sys.executable, "-c", PROGRAM, "exit"], capture_output=True, text=True,
                              env={"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}, cwd=REPO)
        assert done.returncode == 0, done.stderr
        assert not abandoned.exists()
        assert (in_use / "generated.py").exists()  # its owner lives
        assert sorted(tmp_path.iterdir()) == sorted([in_use, *others])
    finally:
        live.kill()
        live.wait()
