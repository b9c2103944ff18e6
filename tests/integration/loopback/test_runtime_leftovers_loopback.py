"""What daemons leave in their runtime directory, with real daemons and `rendezvous status`:
a daemon killed with -9 leaves its note and its round's error file directory, which the
next `status` (or daemon) removes; a note that outlived its daemon (its endpoint where
nothing listens, its pid a live process's) is removed by `status`, which shows the live
daemon and succeeds."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

from patience import HANG, wait_until
from peers import FAST, join_argv, start_peer

SLEEP = ["sleep", "300"]


def status(run_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True, timeout=HANG,
        env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(run_dir)}, stdin=subprocess.DEVNULL,
    )


def start_alone(tmp_path: Path, name: str):
    job = f"l-{secrets.token_hex(4)}"
    peer = start_peer(join_argv(1, job, tmp_path, address="127.0.0.2", options=FAST, command=SLEEP), tmp_path, name)
    run = tmp_path / "run"
    wait_until(lambda: "starting" in peer.log and any(run.glob("*-error-*")), f"{name}'s command running")
    return peer, run, job


def test_a_daemon_killed_with_sigkill_leaves_nothing_once_status_ran(tmp_path: Path):
    peer, run, _ = start_alone(tmp_path, "killed")
    (leftover,) = run.glob("*-error-*")
    peer.proc.kill()
    assert peer.proc.wait() == -9
    assert leftover.is_dir()  # what it left
    result = status(run)
    assert result.returncode == 7 and "no rendezvous daemon runs on this machine" in result.stderr, result.stderr
    assert sorted(os.listdir(run)) == [], os.listdir(run)


def test_status_removes_a_note_whose_endpoint_nobody_listens_at_and_shows_the_live_daemon(tmp_path: Path):
    peer, run, job = start_alone(tmp_path, "live")
    try:
        (live,) = (json.loads(p.read_text()) for p in run.glob("*.json"))
        with socket.socket() as s:  # a port where nothing listens
            s.bind(("127.0.0.2", 0))
            dead_endpoint = f"127.0.0.2:{s.getsockname()[1]}"
        stale = run / f"{secrets.token_hex(6)}.json"
        # the live daemon's pid, as after a restart or a copied note: only the endpoint tells
        stale.write_text(json.dumps({**live, "node_id": stale.stem, "endpoint": dead_endpoint}) + "\n")
        # and one whose endpoint another node (the live daemon) answers at
        copied = run / f"{secrets.token_hex(6)}.json"
        copied.write_text(json.dumps({**live, "node_id": copied.stem}) + "\n")
        result = status(run)
        assert result.returncode == 0, result.stderr
        shown = json.loads(result.stdout)
        assert [s["node"]["node_id"] for s in shown] == [live["node_id"]] and shown[0]["job"] == job
        assert not stale.exists() and not copied.exists() and (run / f"{live['node_id']}.json").exists()
    finally:
        peer.proc.terminate()
        peer.wait()
