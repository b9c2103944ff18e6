"""`rendezvous status --job` while the job's coordinator does not answer (its daemon frozen):
it asks the members instead and says so, rather than failing with DEADLINE_EXCEEDED for as
long as the coordinator is away."""

from __future__ import annotations

import secrets
import signal

import pytest

from patience import HANG
from peers import job_status, join_argv, start_peer, wait_for_job

pytestmark = pytest.mark.netns


def test_status_job_asks_the_members_when_the_coordinator_does_not_answer(make_network, tmp_path):
    net = make_network(4)
    members, outsider = net.hosts[:3], net.hosts[3]
    job = f"jm-{secrets.token_hex(3)}"
    # the default liveness timeout: the members keep running while the test asks
    argv = join_argv(3, job, tmp_path, options=["--liveness-timeout", "60"], command=["sleep", "600"])
    peers = [start_peer(argv, tmp_path, h.name, popen=h.popen) for h in members]
    coordinator = peers[0]
    try:
        wait_for_job(outsider, job, lambda s: [m["phase"] for m in s["members"]] == ["running"] * 3)
        coordinator.proc.send_signal(signal.SIGSTOP)
        shown = job_status(outsider, job, "--json")
        note = shown["coordinator_unreachable"]
        assert note.startswith(f"no job status: the daemon at {members[0].address}:"), shown
        assert "DEADLINE_EXCEEDED" in note, shown
        rows = {m["address"]: m for m in shown["members"]}
        assert set(rows) == {members[1].address, members[2].address}, shown
        # each says where it is: still running round 1, or (its Join stream's keepalive
        # having given up on the coordinator) waiting for round 2
        assert all(m["phase"] in ("running", "waiting") for m in rows.values()), shown
        assert shown["phase"] == "unknown" and shown["coordinator"] is None, shown
        text = job_status(outsider, job)
        assert "did not answer" in text and "what the job's members say instead" in text, text
        assert "RANK" in text and members[2].address in text, text
    finally:
        coordinator.proc.send_signal(signal.SIGCONT)
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.send_signal(signal.SIGTERM)
        for peer in peers:
            peer.wait(timeout=HANG)
