"""The trainer writes its error to $RENDEZVOUS_ERROR_FILE, for every node's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from paths import REPO
from rendezvous.core.failure import parse_error_file


def run_trainer(tmp_path, env):
    return subprocess.run([sys.executable, "-m", "trainer"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_a_configuration_error_is_written_where_the_daemon_asks(tmp_path):
    path = tmp_path / "error.json"
    done = run_trainer(tmp_path, {"TF_CONFIG": "not json", "RENDEZVOUS_ERROR_FILE": str(path)})
    assert done.returncode == 2, done.stderr
    written = json.loads(path.read_text())
    assert written["type"] == "ConfigError" and written["message"] in done.stderr
    report = parse_error_file(path.read_bytes())
    assert report is not None and report.error_type == "ConfigError"


def test_without_the_variable_nothing_is_written(tmp_path):
    done = run_trainer(tmp_path, {"TF_CONFIG": "not json", "RENDEZVOUS_ERROR_FILE": ""})
    assert done.returncode == 2, done.stderr
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".json")]
