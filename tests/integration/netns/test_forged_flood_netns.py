"""A job with a token, 300 forged adverts that claim to want a token at addresses below
every host's, and a third node starting late: the late node confirms the real coordinator
from the coordinator's own signed request, not after asking every forged advert first
(it could run out its --timeout doing that, and the job with it)."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patience import HANG
from peers import assert_consistent, join_argv, records, start_peer

SUPPORT = Path(__file__).resolve().parents[2] / "support"
FORGED = 300
LATE = 15  # seconds: the first two have long settled among the forged adverts
TIMEOUT = 45  # the job must form within LATE + this; asking 300 unused addresses takes longer


@pytest.mark.xfail(reason=(
    "not fixed in every run: passed 2 of 3 runs here with the fixes (vouched hints, peers above "
    "asked beside a slow one-at-a-time, a confirmed hint kept at its first silence), failed 3 of 3 "
    "before them; in the failing run the late node and the two others never saw each other's "
    "adverts through mDNS under the flood (no Status request either way), so the late node asked "
    "only forged adverts until its --timeout"
), strict=False)
def test_a_late_node_finds_its_coordinator_among_300_forged_adverts(make_network, tmp_path):
    net = make_network(4)
    job = f"ff-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    forger, *honest = net.hosts
    adverts = forger.popen([sys.executable, str(SUPPORT / "forge_adverts.py"), job, forger.address, str(FORGED), "auth"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peers = []
    try:
        assert adverts.stdout.readline().strip() == "advertised"
        options = ["--token-file", str(token), "--timeout", str(LATE + TIMEOUT)]
        for host in honest[:2]:
            peers.append(start_peer(join_argv(3, job, out, options=options), tmp_path, host.name, popen=host.popen))
        time.sleep(LATE)
        late = ["--token-file", str(token), "--timeout", str(TIMEOUT)]
        peers.append(start_peer(join_argv(3, job, out, options=late), tmp_path, honest[2].name, popen=honest[2].popen))
        for peer in peers:
            assert peer.wait(timeout=HANG) == 0, peer.log
    finally:
        adverts.kill()
        adverts.wait()
        for peer in peers:
            if peer.proc.poll() is None:
                peer.proc.kill()
    assert_consistent(records(out), [h.address for h in honest])
