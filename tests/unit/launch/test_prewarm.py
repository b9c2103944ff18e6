"""Which commands start warm, and how (rendezvous.launch.prewarm.plan), and --prewarm's values."""

from __future__ import annotations

import sys

import pytest

from rendezvous.config.checks import prewarm_problem
from rendezvous.launch.prewarm import AUTO_MODULES, TRAINER_MODULES, WarmPlan, modules_for, plan

PY = sys.executable


@pytest.mark.parametrize("command, expected", [
    ([PY, "train.py", "--epochs", "3"], WarmPlan((PY,), "file", "train.py", 2, ())),
    ([PY, "-u", "-W", "ignore", "train.py", "x"], WarmPlan((PY, "-u", "-W", "ignore"), "file", "train.py", 5, ())),
    ([PY, "-Wignore", "-X", "dev", "t.py"], WarmPlan((PY, "-Wignore", "-X", "dev"), "file", "t.py", 5, ())),
    (["python3", "-u", "-m", "trainer", "--threads", "1"], WarmPlan(("python3", "-u"), "module", "trainer", 4, ())),
    (["python3", "-mtrainer", "a"], WarmPlan(("python3",), "module", "trainer", 2, ())),
    (["python3", "-um", "trainer"], WarmPlan(("python3", "-u"), "module", "trainer", 3, ())),
    (["python3.11", "--check-hash-based-pycs", "never", "t.py"],
     WarmPlan(("python3.11", "--check-hash-based-pycs", "never"), "file", "t.py", 4, ())),
    (["python", "--", "-weird.py"], WarmPlan(("python", "--"), "file", "-weird.py", 3, ())),
])
def test_a_python_running_a_script_or_a_module_starts_warm(command, expected):
    found = plan(command)
    assert found == WarmPlan(expected.interpreter, expected.mode, expected.target, expected.rest, tuple(command))


@pytest.mark.parametrize("command", [
    [PY, "-c", "print(1)"], [PY, "-uc", "print(1)"], [PY], [PY, "-u"], [PY, "-"], [PY, "--help-all"],
    ["sh", "-c", "python train.py"], ["sleep", "1"], [],
])
def test_other_commands_start_the_plain_way(command):
    assert plan(command) is None


def test_a_script_whose_shebang_names_python_starts_warm(tmp_path):
    script = tmp_path / "tool"
    script.write_text(f"#!{PY} -u\nprint(1)\n")
    env_script = tmp_path / "envtool"
    env_script.write_text("#!/usr/bin/env python3\nprint(1)\n")
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\necho 1\n")
    assert plan([str(script), "a"]) == WarmPlan((PY, "-u"), "file", str(script), 1, (PY, "-u", str(script), "a"))
    assert plan([str(env_script)]) == WarmPlan(("/usr/bin/env", "python3"), "file", str(env_script), 1,
                                               ("/usr/bin/env", "python3", str(env_script)))
    assert plan([str(shell)]) is None


def test_prewarm_values():
    assert modules_for(None) == (AUTO_MODULES, True)
    assert modules_for("auto") == (AUTO_MODULES, True)
    assert modules_for("none") == ((), False)
    assert modules_for(None, [PY, "-m", "trainer", "--epochs", "1"]) == (TRAINER_MODULES, True)
    assert modules_for("auto", [PY, "train.py"]) == (AUTO_MODULES, True)
    assert modules_for("tensorflow, numpy") == (("tensorflow", "numpy"), False)
    for good in (None, "auto", "none", "tensorflow", "tensorflow,numpy", "a.b_c"):
        assert prewarm_problem(good) is None
    for bad in ("", "tensor flow", "1abc", "a,,b", "import os;", 3):
        problem = prewarm_problem(bad)
        assert problem is not None and repr(bad) in problem
