"""A host outside a running job (no token) sends forged Joins asking for later rounds: real
`rendezvous join` processes on 127.0.0.x, the Joins from tests/support/forge_join.py. None
of them changes the round: the job keeps running round 1 with its restarts unused."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paths import SUPPORT
from peers import alive, join_argv, start_peer
from rendezvous.coordinator import fetch_job_status
from rendezvous.core.admission import MAX_ROUND

FORGER = SUPPORT / "forge_join.py"
COMMAND = SUPPORT / "fault_command.py"
ADDRESSES = ["127.0.0.2", "127.0.0.3"]
OPTIONS = ["--max-restarts", "3", "--liveness-timeout", "1.5", "--timings", "keepalive=1,end-grace=0.5"]


@pytest.fixture
def job() -> str:
    return f"f-{secrets.token_hex(4)}"


def wait_for_starts(out: Path, count: int, timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(found := sorted(out.glob("*-1.json"))) < count:
        assert time.monotonic() < deadline, f"{len(found)} of {count} commands started"
        time.sleep(0.05)
    return [json.loads(p.read_text()) for p in found]


def coordinator_endpoint(run_dir: Path) -> str:
    """Where this machine's daemons say their coordinator listens (`status --json`)."""
    result = subprocess.run(
        [sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True, timeout=30,
        env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(run_dir)}, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    [coordinator] = {(s["coordinator"]["address"], s["coordinator"]["port"]) for s in json.loads(result.stdout)}
    return f"{coordinator[0]}:{coordinator[1]}"


def forge(endpoint: str, job: str, claimed: dict, round_: int) -> dict:
    argv = [sys.executable, str(FORGER), endpoint, job, claimed["node_id"], claimed["address"],
            str(claimed["port"]), str(claimed["tf_port"]), "--round", str(round_)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_forged_joins_for_later_rounds_from_outside_leave_the_running_round_alone(tmp_path, job):
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, str(COMMAND), str(out), "hang-first-round"]
    peers = [
        start_peer(join_argv(2, job, out, address=a, options=OPTIONS, command=command), tmp_path, f"peer-{a}")
        for a in ADDRESSES
    ]
    try:
        first = wait_for_starts(out, 2)
        endpoint = coordinator_endpoint(tmp_path / "run")
        stranger = {"node_id": secrets.token_hex(6), "address": "127.0.0.5", "port": 7001, "tf_port": 7002}
        # four used to spend every restart; one more round than the next, and the counter's end
        answers = [forge(endpoint, job, stranger, round_) for round_ in (2, 2, 2, 2, 3, 2**32, MAX_ROUND + 1)]
        assert [a["reason"] for a in answers[:4]] == ["ALREADY_FROZEN"] * 4, answers
        assert all("is not a member" in a["message"] for a in answers[:4]), answers
        assert [a["reason"] for a in answers[4:]] == ["BAD_REQUEST"] * 3, answers
        assert all("out of range" in a["message"] for a in answers[4:]), answers
        # the coordinator answered each Join after deciding on it: what it holds now is final
        view = asyncio.run(fetch_job_status(endpoint, 5))
        assert (view.round, view.phase) == (1, "released"), view
        assert all(alive(r["pid"]) for r in first)
        assert all(p.proc.poll() is None for p in peers), [p.log for p in peers]
        assert not list(out.glob("*-2.json"))
        for peer in peers:
            assert "moved on" not in peer.log and "aborted" not in peer.log, peer.log
    finally:
        for peer in peers:
            peer.proc.terminate()
        for peer in peers:
            peer.wait()
