"""The README's quick start, followed to the letter on two hosts (network namespaces) whose
firewall drops everything it is not told to let in: the README's nftables lines open the
ports, and its `rendezvous join` line trains the bundled trainer on both together."""

from __future__ import annotations

import json
import re
import secrets
import shlex
import shutil
import sys

import pytest

from paths import REPO
from peers import start_peer

pytestmark = [pytest.mark.netns, pytest.mark.training]

# A host firewall as distributions ship it: nothing comes in unless a rule lets it.
DEFAULT_DENY = """\
table inet filter {
  chain input {
    type filter hook input priority 0; policy drop;
    iif lo accept
    ct state established,related accept
  }
}
"""


def quick_start() -> tuple[list[str], list[str]]:
    """The README quick start's `rendezvous join` line and its nftables lines."""
    text = REPO.joinpath("README.md").read_text()
    section = re.search(r"^## Quick start.*?(?=^## )", text, re.M | re.S)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```", section, re.M | re.S)
    lines = [line.split("#")[0].strip() for block in blocks for line in block.splitlines()]
    (join,) = [line for line in lines if line.startswith("rendezvous join")]
    nft = [line.removeprefix("sudo ") for line in lines if line.startswith("sudo nft ")]
    assert nft, "the quick start shows no nftables rules"
    return shlex.split(join), nft


def firewall(host, rules: list[str] = ()) -> None:
    if shutil.which("nft") is None:
        pytest.fail("nftables' `nft` is missing: scripts/setup installs it (as root)", pytrace=False)
    host.run(["nft", "-f", "-"], input=DEFAULT_DENY, text=True, check=True, capture_output=True)
    for rule in rules:
        host.run(["sh", "-c", rule], check=True, capture_output=True, text=True)


def join(host, argv: list[str], tmp_path, name: str, extra: list[str] = ()):
    """`rendezvous join ...` as the README writes it, with the rendezvous of this checkout;
    `extra` goes after the README's trainer options."""
    env = {"RENDEZVOUS_RUNTIME_DIR": str(tmp_path / f"run-{name}")}
    command = [sys.executable, "-m", "rendezvous", *argv[1:], *extra]
    return start_peer(command, tmp_path, name, popen=host.popen, extra_env=env)


def test_the_firewall_blocks_a_job_until_the_readmes_rules_open_it(make_network, tmp_path):
    argv, rules = quick_start()
    job_at = argv.index("--job") + 1
    net = make_network(2)
    for host in net.hosts:
        firewall(host)
    # Closed: the nodes never see each other, and give up at --timeout (exit 3).
    closed = argv[:job_at] + [f"closed-{secrets.token_hex(3)}", "--timeout", "4"] + argv[job_at + 1:]
    blocked = [join(h, closed, tmp_path, f"closed-{h.index}") for h in net.hosts]
    for peer in blocked:
        assert peer.wait() == 3, peer.log
        assert "0 peers seen" in peer.log or "1/2" in peer.log or "no peer" in peer.log, peer.log

    # Opened with the README's lines: the README's command trains on both.
    for host in net.hosts:
        host.run(["nft", "flush", "ruleset"], check=True)
        firewall(host, rules)
    peers = []
    for host in net.hosts:
        extra = ["--threads", "1", "--result-file", str(tmp_path / f"{host.address}.json")]
        peers.append(join(host, argv, tmp_path, f"open-{host.index}", extra))
    for peer in peers:
        assert peer.wait(timeout=400) == 0, peer.log
    summaries = [json.loads((tmp_path / f"{a}.json").read_text()) for a in net.addresses]
    assert sorted(s["worker_index"] for s in summaries) == [0, 1]
    assert all(s["num_workers"] == 2 for s in summaries)
    assert len({s["test_accuracy"] for s in summaries}) == 1
    ruleset = net.hosts[0].run(["nft", "list", "ruleset"], capture_output=True, text=True, check=True).stdout
    assert "29631" in ruleset and "5353" in ruleset


def test_the_quick_start_fixes_the_tensorflow_port_its_rules_open():
    argv, rules = quick_start()
    port = argv[argv.index("--tf-port") + 1]
    assert any(port in rule for rule in rules)
    assert any("5353" in rule for rule in rules) and any("29630" in rule for rule in rules)
