"""--prewarm with real `rendezvous join` processes on 127.0.0.x: every round's command starts
warm, the restart round's from the spare that warmed while round 1 ran, and the spare goes
when the job ends."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

from patience import HANG, wait_until
from peers import alive, join_argv, start_peer

APP = Path(__file__).resolve().parents[2] / "support" / "warm_app"
ROUND_ONE = 3.0  # seconds round 1's commands run: the spare starts after spare-after=0.5


def test_a_restart_round_starts_warm_from_the_spare_and_the_spare_ends_with_the_job(tmp_path):
    job = f"w-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    peers = []
    for address in ("127.0.0.2", "127.0.0.3"):
        argv = join_argv(2, job, out, address=address,
                         options=["-v", "--prewarm", "warm_marker", "--timings", "spare-after=0.5", "--max-restarts", "1"],
                         command=[sys.executable, str(APP / "rounds.py"), str(out), str(ROUND_ONE)])
        peers.append(start_peer(argv, tmp_path, address))
    # `status` shows the spare warming for round 2 while round 1 runs, and its memory
    spare = wait_until(lambda: _spare(tmp_path), "a warm spare in `rendezvous status --json`")
    assert spare["pid"] > 0 and spare["rss_bytes"] > 1 << 20, spare
    for peer in peers:
        assert peer.wait() == 0, peer.log
    found = {p.name: json.loads(p.read_text()) for p in out.glob("*.json")}
    rounds = {r: [v for v in found.values() if v["round"] == r] for r in (1, 2)}
    assert len(rounds[1]) == len(rounds[2]) == 2, found
    assert all(r["warm"] for r in rounds[1] + rounds[2]), found
    # each round-2 command is a process created while round 1 still ran: the spare
    failed = min(float(p.read_text()) for p in out.glob("*.ended"))
    assert all(r["created"] < failed for r in rounds[2]), (found, failed)
    # the job ended: no process of it is left (a spare would wait for a round 3)
    for peer in peers:  # round 1's, the spare for round 2, the spare for a round 3 (ended unused)
        assert peer.log.count("the warm interpreter: ") == 3, peer.log
    wait_until(lambda: not any(alive(r["pid"]) for r in rounds[1] + rounds[2]), "the commands gone")
    leftover = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _runs(p, str(APP / "rounds.py"))]
    assert leftover == [], leftover


def _spare(log_dir: Path):
    result = subprocess.run([sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True,
                            timeout=HANG, env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(log_dir / "run")},
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        return None
    return next((s["warm_spare"] for s in json.loads(result.stdout) if s["warm_spare"]), None)


def _runs(proc: Path, word: str) -> bool:
    try:
        return word.encode() in (proc / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
