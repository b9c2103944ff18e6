"""A daemon stopped while its command runs (`systemctl stop`: SIGTERM to the daemon) tells
its coordinator so, and every node says "stopped", not that its daemon was lost; a
stopped coordinator tells its members the same way."""

from __future__ import annotations

import secrets
import signal
import sys
from pathlib import Path

import pytest

from peers import FAST, FAULT_COMMAND, join_argv, start_peer, wait_for_starts

ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


@pytest.mark.parametrize("victim", [1, 0], ids=["member", "coordinator"])
def test_a_daemon_stopped_by_sigterm_tells_its_peers_it_stopped(tmp_path: Path, victim: int):
    job = f"t-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    # the others wait for the stopped node in round 2 until their --timeout
    options = [*FAST, "--timeout", "5"]
    command = [sys.executable, str(FAULT_COMMAND), str(out), "hang-first-round"]
    peers = [start_peer(join_argv(3, job, out, address=a, options=options, command=command), tmp_path, f"p{i}")
             for i, a in enumerate(ADDRESSES)]
    try:
        wait_for_starts(tmp_path, 1, 3)
        peers[victim].proc.send_signal(signal.SIGTERM)
        assert peers[victim].proc.wait() == 128 + signal.SIGTERM, peers[victim].log
        for peer in peers:
            peer.proc.wait()
    finally:
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.kill()
    stopped = f"{ADDRESSES[victim]} ("
    for n, peer in enumerate(peers):
        if n == victim:
            continue
        assert "its daemon was stopped (SIGTERM)" in peer.log and stopped in peer.log, peer.log
        assert "its rendezvous daemon was lost" not in peer.log, peer.log
        assert "Traceback" not in peer.log, peer.log
    assert "Traceback" not in peers[victim].log, peers[victim].log
