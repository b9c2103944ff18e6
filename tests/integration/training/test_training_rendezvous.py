"""Real MultiWorkerMirroredStrategy training through `rendezvous join` and the bundled trainer."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from peers import start_peer, wait_for_job

pytestmark = pytest.mark.training


def train(tmp_path, addresses, trainer_options, hosts=None):
    """`rendezvous join` of the bundled trainer on each address (in the namespaces of
    `hosts`, if given), each with its own TMPDIR (`scratch(tmp_path, address)`); the peers,
    their job's name as `job` of the first."""
    job = f"train-{secrets.token_hex(3)}"
    peers = []
    for i, address in enumerate(addresses):
        scratch(tmp_path, address).mkdir(exist_ok=True)
        argv = [
            sys.executable, "-m", "rendezvous", "join", "--expect", str(len(addresses)),
            "--job", job, "--address", address, "--timeout", "60",
            # no command: the bundled trainer, with these options
            "--", "--threads", "1", "--result-file", str(tmp_path / f"{address}.json"), *trainer_options,
        ]
        popen = hosts[i].popen if hosts else subprocess.Popen
        peers.append(start_peer(argv, tmp_path, address, popen=popen,
                                extra_env={"TMPDIR": str(scratch(tmp_path, address))}))
    peers[0].job = job
    return peers


def scratch(tmp_path, address):
    return tmp_path / f"tmp-{address}"


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


def commands(daemon: int) -> list[int]:
    """The commands a daemon runs: each under its supervisor, the daemon's child."""
    return [command for gate in children(daemon) for command in children(gate)]


def test_a_killed_trainer_restarts_the_round_and_training_resumes_from_its_backup(tmp_path):
    """kill -9 of one trainer in epoch 3: every node stops its trainer, a new round forms by
    itself, and training goes on from the last saved epoch to identical weights. The
    trainer that was stopped leaves no temporary files (TensorFlow's autograph removes its
    own only at a normal exit); what the killed one left, the next trainer on its node
    removes."""
    addresses = ["127.0.0.2", "127.0.0.3"]
    options = ["--epochs", "4", "--backup-dir", str(tmp_path / "backup")]
    peers = train(tmp_path, addresses, options)
    wait_for_epoch(peers, "epoch 2/4")
    (trainer,) = commands(peers[1].proc.pid)
    os.kill(trainer, signal.SIGKILL)
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
        assert "round 2 starts" in peer.log and "command exited with code 137" in peer.log
    summaries = results(tmp_path, addresses)
    assert all(s["initial_epoch"] >= 2 for s in summaries), summaries
    assert len({s["weights_sha256"] for s in summaries}) == 1
    assert list(scratch(tmp_path, addresses[0]).iterdir()) == []
    assert list(scratch(tmp_path, addresses[1]).iterdir()) == []


@pytest.mark.netns
def test_the_training_seen_from_a_host_outside_the_job(tmp_path, make_network):
    """Progress from every trainer reaches the coordinator, and any host can see it; the
    chief writes TensorBoard logs with the learning rate."""
    net = make_network(4)
    hosts, outsider = net.hosts[:3], net.hosts[3]
    options = ["--epochs", "20", "--steps-per-epoch", "2", "--log-dir", str(tmp_path / "tb")]
    peers = train(tmp_path, [h.address for h in hosts], options, hosts=hosts)
    job = peers[0].job

    def epochs(status):
        return [(m["progress"] or {}).get("epoch") or 0 for m in status["members"]]

    first = wait_for_job(outsider, job, lambda s: len(s["members"]) == 3 and min(epochs(s)) >= 1, timeout=120)
    assert [(m["rank"], m["address"], m["phase"], m["round"]) for m in first["members"]] == [
        (rank, host.address, "running", 1) for rank, host in enumerate(hosts)
    ]
    assert all(m["progress"]["epochs"] == 20 and m["progress"]["loss"] > 0 for m in first["members"])
    second = wait_for_job(outsider, job, lambda s: min(epochs(s)) > max(epochs(first)), timeout=60)
    assert second["round"] == 1 and all(m["phase"] in ("running", "finished") for m in second["members"])
    for peer in peers:
        assert peer.wait(timeout=300) == 0, peer.log

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "tb" / "train"), size_guidance={"tensors": 0})  # 0: keep all
    events.Reload()
    assert {"epoch_loss", "epoch_accuracy", "epoch_lr"} <= set(events.Tags()["tensors"])
    assert len(events.Tensors("epoch_lr")) == 20
