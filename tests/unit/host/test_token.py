"""--token-file: modes, owners and kinds of file refused with exit 2 naming the path; the
secret itself never printed."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest

from rendezvous.errors import ConfigError
from rendezvous.host.token import load_keys, read_secret
from paths import SUPPORT

SECRET = "s3cret-0123456789abcdef-s3cret"


@pytest.fixture
def token(tmp_path):
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    return path


def test_a_private_file_gives_the_secret_without_its_newline(token):
    assert read_secret(str(token)) == SECRET.encode()
    assert load_keys(None, "job") is None
    assert load_keys(str(token), "a") != load_keys(str(token), "b")


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o620, 0o602])
def test_a_file_others_can_read_or_change_is_refused_naming_path_and_mode(token, mode):
    token.chmod(mode)
    with pytest.raises(ConfigError) as error:
        read_secret(str(token))
    assert str(token) in str(error.value) and f"{mode:04o}" in str(error.value)
    assert SECRET not in str(error.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_a_file_of_another_user_is_refused(token):
    os.chown(token, 65534, -1)
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        read_secret(str(token))


def test_a_fifo_a_directory_a_symlink_and_a_missing_file_are_refused(tmp_path, token):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    link = tmp_path / "link"
    link.symlink_to(token)
    for path in (fifo, tmp_path, link, tmp_path / "missing"):
        with pytest.raises(ConfigError, match=str(path)):
            read_secret(str(path))


def test_a_short_secret_is_refused(token):
    token.write_text("short")
    with pytest.raises(ConfigError, match="bytes"):
        read_secret(str(token))


def test_join_exits_2_naming_the_path_and_mode(token):
    token.chmod(0o644)
    result = subprocess.run(
        [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--token-file", str(token), "--", "true"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result
    assert str(token) in result.stderr and "0644" in result.stderr
    assert SECRET not in result.stderr + result.stdout


def test_port_equal_to_tf_port_exits_2():
    result = subprocess.run(
        [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--port", "7000", "--tf-port", "7000", "--", "true"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2, result
    assert "--port and --tf-port are both 7000" in result.stderr


def test_restart_rounds_run_with_a_token(tmp_path, token):
    """Every round opens new streams, each with its own challenge: round 2 forms too."""
    from peers import join_argv, start_peer

    job = f"t-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    command = [sys.executable, str((SUPPORT / "fault_command.py")), str(out), "fail-rank-1:7"]
    options = ["--token-file", str(token), "--max-restarts", "1", "--liveness-timeout", "1.5", "--stop-grace", "1",
               "--timings", "keepalive=1,end-grace=0.5"]
    peers = [
        start_peer(join_argv(2, job, out, address=a, options=options, command=command), tmp_path, a)
        for a in ("127.0.0.2", "127.0.0.3")
    ]
    assert [p.wait() for p in peers] == [7, 7], [p.log for p in peers]
    for peer in peers:
        assert "round 2 frozen: worker" in peer.log, peer.log
        assert SECRET not in peer.log
