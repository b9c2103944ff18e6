"""A member of a running job cut off from the others (nftables drops everything between it
and them): its own `rendezvous status` stops counting them as seen and shows them silent,
within a bound derived from the configured timings, instead of "3 of 3 peers seen" for as
long as mDNS keeps their adverts (many minutes)."""

from __future__ import annotations

import json
import secrets
import shutil
import signal
import subprocess
import sys
import time

import pytest

from patience import HANG, wait_until
from peers import join_argv, start_peer, wait_for_job

pytestmark = pytest.mark.netns

LIVENESS, SUSPECT = 3.0, 1.0


def own_status(host) -> dict:
    result = host.run([sys.executable, "-m", "rendezvous", "status", "--json"],
                      capture_output=True, text=True, timeout=HANG, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stderr
    [status] = json.loads(result.stdout)
    return status


def cut_off(host, others) -> None:
    addresses = ", ".join(h.address for h in others)
    rules = (
        "table inet isolate {\n"
        f"  chain in {{ type filter hook input priority 0; ip saddr {{ {addresses} }} drop; }}\n"
        f"  chain out {{ type filter hook output priority 0; ip daddr {{ {addresses} }} drop; }}\n"
        "}\n"
    )
    host.run(["nft", "-f", "-"], input=rules, text=True, check=True, capture_output=True)


def shows_them_silent(lonely, others, status: dict) -> None:
    """The others once each, silent, with the time since they were last heard; in the text too."""
    silent = [p["address"] for p in status["silent"]]
    assert sorted(silent) == sorted(h.address for h in others), status
    assert all(p["heard_seconds_ago"] >= min(LIVENESS, SUSPECT) for p in status["silent"]), status
    text = lonely.run([sys.executable, "-m", "rendezvous", "status"], capture_output=True, text=True,
                      timeout=HANG, stdin=subprocess.DEVNULL).stdout
    assert "silent" in text and all(text.count(f"{h.address} (") == 1 for h in others), text


@pytest.mark.parametrize("cut", [0, 2], ids=["the-coordinator", "a-member"])
def test_a_member_cut_off_from_the_others_stops_counting_them(make_network, tmp_path, monkeypatch, cut):
    if shutil.which("nft") is None:
        pytest.fail("nftables' `nft` is missing: scripts/setup installs it (as root)", pytrace=False)
    monkeypatch.setenv("RENDEZVOUS_RUNTIME_DIR", str(tmp_path / "run"))
    net = make_network(3)
    job = f"iso-{secrets.token_hex(3)}"
    # --timeout: a waiting daemon must outlive the test's wait (today's said "3 of 3" until it)
    argv = join_argv(3, job, tmp_path, command=["sleep", "600"], options=[
        "--liveness-timeout", str(LIVENESS), "--timings", f"suspect_after={SUSPECT}", "--timeout", "600"])
    peers = [start_peer(argv, tmp_path, h.name, popen=h.popen) for h in net.hosts]
    lonely = net.hosts[cut]
    others = [h for h in net.hosts if h is not lonely]
    try:
        wait_for_job(net.hosts[0], job, lambda s: [m["phase"] for m in s["members"]] == ["running"] * 3)
        wait_until(lambda: len(own_status(lonely)["seen"]) == 3, "the member sees all 3 before the cut")
        cut_off(lonely, others)
        cut_at = time.monotonic()
        # Silent for longer than the liveness timeout (or suspect-after): no longer seen. The
        # bound: that silence, one Status call's timeout and one retry interval, with room
        # for a loaded machine (a factor, not a fixed figure).
        bound = 4 * (LIVENESS + SUSPECT + 3.0)
        def alone():
            status = own_status(lonely)
            return status if [p["address"] for p in status["seen"]] == [lonely.address] else None

        status = wait_until(alone, lambda: f"{lonely.address} still counts the others: {own_status(lonely)}",
                            timeout=bound + HANG, interval=0.3)
        took = time.monotonic() - cut_at
        assert took < bound, (took, status)
        shows_them_silent(lonely, others, status)
        if cut != 0:
            # The member goes on to suspect its coordinator (its Joins fail): suspected and
            # silent, it is still shown once, silent, and this node still sees itself.
            coordinator = net.hosts[0].address
            wait_until(lambda: f"cannot reach the coordinator {coordinator} (" in peers[cut].log,
                       lambda: f"{lonely.address} never suspected {coordinator}: {peers[cut].log[-3000:]}")
            status = own_status(lonely)
            assert [p["address"] for p in status["seen"]] == [lonely.address], status
            shows_them_silent(lonely, others, status)
        # every progress line lists each peer once
        listed = [line.split("peers seen: ", 1)[1] for line in peers[cut].log.splitlines() if "peers seen: " in line]
        for line in listed:
            assert all(line.count(f"{h.address} (") <= 1 for h in net.hosts), line
    finally:
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.send_signal(signal.SIGTERM)
        for peer in peers:
            peer.wait(timeout=HANG)
