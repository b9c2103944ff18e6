"""--prewarm with real TensorFlow: the bundled trainer and a user's own MultiWorkerMirroredStrategy
script train to identical weights started warm (TensorFlow imported before TF_CONFIG is set)
and started the plain way (--prewarm none), 2 workers on loopback."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import pytest

from peers import start_peer

pytestmark = pytest.mark.training

APP = Path(__file__).resolve().parents[2] / "support" / "warm_app"
ADDRESSES = ("127.0.0.2", "127.0.0.3")


def job(tmp_path: Path, prewarm: str, command) -> list[str]:
    """Run one 2-worker job (`command(address)` after `--`); each daemon's log."""
    name = f"pw-{secrets.token_hex(3)}"
    peers = []
    for address in ADDRESSES:
        argv = [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--job", name, "--address", address,
                "--timeout", "120", "--prewarm", prewarm, "--", *command(address)]
        peers.append(start_peer(argv, tmp_path, f"{prewarm}-{address}"))
    for peer in peers:
        assert peer.wait(timeout=600) == 0, peer.log
    return [p.log for p in peers]


def test_the_bundled_trainer_trains_to_the_same_weights_warm_and_plain(tmp_path):
    weights = {}
    for prewarm in ("auto", "none"):
        def trainer(address):
            return ["--threads", "1", "--epochs", "2", "--steps-per-epoch", "10",
                    "--result-file", str(tmp_path / f"{prewarm}-{address}.json")]
        logs = job(tmp_path, prewarm, trainer)
        assert all(("warm)" in log) == (prewarm == "auto") for log in logs), logs
        weights[prewarm] = [json.loads((tmp_path / f"{prewarm}-{a}.json").read_text())["weights_sha256"]
                            for a in ADDRESSES]
    assert weights["auto"] == weights["none"] and len(set(weights["auto"])) == 1, weights


def test_a_users_own_script_trains_to_the_same_weights_warm_and_plain(tmp_path):
    results = {}
    for prewarm in ("tensorflow", "none"):
        def script(address):
            return [sys.executable, str(APP / "user_mwms.py"), str(tmp_path / f"{prewarm}-{address}.txt")]
        logs = job(tmp_path, prewarm, script)
        assert all(("warm)" in log) == (prewarm != "none") for log in logs), logs
        results[prewarm] = [(tmp_path / f"{prewarm}-{a}.txt").read_text() for a in ADDRESSES]
    assert results["tensorflow"] == results["none"], results
    assert len(set(results["none"])) == 1 and "tf_keras" in results["none"][0], results
