"""The trainer's temporary directory is gone however the trainer ends itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

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

