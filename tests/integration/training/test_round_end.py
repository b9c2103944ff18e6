"""What a plain MultiWorkerMirroredStrategy script gets when its round ends, through real
`rendezvous join` processes on loopback (tests/support/plain_mwms.py: no signal handling of
its own). Creating the strategy hands SIGTERM to TensorFlow's coordination service, which
takes it as a preemption notice and trains on: the daemon's SIGKILL after the grace is what
ends such a script; rendezvous.script.exit_on_sigterm() makes SIGTERM end it at once."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

import pytest

from patience import HANG, wait_until
from paths import REPO, SUPPORT
from peers import FAST, alive, join_argv, start_peer

pytestmark = pytest.mark.training

PLAIN = SUPPORT / "plain_mwms.py"
ADDRESSES = ("127.0.0.2", "127.0.0.3")


def start(tmp_path, options, *script_args):
    job = f"plain-{secrets.token_hex(3)}"
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    command = [sys.executable, str(PLAIN), str(out), *script_args]
    return [start_peer(join_argv(2, job, out, address, [*FAST, "--timeout", "120", *options], command),
                       tmp_path, address, extra_env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
            for address in ADDRESSES], out


def pids(out, round_: int) -> list[int]:
    found = [p.read_text() for p in out.glob(f"*-{round_}.pid")]
    return [int(text) for text in found if text]


def wait_training(peers, round_: int) -> None:
    def both():
        assert all(p.proc.poll() is None for p in peers), peers[0].log + peers[1].log
        return all(f"training in round {round_}" in p.log for p in peers)
    wait_until(both, lambda: f"both commands training in round {round_}:\n{peers[0].log}\n{peers[1].log}")


def test_an_aborted_round_ends_a_plain_script_that_keeps_training_and_the_job_recovers(tmp_path):
    peers, out = start(tmp_path, ["--abort-grace", "1"], "--steps", "20", "--forever-in-round-1")
    wait_training(peers, 1)
    first = pids(out, 1)
    assert len(first) == 2
    os.kill(first[1], signal.SIGKILL)
    for peer in peers:  # round 2 trains its 20 steps and the job completes on both nodes
        assert peer.wait() == 0, peer.log
    assert not any(alive(pid) for pid in first)
    assert len(pids(out, 2)) == 2 and all("done" in p.log for p in peers)


@pytest.mark.parametrize("script_args, status, grace", [
    ((), 128 + signal.SIGKILL, "2"),  # TensorFlow keeps SIGTERM: killed after --stop-grace
    (("--exit-on-sigterm",), 128 + signal.SIGTERM, "60"),  # the helper: SIGTERM ends it at once
])
def test_a_stopped_job_ends_a_plain_script_within_the_stop_grace(tmp_path, script_args, status, grace):
    # Both graces alike: a node may hear of the round's abort (the other daemon stopped first)
    # before its own SIGTERM, and then stops its command with the abort's grace.
    peers, out = start(tmp_path, ["--stop-grace", grace, "--abort-grace", grace], *script_args)
    wait_training(peers, 1)
    began = time.monotonic()
    for peer in peers:
        peer.proc.send_signal(signal.SIGTERM)
    for peer in peers:  # the daemon exits as its command did
        assert peer.wait(timeout=50) == status, peer.log
    assert time.monotonic() - began < 50  # under the helper's 60 s grace: SIGTERM did it
    assert not any(alive(pid) for pid in pids(out, 1))
    ignored = [f"ignored SIGTERM for {grace}s: SIGKILL" in p.log for p in peers]
    assert ignored == [status == 128 + signal.SIGKILL] * 2, peers[0].log


def test_the_bundled_trainer_obeys_sigterm_while_blocked_inside_tensorflow(tmp_path):
    """A Python handler waits for the main thread to get control back, which a step blocked
    in a collective does not give (8 s measured, until TensorFlow's heartbeat failed it): the
    trainer's handler also runs from a thread woken by the signal."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("TF_CONFIG", None)
    log = tmp_path / "blocked.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(SUPPORT / "blocked_trainer.py")], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "blocked" in log.read_text() or proc.poll() is not None, "the dequeue")
        time.sleep(0.5)  # into the dequeue (were it not yet, the plain handler would do)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG) == 128 + signal.SIGTERM, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "trainer: stopped by SIGTERM" in log.read_text()
