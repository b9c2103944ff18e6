"""`rendezvous status --job` from a host outside the job, the progress contract with a plain
shell command, Prometheus metrics over HTTP, and a straggler made with SIGSTOP bursts;
hosts in network namespaces. (The same with the bundled trainer: test_training_rendezvous.)"""

from __future__ import annotations

import os
import json
import re
import secrets
import selectors
import signal
import subprocess
import sys
import time

import pytest

from patience import HANG
from peers import interruptible, job_status, join_argv, start_peer, wait_for_job

pytestmark = pytest.mark.netns

# Rank 0 reports an epoch every 0.2 s; rank 1 writes junk, a huge line and the same
# progress, and fails once when its fail-1 file appears; rank 2 writes nothing.
REPORTER = r"""
out=$RENDEZVOUS_PROGRESS_FILE
[ "$RENDEZVOUS_RANK" = 2 ] && exec sleep 600
if [ "$RENDEZVOUS_RANK" = 1 ]; then
  echo 'not json' >> "$out"
  head -c 20000 /dev/zero | tr '\0' x >> "$out"; echo >> "$out"
  echo '{"epoch": -1}' >> "$out"
fi
i=0
while :; do
  i=$((i+1))
  echo "{\"epoch\": $i, \"epochs\": 1000, \"step\": $((i*10)), \"loss\": 0.5, \"images_per_s\": 2310}" >> "$out"
  if [ -e "$1/fail-$RENDEZVOUS_RANK" ]; then rm "$1/fail-$RENDEZVOUS_RANK"; exit 1; fi
  sleep 0.2
done
"""

# Every rank counts steps, ten a second.
STEPPER = r"""
i=0
while :; do
  i=$((i+1)); echo "{\"step\": $i}" >> "$RENDEZVOUS_PROGRESS_FILE"; sleep 0.1
done
"""

FAST = "progress-poll=0.1,progress-send=0.2,straggler-after=1.5,end-grace=0.5"
METRICS_PORT = 9464


def job_argv(tmp_path, script):
    """A job of 3 running `script` (its $1: tmp_path), one restart allowed; its name and argv."""
    job = f"js-{secrets.token_hex(3)}"
    argv = join_argv(
        3, job, tmp_path,
        options=["--max-restarts", "1", "--timings", FAST, "--metrics-port", str(METRICS_PORT)],
        command=["sh", "-c", script, "sh", str(tmp_path)],
    )
    return job, argv


def start(hosts, argv, tmp_path):
    return [start_peer(argv, tmp_path, h.name, popen=h.popen) for h in hosts]


def stop(peers):
    for peer in peers:
        if peer.proc.poll() is None:
            peer.proc.send_signal(signal.SIGTERM)
    for peer in peers:
        peer.wait(timeout=HANG)


def json_lines(proc, enough, timeout=HANG):
    """The JSON lines `proc` prints, read as they come, until `enough(lines)` holds, its
    output ends, or `timeout` passes."""
    fd = proc.stdout.fileno()
    found, pending = [], b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while not enough(found) and time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            found += [json.loads(line) for line in lines if line.strip()]
    return found


def epochs(status):
    return [(m["progress"] or {}).get("epoch") for m in status["members"]]


def test_the_whole_job_from_a_host_outside_it(make_network, tmp_path):
    net = make_network(4)
    outsider = net.hosts[3]  # runs no daemon
    job, argv = job_argv(tmp_path, REPORTER)
    peers = start(net.hosts[:3], argv, tmp_path)
    try:
        first = wait_for_job(
            outsider, job, lambda s: len(s["members"]) == 3 and all(epochs(s)[:2]) and s["members"][2]["command_uptime_seconds"]
        )
        assert (first["job"], first["round"], first["restarts"], first["last_abort_reason"]) == (job, 1, 0, None)
        assert first["coordinator"]["address"] == net.hosts[0].address
        members = first["members"]
        assert [(m["rank"], m["address"], m["phase"], m["round"]) for m in members] == [
            (rank, host.address, "running", 1) for rank, host in enumerate(net.hosts[:3])
        ]
        assert all(len(m["node_id"]) == 12 and m["exit_code"] is None for m in members)
        # a command that writes nothing still shows its phase and uptime
        assert members[2]["progress"] is None and members[2]["command_uptime_seconds"] > 0
        assert members[1]["progress"]["loss"] == 0.5 and members[1]["progress"]["images_per_s"] == 2310

        second = wait_for_job(outsider, job, lambda s: all(
            (now or 0) > before for now, before in zip(epochs(s)[:2], epochs(first)[:2])))
        assert epochs(second)[0] > epochs(first)[0] and epochs(second)[1] > epochs(first)[1]
        # junk, a huge (cut) line and a bad value: one warning, the good lines still count
        assert peers[1].log.count("such lines are ignored") == 1, peers[1].log
        assert "such lines are ignored" not in peers[0].log

        watch = outsider.popen(
            [sys.executable, "-m", "rendezvous", "status", "--job", job, "--json", "--watch"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
        )
        # Not a terminal: one line per view. Two views, the later one further on, before the
        # Ctrl-C (a watch that shows no progress fails below after HANG).
        seen = json_lines(watch, lambda views: len(views) >= 2 and epochs(views[-1])[0] > epochs(views[0])[0])
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=HANG)
        seen += [json.loads(line) for line in out.splitlines()]
        assert len(seen) >= 2 and watch.returncode == 130, (err, [epochs(view) for view in seen], peers[0].log[-3000:])
        assert epochs(seen[-1])[0] > epochs(seen[0])[0]

        table = job_status(outsider, job)
        assert table.startswith(f"job {job}: round 1 (released), 3 of 3 members, 0 restarts, coordinator {net.hosts[0].address}:")
        assert "epoch " in table and "/1000, loss 0.5, 2,310 img/s" in table

        (tmp_path / "fail-1").touch()
        ended = wait_for_job(outsider, job, lambda s: s["last_abort_reason"] is not None)
        assert f"{net.hosts[1].address}" in ended["last_abort_reason"]
        assert "command exited with code 1" in ended["last_abort_reason"]
        later = wait_for_job(outsider, job, lambda s: s["round"] == 2 and len(s["members"]) == 3)
        assert later["restarts"] == 1 and later["last_abort_reason"] == ended["last_abort_reason"]
    finally:
        stop(peers)


def scrape(host, address):
    code = f"import urllib.request; print(urllib.request.urlopen('http://{address}:{METRICS_PORT}/metrics', timeout={HANG}).read().decode())"
    result = host.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG)
    assert result.returncode == 0, result.stderr
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in result.stdout.splitlines() if line.startswith("rendezvous_")
    }


def command_pid(peer) -> int:
    """The command the daemon started: the only child of its supervisor (the daemon's
    only child) once running."""
    deadline = time.monotonic() + HANG
    while True:
        found = []
        with open(f"/proc/{peer.proc.pid}/task/{peer.proc.pid}/children") as f:
            for gate in f.read().split():
                with open(f"/proc/{gate}/task/{gate}/children") as g:
                    found += [int(c) for c in g.read().split()]
        if len(found) == 1:
            return found[0]
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def test_metrics_over_http_and_a_straggler(make_network, tmp_path):
    net = make_network(4)
    outsider = net.hosts[3]
    job, argv = job_argv(tmp_path, STEPPER)
    peers = start(net.hosts[:1], argv, tmp_path)
    try:
        address = net.hosts[0].address
        deadline = time.monotonic() + HANG
        while True:
            try:
                waiting = scrape(outsider, address)
                break
            except AssertionError:
                assert time.monotonic() < deadline
                time.sleep(0.3)
        node = re.search(r"node ([0-9a-f]{12}) uses", peers[0].log).group(1)
        labels = f'job="{job}",node="{node}"'
        assert waiting[f'rendezvous_phase{{{labels},phase="waiting"}}'] == 1.0
        assert waiting[f'rendezvous_phase{{{labels},phase="running"}}'] == 0.0
        assert waiting[f"rendezvous_members_seen{{{labels}}}"] == 1.0
        assert waiting[f"rendezvous_members_expected{{{labels}}}"] == 3.0
        assert waiting[f"rendezvous_round{{{labels}}}"] == 1.0
        assert f"rendezvous_command_uptime_seconds{{{labels}}}" not in waiting

        peers += start(net.hosts[1:3], argv, tmp_path)
        deadline = time.monotonic() + HANG
        while True:
            running = scrape(outsider, address)
            if running.get(f"rendezvous_training_step{{{labels}}}", 0) > 5:
                break
            assert time.monotonic() < deadline, running
            time.sleep(0.3)
        assert running[f'rendezvous_phase{{{labels},phase="running"}}'] == 1.0
        assert running[f"rendezvous_members_seen{{{labels}}}"] == 3.0
        assert running[f"rendezvous_command_uptime_seconds{{{labels}}}"] > 0
        assert running[f"rendezvous_rendezvous_duration_seconds{{{labels}}}"] > 0
        assert running[f"rendezvous_restarts{{{labels}}}"] == 0.0

        # Bursts of SIGSTOP (shorter than --liveness-timeout) hold rank 2 back.
        slow = command_pid(peers[2])
        marked = None
        deadline = time.monotonic() + HANG
        while marked is None and time.monotonic() < deadline:
            os.killpg(slow, signal.SIGSTOP)
            time.sleep(1.0)
            os.killpg(slow, signal.SIGCONT)
            status = job_status(outsider, job, "--json")
            if status["members"][2]["straggler"]:
                marked = status
        assert marked is not None, peers[0].log
        assert [m["straggler"] for m in marked["members"]] == [False, False, True]
        assert peers[0].log.count("is a straggler") == 1, peers[0].log
        assert f"{net.hosts[2].address}" in peers[0].log.split("is a straggler")[0].rsplit("\n", 1)[1]
    finally:
        stop(peers)
