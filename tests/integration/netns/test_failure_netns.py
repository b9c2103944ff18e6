"""The cause of a failure on every node, and each round's output in files: 3 hosts in network
namespaces run a command that raises on one of them; a fourth host asks `status --job`."""

from __future__ import annotations

import re
import secrets
import signal
import sys

import pytest

from patience import HANG
from paths import SUPPORT
from peers import job_status, join_argv, start_peer, wait_for_job

pytestmark = pytest.mark.netns

RAISER = SUPPORT / "raise_command.py"
LINES = 500
HEADLINE = re.compile(r"(\d\d):(\d\d):(\d\d)\.(\d{3}) rendezvous ERROR command failed: node ([0-9a-f]{12}) "
                      r"\(([0-9.]+)\), rank 1, exited with code 1: (.*)")
ABORT = re.compile(r"(\d\d):(\d\d):(\d\d)\.(\d{3}) rendezvous WARNING round 1 of job \S+ aborted")


def seconds(match: re.Match) -> float:
    h, m, s, ms = (int(g) for g in match.groups()[:4])
    return h * 3600 + m * 60 + s + ms / 1000


def run_job(net, tmp_path, *command_args: str, output: bool = False):
    job = f"fail-{secrets.token_hex(3)}"
    options = ["--max-restarts", "1", "--timings", "end-grace=0.5"]
    peers = []
    for host in net.hosts[:3]:
        extra = ["--output-dir", str(tmp_path / f"out-{host.name}")] if output else []
        argv = join_argv(3, job, tmp_path, options=[*options, *extra],
                         command=[sys.executable, str(RAISER), str(tmp_path), str(LINES), *command_args])
        peers.append(start_peer(argv, tmp_path, host.name, popen=host.popen))
    return job, peers


def stop(peers):
    for peer in peers:
        if peer.proc.poll() is None:
            peer.proc.send_signal(signal.SIGTERM)
    for peer in peers:
        peer.wait(timeout=HANG)


def test_every_node_shows_the_exception_of_the_node_that_raised(make_network, tmp_path):
    net = make_network(4)
    outsider = net.hosts[3]
    job, peers = run_job(net, tmp_path, output=True)
    try:
        status = wait_for_job(outsider, job, lambda s: s["round"] == 2 and s["last_failure"] is not None)
        failure = status["last_failure"]
        assert (failure["address"], failure["rank"], failure["exit_code"]) == (net.hosts[1].address, 1, 1)
        assert failure["cause"] == "RuntimeError: shard 7 is corrupt" and failure["source"] == "stderr"
        assert failure["tail"][-1] == "RuntimeError: shard 7 is corrupt"
        assert any(line.startswith("Traceback (most recent call last)") for line in failure["tail"])
        assert len(failure["tail"]) <= 40 and f"err 1 1 {LINES - 1}" in failure["tail"]
        assert status["last_abort_reason"].endswith("command exited with code 1: RuntimeError: shard 7 is corrupt")

        table = job_status(outsider, job)
        assert f"last failure: node {failure['node_id']} ({net.hosts[1].address}), rank 1, exited with code 1: " \
               "RuntimeError: shard 7 is corrupt" in table
        assert "    RuntimeError: shard 7 is corrupt" in table

        logs = [peer.log for peer in peers]
        aborted = seconds(ABORT.search(logs[0]))  # the coordinator (lowest address) aborts
        delays = []
        for host, log in zip(net.hosts[:3], logs):
            shown = HEADLINE.search(log)
            assert shown is not None, log[-3000:]
            assert (shown.group(5), shown.group(6), shown.group(7)) == (
                failure["node_id"], net.hosts[1].address, "RuntimeError: shard 7 is corrupt"), host.name
            assert "rendezvous ERROR     RuntimeError: shard 7 is corrupt" in log
            delays.append(seconds(shown) - aborted)
        print(f"failure -> cause shown on every node: {max(delays):.3f} s after the abort ({delays})")

        # each round's file holds the whole output of that round, stdout's and stderr's lines in order
        for rank, host in enumerate(net.hosts[:3]):
            text = (tmp_path / f"out-{host.name}" / job / f"round-1.{rank}.log").read_text()
            assert [line for line in text.splitlines() if line.startswith("out ")] == [
                f"out {rank} 1 {i}" for i in range(LINES)]
            assert [line for line in text.splitlines() if line.startswith("err ")] == [
                f"err {rank} 1 {i}" for i in range(LINES)]
            assert f"round-1.{rank}.log" in logs[rank] and f"err {rank} 1 {LINES - 1}" in logs[rank]
        assert "RuntimeError: shard 7 is corrupt" in (tmp_path / f"out-{net.hosts[1].name}" / job / "round-1.1.log").read_text()
        wait_for_job(outsider, job, lambda s: all(m["command_uptime_seconds"] for m in s["members"]))
        for rank, host in enumerate(net.hosts[:3]):
            assert (tmp_path / f"out-{host.name}" / job / f"round-2.{rank}.log").exists()
    finally:
        stop(peers)


def test_an_error_file_is_the_cause_instead_of_the_stderr_tail(make_network, tmp_path):
    net = make_network(4)
    job, peers = run_job(net, tmp_path, "error-file")
    try:
        status = wait_for_job(net.hosts[3], job, lambda s: s["round"] == 2 and s["last_failure"] is not None)
        failure = status["last_failure"]
        assert (failure["source"], failure["error_type"], failure["message"]) == (
            "error file", "ValueError", "label 12 out of range")
        assert failure["cause"] == "ValueError: label 12 out of range"
        assert failure["tail"][-1] == "ValueError: label 12 out of range"
        for peer in peers:
            assert re.search(r"ERROR command failed: node [0-9a-f]{12} \([0-9.]+\), rank 1, exited with code 1: "
                             r"ValueError: label 12 out of range", peer.log), peer.log[-3000:]
    finally:
        stop(peers)
