"""--sync-dir across hosts (network namespaces), a directory per host."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time

import pytest

from patience import HANG
from peers import FAST, join_argv, start_peer
from paths import SUPPORT

pytestmark = pytest.mark.netns

COMMAND = (SUPPORT / "sync_command.py")


def test_the_chiefs_files_come_back_with_its_restarted_daemon(make_network, tmp_path):
    """kill -9 of the chief's daemon (the coordinator too): the next round is formed by the
    others and the chief's host once its daemon is started again, with a new node id. The
    others remember the chief by its address, so its files, not a newer throw-away copy,
    are what every host gets."""
    net = make_network(3)
    job = f"s-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()

    def start(host, name):
        root = tmp_path / f"dir-{host.index}"
        argv = join_argv(3, job, out, options=[*FAST, "--max-restarts", "2", "--sync-dir", str(root)],
                         command=[sys.executable, str(COMMAND), str(root), str(out), "round-1-hangs"])
        return start_peer(argv, tmp_path, name, popen=host.popen)

    peers = [start(h, h.name) for h in net.hosts]
    deadline = time.monotonic() + HANG
    while not (tmp_path / "dir-2" / "workertemp_2" / "ckpt-1").exists():
        assert time.monotonic() < deadline, peers[0].log
        time.sleep(0.05)
    os.kill(peers[0].proc.pid, signal.SIGKILL)
    peers[0].proc.wait()
    peers[0] = start(net.hosts[0], "chief-again")
    for peer in peers:
        assert peer.wait() == 0, peer.log
    second = [json.loads(p.read_text()) for p in sorted(out.glob("*-2.json"))]
    assert [sorted(r["files"]) for r in second] == [["chief/ckpt-1"]] * 3, second
    assert f"from {net.hosts[0].address}" in peers[2].log, peers[2].log
