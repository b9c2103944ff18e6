"""A process of a node stopped with SIGSTOP, with real `rendezvous join` processes on
127.0.0.x: a stopped warm spare is not made the next round's command (it is killed at the
release, and the round starts the plain way without costing the job a restart), and a
stopped daemon's command is ended by its gate within the round's liveness timeout, so that
it never trains on beside the next round's commands."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from patience import HANG, wait_until
from peers import FAST, FAULT_COMMAND, alive, join_argv, start_peer, starts, wait_for_starts, wait_gone

APP = Path(__file__).resolve().parents[2] / "support" / "warm_app"
LIVENESS = float(FAST[FAST.index("--liveness-timeout") + 1])
ABORT_GRACE = 3.0  # --abort-grace's default: what an aborted round's command gets


def _status(log_dir: Path) -> list:
    result = subprocess.run([sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True,
                            timeout=HANG, env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(log_dir / "run")},
                            stdin=subprocess.DEVNULL)
    return json.loads(result.stdout) if result.returncode == 0 else []


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _kill_all(peers) -> None:
    for peer in peers:
        if peer.proc.poll() is None:
            os.kill(peer.proc.pid, signal.SIGCONT)
            peer.proc.kill()
            peer.proc.wait()


def test_a_stopped_spare_gives_way_to_a_plain_start_that_costs_the_job_nothing(tmp_path):
    job = f"f-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    peers = []
    try:
        for address in ("127.0.0.2", "127.0.0.3"):
            argv = join_argv(2, job, out, address=address,
                             options=["-v", "--prewarm", "warm_marker", "--timings", "spare-after=0.2",
                                      "--max-restarts", "1"],
                             command=[sys.executable, str(APP / "rounds.py"), str(out), str(HANG), "0.5"])
            peers.append(start_peer(argv, tmp_path, address))
        # both nodes' spares for round 2 have imported (the one module), then are stopped
        spares = wait_until(lambda: [s["warm_spare"]["pid"] for s in _status(tmp_path) if s["warm_spare"]]
                            if len([s for s in _status(tmp_path) if s["warm_spare"]]) == 2 else None,
                            "a warm spare on both nodes")
        for pid in spares:
            os.kill(pid, signal.SIGSTOP)
        first = wait_until(lambda: len(list(out.glob("*-1.json"))) == 2 and list(out.glob("*-1.json")),
                           "round 1's commands")
        os.kill(json.loads(first[0].read_text())["pid"], signal.SIGKILL)  # round 1 fails: its one restart
        for peer in peers:
            assert peer.wait() == 0, peer.log  # round 2 ran and completed: the spares cost nothing
        second = [json.loads(p.read_text()) for p in out.glob("*-2.json")]
        assert len(second) == 2 and not any(r["warm"] for r in second), second
        assert not any(alive(pid) for pid in spares)
        for peer in peers:
            log = peer.log
            assert "is stopped (SIGSTOP)" in log or "was stopped (SIGSTOP)" in log, log
            assert "the warm interpreter was not used" in log, log
            started = [line for line in log.splitlines() if " starting " in line and "rounds.py" in line]
            assert len(started) == 2 and started[0].endswith(", warm)") and not started[1].endswith(", warm)"), started
    finally:
        _kill_all(peers)


def _frozen_daemon_peers(tmp_path: Path, addresses, expect: str):
    job = f"d-{secrets.token_hex(4)}"
    (tmp_path / "out").mkdir()
    return [start_peer(join_argv(2, job, tmp_path / "out", address=address,
                                 options=["--expect", expect, "-v", *FAST],
                                 command=[sys.executable, str(FAULT_COMMAND), str(tmp_path / "out"),
                                          "hang-first-round"]), tmp_path, address)
            for address in addresses]


def test_a_stopped_member_daemons_command_is_ended_by_its_gate(tmp_path):
    peers = _frozen_daemon_peers(tmp_path, ("127.0.0.2", "127.0.0.3"), "2")
    try:
        member = wait_for_starts(tmp_path, 1, 2)[1]  # rank 1: 127.0.0.3, not the coordinator
        os.kill(peers[1].proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        assert wait_gone(member["pid"], LIVENESS + ABORT_GRACE), "the stopped daemon's command ran on"
        # ended by its gate while the daemon stays stopped, once silent for the timeout
        # (counted from the daemon's last beat, at most a fifth of it before the stop)
        assert _state(peers[1].proc.pid) == "T" and time.monotonic() - stopped >= LIVENESS * 4 / 5
        os.kill(peers[1].proc.pid, signal.SIGCONT)
        for peer in peers:  # round 2 (its commands exit 0) completes the job
            assert peer.wait() == 0, peer.log
    finally:
        _kill_all(peers)


def test_a_stopped_coordinators_chief_ends_before_the_next_rounds_chief_starts(tmp_path):
    # three nodes, at least two: the two members form round 2 without the stopped coordinator
    peers = _frozen_daemon_peers(tmp_path, ("127.0.0.2", "127.0.0.3", "127.0.0.4"), "2:3")
    try:
        chief = wait_for_starts(tmp_path, 1, 3)[0]
        os.kill(peers[0].proc.pid, signal.SIGSTOP)
        assert wait_gone(chief["pid"], LIVENESS + ABORT_GRACE), "the stopped coordinator's command ran on"
        assert _state(peers[0].proc.pid) == "T"
        wait_for_starts(tmp_path, 2, 2)
        second = starts(tmp_path, 2)
        assert [r["rank"] for r in second if r["rank"] == 0] == [0]  # the next round's chief
        assert not alive(chief["pid"])  # never two chiefs
    finally:
        _kill_all(peers)
