"""The README's ten-line script, run as the README says (`rendezvous join --expect 2
--same-file train.py -- python train.py`), by two nodes on loopback addresses."""

from __future__ import annotations

import functools
import re
import subprocess
import secrets
import shlex
import sys

import pytest

from paths import REPO
from peers import start_peer

pytestmark = [pytest.mark.training]


def readme_script() -> tuple[str, list[str]]:
    section = re.search(r"^## Your own training script.*?(?=^## )", REPO.joinpath("README.md").read_text(), re.M | re.S)[0]
    (script,) = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
    (line,) = [l for l in re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)[0].splitlines() if "rendezvous join" in l]
    return script, shlex.split(line.split("&&")[-1])


def test_the_readmes_own_script_trains_on_two_nodes(tmp_path):
    script, argv = readme_script()
    (tmp_path / "train.py").write_text(script)
    job = f"readme-{secrets.token_hex(3)}"
    peers = []
    for i, address in enumerate(["127.0.0.2", "127.0.0.3"]):
        at = argv.index("--")
        command = [sys.executable, "-m", "rendezvous", *argv[1:at], "--job", job, "--address", address,
                   "--timeout", "120", "--", sys.executable, *argv[at + 2:]]
        env = {"BACKUP": str(tmp_path / f"backup-{i}"), "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / f"run-{i}"),
               "TF_NUM_INTEROP_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1"}
        # from the directory that holds train.py, as the README's relative paths assume
        popen = functools.partial(subprocess.Popen, cwd=tmp_path)
        peers.append(start_peer(command, tmp_path, f"node-{i}", popen=popen, extra_env=env))
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
        assert "Epoch 3/3" in peer.log, peer.log
