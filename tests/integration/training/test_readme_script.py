"""The README's own-script example, run as the README says (`rendezvous join --expect 2
--tf-port 29631 --sync-dir ... --same-file train.py -- python train.py`), on two hosts
(network namespaces: both use the same fixed TensorFlow port, as two machines would), each
backing up to a directory of its own. One trainer is killed with SIGKILL in epoch 3: the
job restarts by itself and both resume from the backup, not from epoch 1; every node names
the signal as the cause."""

from __future__ import annotations

import functools
import os
import re
import secrets
import shlex
import signal
import sys

import pytest

from paths import REPO
from peers import start_peer
from test_training_rendezvous import commands, wait_for_epoch

pytestmark = [pytest.mark.netns, pytest.mark.training]

BACKUP = "/var/tmp/train-backup"


def readme_script() -> tuple[str, list[str]]:
    section = re.search(r"^## Your own training script.*?(?=^## )", REPO.joinpath("README.md").read_text(), re.M | re.S)[0]
    (script,) = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    (line,) = [l for l in re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)[0].splitlines() if "rendezvous join" in l]
    return script, shlex.split(line.split("&&")[-1])


def test_the_guide_shows_the_readmes_script_and_command():
    guide = REPO.joinpath("docs", "guide", "index.md").read_text()
    script, argv = readme_script()
    assert f"```python\n{script}```" in guide
    assert shlex.join(argv) in guide


def test_the_readmes_own_script_resumes_from_its_backup_after_a_trainer_is_killed(make_network, tmp_path):
    script, argv = readme_script()
    assert BACKUP in script and argv[argv.index("--sync-dir") + 1] == BACKUP and "--tf-port" in argv
    (tmp_path / "train.py").write_text(script)
    net = make_network(2)
    job = f"readme-{secrets.token_hex(3)}"
    peers = []
    for host in net.hosts:
        backup = str(tmp_path / f"backup-{host.index}")  # one directory per host, as on two machines
        at = argv.index("--")
        options = [backup if a == BACKUP else a for a in argv[1:at]]
        command = [sys.executable, "-m", "rendezvous", *options, "--job", job, "--timeout", "120",
                   "--", sys.executable, *argv[at + 2:]]
        env = {"BACKUP": backup, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / f"run-{host.index}"),
               "TF_NUM_INTEROP_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1"}
        # from the directory that holds train.py, as the README's relative path assumes
        popen = functools.partial(host.popen, cwd=tmp_path)
        peers.append(start_peer(command, tmp_path, host.name, popen=popen, extra_env=env))
    wait_for_epoch(peers, "Epoch 3/10")  # epochs 1 and 2 are backed up
    (trainer,) = commands(peers[1].proc.pid)
    os.kill(trainer, signal.SIGKILL)
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
        # the signal is the cause everywhere, not TensorFlow's last line (`failed call to cuInit`)
        (failed,) = [line for line in peer.log.splitlines() if "ERROR command failed:" in line]
        assert failed.endswith("rank 1, killed by SIGKILL (exit 137)"), peer.log
        assert "command exited with code 137: killed by SIGKILL; round 2 starts" in peer.log, peer.log
        before, starts, after = peer.log.partition("round 2 starts")
        assert starts, peer.log
        resumed = re.findall(r"^Epoch (\d+)/10", after, re.M)
        assert resumed and int(resumed[0]) >= 3 and resumed[-1] == "10", peer.log
