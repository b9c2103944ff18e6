"""Resume without shared storage: three hosts (network namespaces), each with a backup
directory of its own, the bundled trainer with `--sync-dir D -- --backup-dir D`."""

from __future__ import annotations

import os
import secrets
import signal
import sys

import pytest

from peers import start_peer
from test_training_rendezvous import commands, results, wait_for_epoch

pytestmark = [pytest.mark.netns, pytest.mark.training]


@pytest.mark.parametrize("victim", [0, 1], ids=["chief", "worker"])
def test_a_trainer_killed_in_epoch_3_resumes_everywhere_from_the_chiefs_backup(make_network, tmp_path, victim):
    """The chief alone writes the real checkpoint: after a trainer is killed (the chief's or
    another's), the next round gives every host the chief's files, so every worker resumes
    from the saved epoch (not 0) and all end with the same weights; after the job, every
    directory is the chief's."""
    net = make_network(3)
    job = f"s-{secrets.token_hex(4)}"
    peers = []
    for host in net.hosts:
        backup = tmp_path / f"backup-{host.index}"
        argv = [
            sys.executable, "-m", "rendezvous", "join", "--expect", "3", "--job", job, "--timeout", "60",
            "--sync-dir", str(backup), "--liveness-timeout", "2", "--stop-grace", "2",
            "--", "--threads", "1", "--epochs", "4", "--backup-dir", str(backup),
            "--result-file", str(tmp_path / f"{host.address}.json"),
        ]
        peers.append(start_peer(argv, tmp_path, host.name, popen=host.popen))
    wait_for_epoch(peers, "epoch 2/4")
    (trainer,) = commands(peers[victim].proc.pid)  # host 0 has the lowest address: the chief
    os.kill(trainer, signal.SIGKILL)
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
        assert "round 2 starts" in peer.log, peer.log
    assert "chief of the previous round" in peers[0].log, peers[0].log
    assert f"from {net.hosts[0].address}" in peers[1].log, peers[1].log
    summaries = results(tmp_path, net.addresses)
    assert all(s["initial_epoch"] >= 2 for s in summaries), summaries
    assert len({s["weights_sha256"] for s in summaries}) == 1
    copies = [sorted(p.relative_to(d) for p in d.rglob("*")) for d in (tmp_path / f"backup-{i}" for i in range(3))]
    assert copies[1] == copies[0] and copies[2] == copies[0], copies
