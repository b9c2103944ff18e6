"""`rendezvous status` while a round aborts: until its command has stopped (within
--abort-grace), a node says it is aborting and why, not "round 1, running"."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from patience import HANG, wait_until
from peers import FAST, join_argv, start_peer

ADDRESSES = ["127.0.0.2", "127.0.0.3"]
# Rank 1 fails at once in round 1; rank 0 ignores SIGTERM, so its node waits out --abort-grace.
COMMAND = ["sh", "-c", 'trap "" TERM; [ "$RENDEZVOUS_RANK" = 1 ] && exit 3; exec sleep 300']


def statuses(run_dir: Path) -> dict[str, dict]:
    result = subprocess.run(
        [sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True, timeout=HANG,
        env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(run_dir)}, stdin=subprocess.DEVNULL,
    )
    return {s["node"]["address"]: s for s in json.loads(result.stdout)} if result.returncode == 0 else {}


def test_a_node_stopping_its_command_after_an_abort_says_it_is_aborting(tmp_path: Path):
    job = f"a-{secrets.token_hex(4)}"
    options = [*FAST, "--abort-grace", str(HANG), "--max-restarts", "1"]
    peers = [start_peer(join_argv(2, job, tmp_path, address=a, options=options, command=COMMAND), tmp_path, f"p{n}")
             for n, a in enumerate(ADDRESSES)]
    try:
        shown = wait_until(lambda: (statuses(tmp_path / "run").get(ADDRESSES[0]) or {}).get("ending"),
                           "the coordinator's node saying it aborts")
        assert "command exited with code 3" in shown, shown
        text = subprocess.run(
            [sys.executable, "-m", "rendezvous", "status"], capture_output=True, text=True, timeout=HANG,
            env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / "run")}, stdin=subprocess.DEVNULL,
        ).stdout
        assert "aborting, stopping the command: " in text, text
    finally:
        # the command that ignores SIGTERM is killed rather than waited out
        for status in statuses(tmp_path / "run").values():
            if status["trainer_pid"]:
                try:
                    os.killpg(status["trainer_pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.send_signal(signal.SIGTERM)
        for peer in peers:
            peer.wait(timeout=HANG)
