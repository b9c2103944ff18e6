"""scripts/demo.py: its exit status says whether every peer succeeded."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "scripts" / "demo.py"


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
    """A `rendezvous join` that prints nothing and ends with a given return code."""

    codes: list[int] = []

    def __init__(self, argv, **kwargs):
        self.stdout = io.BytesIO(b"")
        self.returncode = FakePeer.codes.pop(0)

    def wait(self):
        return self.returncode

    def terminate(self):
        pass


def fake_run(demo, monkeypatch, tmp_path, codes):
    FakePeer.codes = list(codes)
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
