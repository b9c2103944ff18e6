"""A job with a token across hosts (network namespaces): only peers holding the token
form it; a host without it, or with another one, is refused and never runs its command."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from patience import HANG, wait_until
from peers import assert_consistent, join_argv, records, start_peer
from paths import SUPPORT

pytestmark = pytest.mark.netns

FORGER = (SUPPORT / "forge_join.py")


def token_file(directory: Path, name: str, secret: str) -> str:
    path = directory / name
    path.write_text(secret + "\n")
    os.chmod(path, 0o600)
    return str(path)


def test_only_peers_with_the_token_form_the_job(make_network, tmp_path):
    net = make_network(4)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    secret = secrets.token_hex(32)
    right = token_file(tmp_path, "right", secret)
    wrong = token_file(tmp_path, "wrong", secrets.token_hex(32))
    no_token, wrong_token, *honest = net.hosts
    # the two forged hosts hold the lowest addresses, and start first
    wrong_peer = start_peer(
        join_argv(2, job, out, options=["--token-file", wrong, "--timeout", "10"]), tmp_path, "wrong", popen=wrong_token.popen
    )
    bare = start_peer(join_argv(2, job, out), tmp_path, "bare", popen=no_token.popen)
    time.sleep(1)
    peers = [
        start_peer(join_argv(2, job, out, options=["--token-file", right]), tmp_path, h.name, popen=h.popen)
        for h in honest
    ]
    started = time.monotonic()
    assert bare.wait(timeout=HANG) == 4, bare.log
    assert "this job requires a token" in bare.log
    assert time.monotonic() - started < 20, bare.log  # at once, not at its --timeout (40 s)
    named = 0
    for peer in peers:
        assert peer.wait() == 0, peer.log
        # the forged host is named with its address, once at most when it asks, once when asked
        for needle in (f"refused {wrong_token.address}: authentication", f"at {wrong_token.address} failed"):
            assert peer.log.count(needle) <= 1, peer.log
            named += peer.log.count(needle)
    assert named >= 1, [p.log for p in peers]
    assert wrong_peer.wait() == 3, wrong_peer.log
    assert "authentication" in wrong_peer.log
    recs = records(out)
    assert_consistent(recs, [h.address for h in honest])  # the forged hosts never ran it
    for text in [bare.log, wrong_peer.log, *(p.log for p in peers), *(str(r["env"]) for r in recs)]:
        assert secret not in text


def forge(host, endpoint: str, job: str, claimed: dict, *replay: str) -> dict:
    argv = [sys.executable, str(FORGER), endpoint, job, claimed["node_id"], claimed["address"],
            str(claimed["port"]), str(claimed["tf_port"]), *replay]
    result = host.run(argv, capture_output=True, text=True, timeout=HANG)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def own_status(host, run_dir: Path) -> dict:
    result = host.run(
        [sys.executable, "-m", "rendezvous", "status", "--json"], capture_output=True, text=True, timeout=HANG,
        env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(run_dir)},
    )
    assert result.returncode == 0, result.stderr
    [status] = json.loads(result.stdout)
    return status


@pytest.mark.parametrize("with_token", [False, True], ids=["open", "token"])
def test_a_stolen_identity_or_a_replayed_exchange_from_another_host_is_refused(make_network, tmp_path, with_token):
    """Another host replays a waiting member's identity (read from `status --json`), claims
    an address not its own, or (token) replays a recorded join and proof: all refused, and
    the member's place is kept: the job forms as soon as its second peer comes."""
    net = make_network(3)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    secret = secrets.token_hex(32)
    options = ["--token-file", token_file(tmp_path, "token", secret)] if with_token else []
    first, second, attacker = net.hosts
    peers = [start_peer(join_argv(2, job, out, options=[*options, "-v"]), tmp_path, "first", popen=first.popen)]
    # registered for `status`, and joined to itself: a clone of it is then one too many
    joined = f"coordinating job {job!r}: 1/2 peers joined"
    wait_until(lambda: joined in peers[0].log or peers[0].proc.poll() is not None, lambda: peers[0].log)
    assert peers[0].proc.poll() is None, peers[0].log
    status = own_status(first, tmp_path / "run")
    assert secret not in json.dumps(status)
    victim = status["node"]
    endpoint = f"{victim['address']}:{victim['port']}"
    if with_token:
        replayed = forge(attacker, endpoint, job, {**victim, "address": attacker.address, "node_id": "feedfeedfeed"}, "--replay", options[1])
        assert replayed["code"] == "UNAUTHENTICATED", replayed
    else:
        stolen = forge(attacker, endpoint, job, victim)
        assert stolen["reason"] == "BAD_REQUEST" and "connects from" in stolen["message"], stolen
        elsewhere = forge(attacker, endpoint, job, {**victim, "node_id": "feedfeedfeed", "address": second.address})
        assert elsewhere["reason"] == "BAD_REQUEST", elsewhere
        clone = forge(attacker, endpoint, job, {**victim, "address": attacker.address})
        assert clone["code"] == "ALREADY_EXISTS", clone
    peers.append(start_peer(join_argv(2, job, out, options=options), tmp_path, "second", popen=second.popen))
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), [first.address, second.address])


@contextlib.contextmanager
def forged_adverts(forger, job: str, *how: str) -> Iterator[None]:
    """tests/support/forge_adverts.py on `forger` (`how`: its COUNT and auth), until the block ends."""
    adverts = forger.popen([sys.executable, str(SUPPORT / "forge_adverts.py"), job, forger.address, *how],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert adverts.stdout.readline().strip() == "advertised"
        yield
    finally:
        adverts.kill()
        adverts.wait()


def test_forged_adverts_are_hints_that_stop_nothing(make_network, tmp_path):
    """An advert with --expect 1, one of a running job with a made-up coordinator, and ten
    at unused lower addresses: none is confirmed by a Status over gRPC, so none is acted
    on; the job forms as if they were not there."""
    net = make_network(3)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    forger, *honest = net.hosts
    with forged_adverts(forger, job):
        peers = []
        for host in honest:  # the first one waits among the forged adverts a while
            peers.append(start_peer(join_argv(2, job, out, options=["--timeout", "25"]), tmp_path, host.name, popen=host.popen))
            time.sleep(4)
        for peer in peers:
            assert peer.wait() == 0, peer.log
    assert_consistent(records(out), [h.address for h in honest])


def test_with_a_token_hundreds_of_forged_adverts_below_every_host_do_not_keep_a_late_node_out(make_network, tmp_path):
    """300 adverts marked as wanting the token, at unused addresses below every host, and the
    third node starting long after the first two: each is asked in turn and never answers
    before its call times out, yet the coordinator keeps places to ask the late node (its
    signed request is how the late node learns of the coordinator) and the job forms."""
    net = make_network(4)
    job = f"n-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    token = token_file(tmp_path, "token", secrets.token_hex(32))
    forger, *honest = net.hosts
    with forged_adverts(forger, job, "300", "auth"):
        options = ["--token-file", token, "--timeout", str(HANG)]
        peers = [start_peer(join_argv(3, job, out, options=options), tmp_path, host.name, popen=host.popen)
                 for host in honest[:2]]
        time.sleep(15)  # the first two have asked the forged adverts and backed off from them
        peers.append(start_peer(join_argv(3, job, out, options=options), tmp_path, honest[2].name,
                                popen=honest[2].popen))
        for peer in peers:
            assert peer.wait() == 0, peer.log
    assert_consistent(records(out), [h.address for h in honest])
