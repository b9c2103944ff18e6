"""The preflight across real hosts (network namespaces): nodes whose GPUs, `--same-file`
or TensorFlow differ are refused before any command starts, on every node, naming the odd
host; an allowed difference only warns. GPUs come from a fake nvidia-smi on each host's
PATH, TensorFlow versions from package metadata on each host's PYTHONPATH."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Optional

import pytest

from peers import join_argv, start_peer
from fake_tools import fake_nvidia_smi, fake_tensorflow

pytestmark = pytest.mark.netns

REFUSED = 4


def start_hosts(net, tmp_path: Path, job: str, options=(), gpus=(8, 8, 8), tensorflow: Optional[tuple] = None):
    """One `rendezvous join --expect 3` per host, each with its own fake nvidia-smi (and
    fake TensorFlow), in its own working directory; the command only leaves a marker."""
    out = tmp_path / job
    out.mkdir()
    command = ["sh", "-c", f"touch {out}/ran-$RENDEZVOUS_RANK"]
    peers = []
    for i, host in enumerate(net.hosts):
        extra = {"PATH": f"{fake_nvidia_smi(out / f'bin{i}', gpus[i])}{os.pathsep}{os.environ['PATH']}"}
        if tensorflow:
            site = fake_tensorflow(out / f"site{i}", tensorflow[i])
            extra["PYTHONPATH"] = f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"

        def popen(argv, extra=extra, host=host, **kwargs):
            return host.popen(argv, cwd=tmp_path / host.name, **{**kwargs, "env": {**kwargs["env"], **extra}})

        (tmp_path / host.name).mkdir(exist_ok=True)
        argv = join_argv(3, job, out, options=[*options, "--timeout", "30"], command=command)
        peers.append(start_peer(argv, tmp_path, f"{job}-{host.name}", popen=popen))
    return peers, out


def assert_refused_everywhere(peers, out: Path, message: str) -> None:
    for peer in peers:
        assert peer.wait() == REFUSED, peer.log
        assert message in peer.log, peer.log
    assert list(out.glob("ran-*")) == [], "a command started"


def test_a_host_with_fewer_gpus_is_refused_on_all_three(make_network, tmp_path):
    net = make_network(3)
    peers, out = start_hosts(net, tmp_path, f"g-{secrets.token_hex(3)}", gpus=(8, 8, 4))
    assert_refused_everywhere(peers, out, f"preflight: {net.hosts[2].address} has 4 GPUs, the others 8")


def test_a_same_file_that_differs_is_refused_unless_allowed(make_network, tmp_path):
    net = make_network(3)
    for host in net.hosts:  # each host runs in its own directory: train.py differs on the third
        (tmp_path / host.name).mkdir()
        (tmp_path / host.name / "train.py").write_text("print('v2')\n" if host is net.hosts[2] else "print('v1')\n")
    odd = f"preflight: {net.hosts[2].address} has train.py with SHA-256 "
    peers, out = start_hosts(net, tmp_path, f"f-{secrets.token_hex(3)}", ["--same-file", "train.py"])
    assert_refused_everywhere(peers, out, odd)
    assert "(allow with --allow-mismatch same-file)" in peers[0].log

    options = ["--same-file", "train.py", "--allow-mismatch", "same-file"]
    peers, out = start_hosts(net, tmp_path, f"f-{secrets.token_hex(3)}", options)
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert odd in peer.log and "(allowed by --allow-mismatch same-file)" in peer.log, peer.log
    assert len(list(out.glob("ran-*"))) == 3


def test_a_host_with_another_tensorflow_is_refused_whatever_is_allowed(make_network, tmp_path):
    net = make_network(3)
    options = ["--allow-mismatch", "tensorflow-patch,python,gpu-model,same-file"]
    peers, out = start_hosts(net, tmp_path, f"t-{secrets.token_hex(3)}", options, tensorflow=("2.21.0", "2.20.1", "2.21.0"))
    assert_refused_everywhere(peers, out, f"preflight: {net.hosts[1].address} has TensorFlow 2.20.1, the others 2.21.0")
