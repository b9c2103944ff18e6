"""A wrapper command across real hosts (network namespaces on one bridge): every node uses
the same fixed TF port, as a cluster's firewall rules often want, and the child that holds it
is slow to obey SIGTERM."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time

import pytest

from peers import alive, join_argv, start_peer
from paths import SUPPORT

pytestmark = pytest.mark.netns

TF_PORT = 23456
TIMINGS = ["--liveness-timeout", "1.5", "--timings", "keepalive=1,suspect-after=1,end-grace=0.5"]


def starts(out, round_: int) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in out.glob(f"*-{round_}.json")), key=lambda r: r["rank"])


def test_a_killed_wrapper_on_one_host_restarts_the_round_on_the_same_fixed_port(make_network, tmp_path):
    net = make_network(3)
    job = f"w-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    command = ["sh", "-c", f"{sys.executable} {SUPPORT / 'slow_exit.py'} {out} --term-delay 2; exit $?"]
    options = [*TIMINGS, "--tf-port", str(TF_PORT)]  # --abort-grace 3 by default: more than the 2 s
    peers = [start_peer(join_argv(3, job, out, options=options, command=command), tmp_path, h.name, popen=h.popen)
             for h in net.hosts]
    deadline = time.monotonic() + 40
    while len(starts(out, 1)) < 3:
        assert time.monotonic() < deadline and all(p.proc.poll() is None for p in peers), \
            "\n".join(p.log for p in peers)
        time.sleep(0.05)
    first = starts(out, 1)
    os.kill(first[2]["ppid"], signal.SIGKILL)  # the shell on the last host; its child holds the port
    for peer in peers:
        assert peer.wait() == 0, peer.log
    second = starts(out, 2)
    assert [r["port"] for r in first] == [r["port"] for r in second] == [TF_PORT] * 3
    assert not any(alive(r["pid"]) for r in first)
