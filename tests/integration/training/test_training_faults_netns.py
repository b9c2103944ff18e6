"""A job of the bundled trainer on 3 hosts (network namespaces, one shared backup directory)
survives every kind of fault: each one stops the commands on every node, a new round forms
by itself, and training resumes from the last saved epoch, to identical weights.

One job takes the faults one after the other, a round each, so that TensorFlow starts
once per round and not once per fault from scratch.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
import time

import pytest

from peers import start_peer

pytestmark = [pytest.mark.netns, pytest.mark.training]

EPOCHS = 14
# Noticed in a few seconds, with room for the load of three trainers on two cores.
DAEMON = ["--liveness-timeout", "3", "--timings", "keepalive=1.5,suspect-after=1,end-grace=0.5", "--stop-grace", "3"]
TRAINER = ["--threads", "1", "--epochs", str(EPOCHS), "--steps-per-epoch", "60"]


def join(host, job, tmp_path, name, expect="3", options=()):
    argv = [
        sys.executable, "-m", "rendezvous", "join", "--expect", expect, "--job", job, "--timeout", "120",
        *DAEMON, *options,
        "--", *TRAINER, "--backup-dir", str(tmp_path / "backup"), "--result-file", str(tmp_path / f"{host.name}.json"),
    ]
    return start_peer(argv, tmp_path, name, popen=host.popen)


def rounds(log: str) -> dict[int, str]:
    """Each round's part of a daemon's log, from its freeze on."""
    parts = re.split(r"round (\d+) frozen: ", log)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def epochs_in(text: str) -> list[int]:
    return [int(e) for e in re.findall(rf"epoch (\d+)/{EPOCHS} ", text)]


def wait_for_training(peers, round_: int, timeout: float = 240) -> None:
    """Until every peer's trainer finished an epoch in `round_`."""
    deadline = time.monotonic() + timeout
    while not all(epochs_in(rounds(p.log).get(round_, "")) for p in peers):
        assert time.monotonic() < deadline, "\n".join(p.log[-3000:] for p in peers)
        assert all(p.proc.poll() is None for p in peers), "\n".join(p.log[-3000:] for p in peers)
        time.sleep(0.2)


def trainer_of(peer) -> int:
    """The daemon's command: the child of its supervisor, the daemon's child."""
    pid = peer.proc.pid
    for _ in range(2):
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            (pid,) = map(int, f.read().split())
    return pid


# Six rounds of TensorFlow on 2 shared cores: about 235 s alone on a quiet machine, more
# under the load of the whole suite; the default 300 s left too little room.
@pytest.mark.timeout(480)
def test_training_survives_each_fault_and_resumes_from_its_backup(make_network, tmp_path):
    net = make_network(3)
    job = f"t-{secrets.token_hex(3)}"
    options = ["--max-restarts", "5"]
    peers = [join(h, job, tmp_path, h.name, options=options) for h in net.hosts]
    everyone = list(peers)  # with the daemons killed and started again
    faults = {}

    wait_for_training(peers, 1)
    faults[2] = "trainer killed"
    os.kill(trainer_of(peers[1]), signal.SIGKILL)

    wait_for_training(peers, 2)
    for index, fault in ((2, "member daemon killed and started again"), (0, "coordinator killed and started again")):
        round_ = max(faults) + 1
        faults[round_] = fault
        peers[index].proc.kill()
        peers[index].wait()
        peers[index] = join(net.hosts[index], job, tmp_path, f"{net.hosts[index].name}-r{round_}", options=options)
        everyone.append(peers[index])
        wait_for_training(peers, round_)

    faults[5] = "trainer stopped"
    os.kill(trainer_of(peers[1]), signal.SIGSTOP)
    wait_for_training(peers, 5)

    faults[6] = "link down for 8 s"
    cut = net.hosts[2]
    cut.run(["ip", "link", "set", cut.interface, "down"], check=True)
    time.sleep(8)
    cut.run(["ip", "link", "set", cut.interface, "up"], check=True)

    for peer in peers:
        assert peer.wait(timeout=300) == 0, peer.log
    logs = [p.log for p in everyone]
    for round_, fault in faults.items():
        parts = [rounds(log)[round_] for log in logs if round_ in rounds(log)]
        assert len(parts) == 3, f"round {round_} after {fault}: {len(parts)} members\n" + "\n".join(logs)
        for part in parts:
            trained = epochs_in(part)
            # resumed from the saved epoch, not from 0 (at most one epoch is lost)
            assert trained and trained[0] > 1, f"round {round_} after {fault}: epochs {trained}\n{part}"
    summaries = [json.loads((tmp_path / f"{h.name}.json").read_text()) for h in net.hosts]
    assert [s["worker_index"] for s in summaries] == [0, 1, 2]
    assert len({s["weights_sha256"] for s in summaries}) == 1, summaries
    assert all(s["initial_epoch"] > 1 for s in summaries), summaries


def test_an_elastic_job_trains_on_with_fewer_workers_after_a_host_is_lost_for_good(make_network, tmp_path):
    """--expect 2:3: a host lost for good during training; the next round forms with the
    two others once the settle time passes, resumes from the backup on 2 workers (the
    worker count changes), and finishes with identical weights."""
    net = make_network(3)
    job = f"e-{secrets.token_hex(3)}"
    options = ["--settle", "1"]
    peers = [join(h, job, tmp_path, h.name, expect="2:3", options=options) for h in net.hosts]
    wait_for_training(peers, 1)
    lost = net.hosts[2]
    lost.run(["ip", "link", "set", lost.interface, "down"], check=True)  # gone, never back
    for peer in peers[:2]:
        assert peer.wait(timeout=300) == 0, peer.log
    peers[2].proc.kill()
    for peer in peers[:2]:
        second = rounds(peer.log)[2]
        assert re.search(r"worker \d of 2", second) and epochs_in(second)[0] > 1, peer.log
    summaries = [json.loads((tmp_path / f"{h.name}.json").read_text()) for h in net.hosts[:2]]
    assert [(s["worker_index"], s["num_workers"]) for s in summaries] == [(0, 2), (1, 2)]
    assert len({s["weights_sha256"] for s in summaries}) == 1, summaries
    assert summaries[0]["global_batch_size"] == 64  # kept through the change of worker count
