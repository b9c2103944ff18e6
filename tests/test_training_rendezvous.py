"""Real MultiWorkerMirroredStrategy training through `rendezvous join` and the bundled trainer."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time

import pytest

from peers import start_peer

pytestmark = pytest.mark.training


def train(tmp_path, addresses, trainer_options):
    job = f"train-{secrets.token_hex(3)}"
    peers = []
    for address in addresses:
        argv = [
            sys.executable, "-m", "rendezvous", "join", "--expect", str(len(addresses)),
            "--job", job, "--address", address, "--timeout", "60",
            # no command: the bundled trainer, with these options
            "--", "--threads", "1", "--result-file", str(tmp_path / f"{address}.json"), *trainer_options,
        ]
        peers.append(start_peer(argv, tmp_path, address))
    return peers


def wait_for_epoch(peers, line, timeout=300):
    """Until every peer's trainer has logged `line`; none may exit before."""
    deadline = time.monotonic() + timeout
    while not all(line in p.log for p in peers):
        assert time.monotonic() < deadline, peers[0].log
        assert all(p.proc.poll() is None for p in peers), peers[0].log
        time.sleep(0.1)


def results(tmp_path, addresses):
    return [json.loads((tmp_path / f"{a}.json").read_text()) for a in addresses]


@pytest.mark.parametrize("n", [2, 3])
def test_workers_train_one_model_together(tmp_path, n):
    addresses = [f"127.0.0.{i + 2}" for i in range(n)]
    peers = train(tmp_path, addresses, ["--epochs", "5"])
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
    summaries = results(tmp_path, addresses)
    assert [s["worker_index"] for s in summaries] == list(range(n))
    assert all(s["num_workers"] == n for s in summaries)
    assert all(s["test_accuracy"] > 0.9 for s in summaries), summaries
    # proof of synchronous training, not n models trained alone
    assert len({s["weights_sha256"] for s in summaries}) == 1
    for peer in peers:
        assert "epoch 5/5" in peer.log


def test_a_stopped_job_resumes_from_its_backup(tmp_path):
    addresses = ["127.0.0.2", "127.0.0.3"]
    backup = tmp_path / "backup"
    options = ["--epochs", "4", "--backup-dir", str(backup)]
    first = train(tmp_path, addresses, options)
    wait_for_epoch(first, "epoch 2/4")
    for peer in first:
        peer.proc.send_signal(signal.SIGTERM)
    for peer in first:
        assert peer.wait(timeout=60) != 0
    assert not any((tmp_path / f"{a}.json").exists() for a in addresses)

    second = train(tmp_path, addresses, options)
    for peer in second:
        assert peer.wait(timeout=400) == 0, peer.log
    summaries = results(tmp_path, addresses)
    assert all(s["initial_epoch"] >= 2 for s in summaries), summaries
    assert len({s["weights_sha256"] for s in summaries}) == 1
    assert "epoch 1/4" not in second[0].log


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


def test_a_killed_trainer_restarts_the_round_and_training_resumes_from_its_backup(tmp_path):
    """kill -9 of one trainer in epoch 3: every node stops its trainer, a new round forms by
    itself, and training goes on from the last saved epoch to identical weights."""
    addresses = ["127.0.0.2", "127.0.0.3"]
    options = ["--epochs", "4", "--backup-dir", str(tmp_path / "backup")]
    peers = train(tmp_path, addresses, options)
    wait_for_epoch(peers, "epoch 2/4")
    (trainer,) = children(peers[1].proc.pid)
    os.kill(trainer, signal.SIGKILL)
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
        assert "round 2 starts" in peer.log and "command exited with code 137" in peer.log
    summaries = results(tmp_path, addresses)
    assert all(s["initial_epoch"] >= 2 for s in summaries), summaries
    assert len({s["weights_sha256"] for s in summaries}) == 1
