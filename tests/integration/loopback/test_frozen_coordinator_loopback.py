"""A coordinator's daemon frozen (SIGSTOP) while the commands run, for longer than the
liveness timeout: its members give up on it, and when it runs again the round is blamed on
it, not on a member; gRPC's C core prints none of its own lines about the broken
connections ("Got goaway")."""

from __future__ import annotations

import re
import secrets
import signal
import sys
import time
from pathlib import Path

from peers import FAST, FAULT_COMMAND, join_argv, start_peer, wait_for_starts

ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
LIVENESS = float(FAST[FAST.index("--liveness-timeout") + 1])


def test_a_frozen_coordinator_is_blamed_for_its_round(tmp_path: Path):
    job = f"f-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    options = [*FAST, "--timeout", "5"]
    command = [sys.executable, str(FAULT_COMMAND), str(out), "hang-first-round"]
    peers = [start_peer(join_argv(3, job, out, address=a, options=options, command=command), tmp_path, f"p{i}")
             for i, a in enumerate(ADDRESSES)]
    coordinator = peers[0]
    try:
        wait_for_starts(tmp_path, 1, 3)
        coordinator.proc.send_signal(signal.SIGSTOP)
        # the members give up on it after the liveness timeout; it stays frozen well past that
        time.sleep(3 * LIVENESS)
        coordinator.proc.send_signal(signal.SIGCONT)
        for peer in peers:
            peer.proc.wait()
    finally:
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.send_signal(signal.SIGCONT)
                peer.proc.kill()
    aborted = re.search(r"round 1 of job '[^']+' aborted \([^)]*\): (.*)", coordinator.log)
    assert aborted, coordinator.log
    assert aborted.group(1).startswith("the coordinator did not run for "), coordinator.log
    for peer in peers:
        assert "its rendezvous daemon was lost" not in peer.log, peer.log
        assert "Got goaway" not in peer.log and "chttp2" not in peer.log, peer.log
    for member in peers[1:]:
        assert "lost the coordinator" in member.log, member.log
