"""A job with a token across hosts (network namespaces): only peers holding the token
form it; a host without it, or with another one, is refused and never runs its command."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from peers import assert_consistent, join_argv, records, start_peer

pytestmark = pytest.mark.netns


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
        join_argv(2, job, out, options=["--token-file", wrong, "--timeout", "15"]), tmp_path, "wrong", popen=wrong_token.popen
    )
    bare = start_peer(join_argv(2, job, out), tmp_path, "bare", popen=no_token.popen)
    time.sleep(1)
    peers = [
        start_peer(join_argv(2, job, out, options=["--token-file", right]), tmp_path, h.name, popen=h.popen)
        for h in honest
    ]
    started = time.monotonic()
    assert bare.wait(timeout=20) == 4, bare.log
    assert "this job requires a token" in bare.log
    assert time.monotonic() - started < 10, bare.log
    for peer in peers:
        assert peer.wait() == 0, peer.log
        # the forged coordinator is named once, with its address
        assert peer.log.count(f"at {wrong_token.address} failed") == 1, peer.log
    assert wrong_peer.wait() == 3, wrong_peer.log
    assert "authentication" in wrong_peer.log
    recs = records(out)
    assert_consistent(recs, [h.address for h in honest])  # the forged hosts never ran it
    for text in [bare.log, wrong_peer.log, *(p.log for p in peers), *(str(r["env"]) for r in recs)]:
        assert secret not in text
