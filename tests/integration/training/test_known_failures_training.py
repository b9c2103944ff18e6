"""Known failures recognized in real TensorFlow runs: each script fails as a user's does,
run by two `rendezvous join --expect 2` on loopback addresses, and every node's failure
line then carries the fix and the troubleshooting link. TensorFlow's own multi-worker
tutorial is one of them, as written (Keras 3), and trains once the fix is applied."""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

import pytest

from peers import join_argv, start_peer
from rendezvous.core.known_failures import (
    GROUP_SIZE, KERAS3_FIT, SCRIPT_TF_CONFIG, STRATEGY_LATE, TF_PORT_BLOCKED, TF_PORT_IN_USE)

pytestmark = [pytest.mark.training]

SUPPORT = Path(__file__).parents[2] / "support"
TUTORIAL = SUPPORT / "tutorial" / "main.py"
FAILURES = SUPPORT / "tf_failures.py"
TF_CONFIG_SCRIPT = SUPPORT / "tf_config_script.py"
THREADS = {"TF_NUM_INTEROP_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1"}


def run_two(tmp_path: Path, command: list[str], env: dict[str, str] = {}, restarts: str = "0") -> list[str]:
    """Two nodes (127.0.0.2 and .3) run `command` to the end; their logs (exit status checked by the caller)."""
    tmp_path.mkdir(exist_ok=True)
    job = f"k-{secrets.token_hex(4)}"
    peers = [
        start_peer(join_argv(2, job, tmp_path, address, ["--max-restarts", restarts, "--timeout", "90"], command),
                   tmp_path, f"node-{i}", extra_env={**THREADS, **env, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / f"run-{i}")})
        for i, address in enumerate(["127.0.0.2", "127.0.0.3"])
    ]
    codes = [peer.wait() for peer in peers]
    return [f"exit status {code}\n{peer.log}" for code, peer in zip(codes, peers)]


def assert_every_node_shows(logs: list[str], known) -> None:
    for log in logs:
        assert not log.startswith("exit status 0"), log
        # its own command's failure, and the one the abort names when another node's came first
        lines = [l for l in log.splitlines() if "ERROR command failed:" in l]
        assert lines and all(l.endswith(f"; fix: {known.fix} (see {known.link})") for l in lines), log
        # and the last line it prints, the abort's reason
        assert log.rstrip().splitlines()[-1].endswith(f"; fix: {known.fix} (see {known.link})"), log


def test_the_tutorials_code_fails_with_the_keras_3_fix_and_trains_once_it_is_applied(tmp_path):
    """TensorFlow's "Multi-worker training with Keras" (tf.keras Sequential, model.fit), its
    code unchanged but for generated data in place of the MNIST download."""
    failed = run_two(tmp_path / "keras3", [sys.executable, str(TUTORIAL)], env={"TF_USE_LEGACY_KERAS": "0"})
    assert_every_node_shows(failed, KERAS3_FIT)
    assert all("Attempt to convert a value (PerReplica" in log for log in failed)
    fixed = run_two(tmp_path / "legacy", [sys.executable, str(TUTORIAL)], env={"TF_USE_LEGACY_KERAS": "1"})
    for log in fixed:
        assert log.startswith("exit status 0"), log
        assert "Epoch 3/3" in log and "command failed" not in log, log


@pytest.mark.parametrize("mode, known", [
    ("late", STRATEGY_LATE), ("group-size", GROUP_SIZE), ("port-held", TF_PORT_IN_USE),
], ids=lambda v: v if isinstance(v, str) else "")
def test_each_known_failure_of_a_real_script_shows_its_fix_on_every_node(tmp_path, mode, known):
    logs = run_two(tmp_path, [sys.executable, str(FAILURES), mode])
    assert_every_node_shows(logs, known)
    assert not any("sets TF_CONFIG itself" in log for log in logs), logs


def test_a_script_that_sets_its_own_tf_config_is_named_at_the_start_and_in_the_failure(tmp_path):
    """The tutorial's TF_CONFIG (localhost:12345, index 0) on both nodes of one machine: one
    binds the port, the other fails; on two machines both would wait for ever, so the
    warning at the start is what says it there."""
    logs = run_two(tmp_path, [sys.executable, str(TF_CONFIG_SCRIPT)])
    assert_every_node_shows(logs, SCRIPT_TF_CONFIG)
    warned = f'WARNING {TF_CONFIG_SCRIPT} line 7 sets TF_CONFIG itself (os.environ["TF_CONFIG"] = json.dumps({{)'
    assert all(warned in log for log in logs), logs


DROP_TF_PORT = """table inet blocked {
  chain input {
    type filter hook input priority 0;
    tcp dport %d drop
  }
}
"""


@pytest.mark.netns
def test_a_tensorflow_port_a_firewall_drops_fails_the_round_with_its_fix(make_network, tmp_path):
    """Host 0 drops TCP to its TensorFlow port (rendezvous' port passes): the strategy's
    start-up would wait for ever on both, silently; host 1 finds the port silent and fails."""
    net = make_network(2)
    port = 29631
    blocked = net.hosts[0].run(["nft", "-f", "-"], input=DROP_TF_PORT % port, text=True, capture_output=True)
    assert blocked.returncode == 0, blocked.stderr
    job = f"k-{secrets.token_hex(4)}"
    options = ["--tf-port", str(port), "--max-restarts", "0", "--timeout", "90", "--stop-grace", "2",
               "--timings", "tf-port-silence=5"]
    peers = [start_peer(join_argv(2, job, tmp_path, options=options, command=[sys.executable, str(FAILURES), "plain"]),
                        tmp_path, host.name, popen=host.popen,
                        extra_env={**THREADS, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / f"run-{host.index}")})
             for host in net.hosts]
    logs = [f"exit status {peer.wait()}\n{peer.log}" for peer in peers]
    assert_every_node_shows(logs, TF_PORT_BLOCKED)
    assert all(f"TensorFlow port {net.hosts[0].address}:{port} of rank 0" in log for log in logs), logs
