"""scripts/demo.py: its exit status says whether every peer succeeded, and its summary
shows the TF_CONFIG each peer logged."""

from __future__ import annotations

import importlib.util
import io
import json

import pytest
from peers import run_join
from paths import REPO

DEMO = REPO / "scripts" / "demo.py"


@pytest.fixture(scope="module")
def demo():
    spec = importlib.util.spec_from_file_location("demo", DEMO)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "codes, status",
    [
        ([0, 0], 0),
        ([0, 1], 1),
        ([0, -9], 137),  # a peer killed by SIGKILL: not a success
        ([-15, 0], 143),
        ([2, -2], 130),
        ([0], 0),
    ],
)
def test_exit_status_maps_signal_deaths_like_a_shell(demo, codes, status):
    assert demo.exit_status(codes) == status


class FakePeer:
    """A `rendezvous join` that prints `output` and ends with a given return code."""

    codes: list[int] = []
    output = b""

    def __init__(self, argv, **kwargs):
        self.stdout = io.BytesIO(FakePeer.output)
        self.returncode = FakePeer.codes.pop(0)

    def wait(self):
        return self.returncode

    def terminate(self):
        pass


def fake_run(demo, monkeypatch, tmp_path, codes, output=b""):
    FakePeer.codes = list(codes)
    FakePeer.output = output
    monkeypatch.setattr(demo.subprocess, "Popen", FakePeer)
    monkeypatch.setattr(demo.tempfile, "mkdtemp", lambda prefix: str(tmp_path))
    monkeypatch.setattr(demo.sys, "argv", ["demo.py", "--peers", str(len(codes))])


def test_demo_fails_when_a_peer_died_of_a_signal(demo, monkeypatch, tmp_path, capsys):
    fake_run(demo, monkeypatch, tmp_path, [0, -9])
    assert demo.main() == 137
    assert "exit code 137" in capsys.readouterr().out


def test_demo_succeeds_when_every_peer_did(demo, monkeypatch, tmp_path):
    fake_run(demo, monkeypatch, tmp_path, [0, 0])
    assert demo.main() == 0


@pytest.fixture(scope="module")
def frozen_line() -> str:
    """The line a real `rendezvous join` logs when its round is frozen."""
    result = run_join("--expect", "1", "--log-format", "plain", "--", "true", timeout=60)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "TF_CONFIG=" in line]
    return line


def test_the_summary_finds_the_tf_config_that_join_logs(demo, frozen_line):
    match = demo.TF_CONFIG_LINE.search(frozen_line)
    assert match is not None
    assert (match[1], match[2]) == ("0", "1")
    assert json.loads(match[3])["task"] == {"type": "worker", "index": 0}


def test_the_summary_shows_each_peers_tf_config(demo, monkeypatch, tmp_path, capsys, frozen_line):
    fake_run(demo, monkeypatch, tmp_path, [0, 0], output=f"{frozen_line}\n".encode())
    demo.main()
    out = capsys.readouterr().out.split("==== summary ====")[1]
    assert "never got a TF_CONFIG" not in out
    assert out.count('127.0.0.2: worker 0 of 1, TF_CONFIG {"cluster"') == 1
