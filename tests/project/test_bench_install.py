"""bench/compare.py's agents run rendezvous as users install it: a wheel of the checkout in a
venv of its own, with no import hook at interpreter start (an editable install has one)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from paths import REPO

sys.path.insert(0, str(REPO / "bench"))

from comparison.install import install  # noqa: E402


@pytest.mark.install
def test_the_agents_run_an_installed_wheel_with_no_import_hook(tmp_path):
    programs = install(tmp_path)
    venv = tmp_path / "venv"
    assert Path(programs.python) == venv / "bin" / "python"

    found = subprocess.run(
        [programs.python, "-c", "import json, sys, rendezvous, trainer; "
         "print(rendezvous.__file__); print(trainer.__file__); "
         "print(json.dumps([getattr(f, '__module__', '') for f in sys.meta_path]))"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, check=True,
    ).stdout.splitlines()
    assert all(Path(path).is_relative_to(venv) for path in found[:2]), found
    assert not any("editable" in name for name in json.loads(found[2])), found[2]
    assert any(venv.glob("lib/python*/site-packages/rendezvous/cli/__pycache__/main.*.pyc"))  # compiled

    version = subprocess.run([programs.rendezvous, "--version"], capture_output=True, text=True,
                             timeout=60, cwd=tmp_path, check=True)
    assert "0." in version.stdout + version.stderr
    assert Path(programs.rendezvous).read_text().startswith(f"#!{programs.python}\n")

    if importlib.util.find_spec("torch") is None:
        assert programs.torchrun is None and "torch is not installed" in programs.torchrun_missing
    else:
        assert programs.torchrun == str(venv / "bin" / "torchrun")
        assert Path(programs.torchrun).read_text().startswith(f"#!{programs.python}\n")
