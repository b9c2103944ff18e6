"""`rendezvous stop --job` from a fourth host (network namespaces): the job ends on every
member with the stop's exit status and no restart, every member logs who asked; with a token
an unsigned stop (and an unsigned `status --job`) is refused and the job runs on; without
multicast, `status --job` and `stop` find the job through --peer."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patience import HANG, wait_until
from peers import FAULT_COMMAND, FAST, join_argv, start_peer, starts, wait_for_starts

pytestmark = pytest.mark.netns

STOPPED = 8  # rendezvous.errors.JobStopped.exit_code, as `join --help` documents it
STOP_GRACE = 1.5

# A command that ignores SIGTERM: only the SIGKILL after the stop's grace ends it.
STUBBORN = ("import runpy, signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def start_job(net, tmp_path: Path, options=(), expect: int = 3, hosts=None, mode="sleep:600", stubborn=1):
    """`join` on the first three hosts (or `hosts`), each command sleeping long (or as `mode`
    says), restarts allowed (so that an abort would show as a round 2); the command of host
    `stubborn` ignores SIGTERM."""
    job = f"st-{secrets.token_hex(3)}"
    (tmp_path / "out").mkdir(exist_ok=True)
    peers = []
    for i, host in enumerate(hosts or net.hosts[:3]):
        command = [sys.executable, str(FAULT_COMMAND), str(tmp_path / "out"), mode]
        if i == stubborn:
            command = [sys.executable, "-c", STUBBORN, *command[1:]]
        argv = join_argv(expect, job, tmp_path, options=[*FAST, "--max-restarts", "3", "--timeout", str(HANG),
                                                          *options], command=command)
        peers.append(start_peer(argv, tmp_path, host.name, popen=host.popen))
    return job, peers


def rendezvous(host, *args: str, timeout: float = HANG, run_dir=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(run_dir)} if run_dir else None
    return host.run([sys.executable, "-m", "rendezvous", *args], capture_output=True, text=True,
                    timeout=timeout + 30, stdin=subprocess.DEVNULL, env=env)


def token_file(directory: Path, secret: str) -> str:
    path = directory / f"token-{secrets.token_hex(2)}"
    path.write_text(secret + "\n")
    os.chmod(path, 0o600)
    return str(path)


def assert_stopped(peers, asker_address: str, reason: str, tmp_path: Path, failed_before: bool = False) -> None:
    """Every join exited with the stop's status, logged who asked, and no command of a later
    round started (of round 2; the failure before the stop aside, no round followed at all)."""
    for peer in peers:
        assert peer.wait() == STOPPED, peer.log
        assert f"stopped by {asker_address} (user " in peer.log and reason in peer.log, peer.log
        assert failed_before or "round 2 starts" not in peer.log, peer.log
    assert starts(tmp_path, 2) == [], "a restart round followed the stop"


@pytest.mark.parametrize("multicast", [True, False], ids=["mdns", "seeds-without-multicast"])
def test_stop_from_a_fourth_host_ends_the_job_without_a_restart(make_network, tmp_path, multicast):
    net = make_network(4, multicast=multicast)
    seed = net.hosts[0].address
    seeds = [] if multicast else ["--peer", seed]
    job, peers = start_job(net, tmp_path, options=seeds)
    wait_for_starts(tmp_path, 1, 3)
    asker = net.hosts[3]  # runs no daemon of the job

    status = rendezvous(asker, "status", "--job", job, "--json", "--timeout", "10", *seeds)
    assert status.returncode == 0, status.stderr
    assert len(json.loads(status.stdout)["members"]) == 3

    began = time.monotonic()
    result = rendezvous(asker, "stop", "--job", job, "--json", "--reason", "maintenance window",
                        "--stop-grace", str(STOP_GRACE), "--timeout", str(HANG), *seeds)
    took = time.monotonic() - began
    assert result.returncode == 0, result.stderr
    stopped = json.loads(result.stdout)
    assert sorted(m["address"] for m in stopped["members"]) == sorted(h.address for h in net.hosts[:3])
    assert_stopped(peers, asker.address, "maintenance window", tmp_path)
    # The figure of docs/benchmarks.md, "stop -> all ended" (not an assertion: the machine may be loaded).
    print(f"stop -> all ended: {stopped['seconds']:.2f} s (grace {STOP_GRACE} s; the whole command {took:.2f} s)")
    # The stop's grace reached every member; the command that ignored SIGTERM got the SIGKILL.
    assert all("SIGKILL after 1.5 s" in p.log for p in peers)
    assert "its command ended with 137" in peers[1].log, peers[1].log


def test_with_a_token_an_unsigned_stop_or_status_is_refused_and_the_job_runs_on(make_network, tmp_path):
    net = make_network(4)
    secret = secrets.token_hex(32)
    token = token_file(tmp_path, secret)
    job, peers = start_job(net, tmp_path, options=["--token-file", token])
    wait_for_starts(tmp_path, 1, 3)
    asker = net.hosts[3]

    refused = rendezvous(asker, "stop", "--job", job, "--timeout", "10")
    assert refused.returncode == 4, (refused.stdout, refused.stderr)
    assert "needs a token" in refused.stderr, refused.stderr
    wrong = rendezvous(asker, "stop", "--job", job, "--timeout", "10", "--token-file", token_file(tmp_path, "x" * 32))
    assert wrong.returncode == 4 and "authentication failed" in wrong.stderr, wrong.stderr

    unsigned = rendezvous(asker, "status", "--job", job, "--json", "--timeout", "10")
    assert unsigned.returncode == 4 and "needs a token" in unsigned.stderr, unsigned.stderr
    for host in net.hosts[:3]:  # nothing of the members beyond that
        assert host.address not in unsigned.stdout + unsigned.stderr.replace(f"{host.address}:", "")

    time.sleep(1.0)  # had the stop been taken, the members would be ending now
    assert all(p.proc.poll() is None for p in peers), [p.log for p in peers if p.proc.poll() is not None]
    signed = rendezvous(asker, "status", "--job", job, "--json", "--timeout", "10", "--token-file", token)
    assert signed.returncode == 0, signed.stderr
    view = json.loads(signed.stdout)
    assert len(view["members"]) == 3 and view["phase"] == "released", view
    # A member's own `status` reads its daemon's token file (same user): it still answers.
    own = rendezvous(net.hosts[0], "status", "--json", "--timeout", "10", run_dir=tmp_path / "run")
    assert own.returncode == 0, own.stderr
    assert json.loads(own.stdout)[0]["phase"] == "running", own.stdout

    result = rendezvous(asker, "stop", "--job", job, "--token-file", token, "--reason", "signed", "--timeout", str(HANG))
    assert result.returncode == 0, result.stderr
    assert_stopped(peers, asker.address, "signed", tmp_path)


def test_a_stop_while_the_job_is_forming_ends_the_peers_joined_so_far(make_network, tmp_path):
    net = make_network(3)
    job, peers = start_job(net, tmp_path, expect=3, hosts=net.hosts[:2])
    asker = net.hosts[2]

    def gathering_of_two():
        status = rendezvous(asker, "status", "--job", job, "--json", "--timeout", "5")
        return status.returncode == 0 and len(json.loads(status.stdout)["members"]) == 2

    wait_until(gathering_of_two, "two peers joined, waiting for a third")
    result = rendezvous(asker, "stop", "--job", job, "--reason", "never mind", "--timeout", str(HANG))
    assert result.returncode == 0, result.stderr
    assert_stopped(peers, asker.address, "never mind", tmp_path)
    assert starts(tmp_path, 1) == []  # no command ever started


def test_a_stop_during_a_restart_round_ends_every_member(make_network, tmp_path):
    """Rank 1's command fails (once every command of the round has started, so that the
    coordinator's has set SIGTERM aside): the round is aborted. The coordinator's own command
    ignores SIGTERM, so the others come back for round 2 while it is still ending its command (its
    --abort-grace, longer than this test waits): the stop comes then, and ends the
    coordinator's own member too, with the stop's grace instead of the abort's."""
    net = make_network(4)
    job, peers = start_job(net, tmp_path, options=["--abort-grace", str(3 * HANG)],
                           mode="fail-rank-1-after-all:1", stubborn=0)
    asker = net.hosts[3]

    seen = []

    def back_for_round_two():
        status = rendezvous(asker, "status", "--job", job, "--json", "--timeout", "5")
        view = json.loads(status.stdout) if status.returncode == 0 else {}
        seen.append((view.get("round"), view.get("phase")) if view else status.stderr.strip()[-200:])
        return view.get("round") == 2 and view.get("phase") == "gathering"

    wait_until(back_for_round_two, lambda: f"the members back for round 2; the job seen as {seen[-5:]}, "
                                           f"logs {[p.log[-400:] for p in peers]}")
    result = rendezvous(asker, "stop", "--job", job, "--reason", "between rounds", "--json",
                        "--stop-grace", str(STOP_GRACE), "--timeout", str(HANG))
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)["members"]) == 3, result.stdout  # the coordinator's own member too
    assert_stopped(peers, asker.address, "between rounds", tmp_path, failed_before=True)
    assert "SIGKILL after 1.5 s" in peers[0].log and "its command ended with 137" in peers[0].log, peers[0].log
