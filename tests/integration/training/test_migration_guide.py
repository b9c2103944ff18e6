"""The migration guide's example ("Coming from a hand-written TF_CONFIG"): its main.py (the
tutorial's, TF_CONFIG lines deleted) beside the tutorial's mnist_setup.py (data generated
instead of downloaded: tests/support/tutorial), run with the guide's `rendezvous join`
line on two hosts (network namespaces, the same fixed --tf-port on both), each daemon
still carrying the TF_CONFIG of an old launch script in its environment. One trainer is
killed with SIGKILL in epoch 2: the job restarts by itself and resumes from its backup."""

from __future__ import annotations

import functools
import os
import re
import secrets
import shlex
import shutil
import signal
import sys
from pathlib import Path

import pytest

from paths import REPO
from peers import start_peer
from test_training_rendezvous import commands, wait_for_epoch

pytestmark = [pytest.mark.netns, pytest.mark.training]

GUIDE = REPO / "docs" / "guide" / "migration.md"
SETUP = Path(__file__).parents[2] / "support" / "tutorial" / "mnist_setup.py"
BACKUP = "/var/tmp/mnist-backup"
OLD = '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, "task": {"type": "worker", "index": 0}}'


def guide_example() -> tuple[str, list[str]]:
    page = GUIDE.read_text()
    (script,) = re.findall(r"^```python\n(.*?)^```", page, re.M | re.S)
    (line,) = [l for block in re.findall(r"^```sh\n(.*?)^```", page, re.M | re.S) for l in block.splitlines()
               if l.startswith("rendezvous join")]
    return script, shlex.split(line)


def test_the_guides_example_trains_on_two_hosts_resumes_after_a_kill_and_names_the_old_tf_config(make_network, tmp_path):
    script, argv = guide_example()
    assert not re.search(r"^[^#]*TF_CONFIG'\] =", script, re.M) and BACKUP in script and BACKUP in argv
    net = make_network(2)
    job = f"mig-{secrets.token_hex(3)}"
    peers = []
    for host in net.hosts:
        home = tmp_path / f"host-{host.index}"  # each machine's copy, backing up to its own directory
        home.mkdir()
        backup = str(home / "backup")
        (home / "main.py").write_text(script.replace(BACKUP, backup))
        shutil.copy(SETUP, home / "mnist_setup.py")
        at = argv.index("--")
        command = [sys.executable, "-m", "rendezvous", *[backup if a == BACKUP else a for a in argv[1:at]],
                   "--job", job, "--timeout", "120", "--", sys.executable, *argv[at + 2:]]
        env = {"TF_CONFIG": OLD, "RENDEZVOUS_RUNTIME_DIR": str(home / "run"),
               "TF_NUM_INTEROP_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1"}
        peers.append(start_peer(command, tmp_path, host.name, popen=functools.partial(host.popen, cwd=home),
                                extra_env=env))
    wait_for_epoch(peers, "Epoch 2/3")  # epoch 1 is backed up
    (trainer,) = commands(peers[1].proc.pid)
    os.kill(trainer, signal.SIGKILL)
    workers = f'"worker":["{net.hosts[0].address}:12345","{net.hosts[1].address}:12345"]'
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
        assert f"TF_CONFIG is set in this daemon's environment ({OLD})" in peer.log, peer.log
        assert workers in peer.log, peer.log
        _, starts, after = peer.log.partition("round 2 starts")
        resumed = re.findall(r"^Epoch (\d+)/3", after, re.M)
        assert starts and resumed and int(resumed[0]) >= 2 and resumed[-1] == "3", peer.log
