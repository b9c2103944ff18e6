"""Real TensorFlow training: single process, two workers on loopback, resume
after a kill, a lost peer, and the strategy-first ordering."""

from __future__ import annotations

import re
import signal
import time

import pytest

from cifar10 import write_cifar10
from trainer_cluster import finish, free_port, result, run_python, start_workers, tf_config

pytestmark = pytest.mark.training

EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+) loss \d+\.\d{4} accuracy \d\.\d{4} \d+\.\ds$")
DONE_LINE = re.compile(r"^done: test accuracy \d\.\d{4} ")
FAST = ["--threads", "1", "--dataset", "digits", "--model", "small_cnn"]

# Counts the strategies the trainer creates successfully. With a cluster in TF_CONFIG, TensorFlow
# refuses to create one after any op has started its runtime: the second test shows that
# it does so here, which makes a clean run of the first one the proof of the ordering.
STRATEGY_PROBE = """
import sys
from trainer._keras import tf

created = []
original = tf.distribute.MultiWorkerMirroredStrategy.__init__

def probe(self, *args, **kwargs):
    original(self, *args, **kwargs)
    created.append(self)

tf.distribute.MultiWorkerMirroredStrategy.__init__ = probe
if {op_first}:
    tf.constant(1.0)  # a TensorFlow op before the strategy
from trainer.cli import main
rc = main({argv!r})
print(f"strategies created: {{len(created)}}", flush=True)
sys.exit(rc)
"""


def epoch_lines(text: str) -> list[re.Match]:
    return [m for m in map(EPOCH_LINE.match, text.splitlines()) if m]


def test_strategy_is_created_before_any_tensorflow_op():
    config = tf_config([free_port()], 0)  # a one-worker cluster: ordering is enforced
    proc = run_python(STRATEGY_PROBE.format(op_first=False, argv=["--epochs", "1"]), config)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "strategies created: 1" in proc.stdout
    assert DONE_LINE.search(proc.stdout.splitlines()[-2])


def test_an_op_before_the_strategy_is_caught():
    """Control for the test above: with an op run first, TensorFlow refuses to create
    the strategy."""
    config = tf_config([free_port()], 0)
    proc = run_python(STRATEGY_PROBE.format(op_first=True, argv=["--epochs", "1"]), config)
    assert proc.returncode != 0
    assert "Collective ops must be configured at program startup" in proc.stderr
    assert "strategies created: 1" not in proc.stdout


def test_two_workers_train_to_identical_weights(tmp_path):
    model_dir = tmp_path / "model"
    workers = start_workers(2, [*FAST, "--epochs", "8", "--model-dir", str(model_dir)], tmp_path)
    codes = finish(workers, timeout=150)
    assert codes == [0, 0], [w.stderr()[-3000:] for w in workers]
    results = [result(tmp_path, "run", i) for i in range(2)]
    for i, (w, r) in enumerate(zip(workers, results)):
        lines = epoch_lines(w.stdout())
        assert [int(m[1]) for m in lines] == list(range(1, 9))
        assert DONE_LINE.match(w.lines[-1]), w.lines
        assert r["worker_index"] == i and r["num_workers"] == 2
        assert r["initial_epoch"] == 0 and r["epochs"] == 8
        assert r["test_accuracy"] > 0.9, r
        assert 0 < r["final_loss"] < 1 and r["final_accuracy"] > 0.8
        assert re.fullmatch(r"[0-9a-f]{64}", r["weights_sha256"])
    assert results[0]["is_chief"] and not results[1]["is_chief"]
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    # Evaluated together, each of the 359 test images once (the last of 6 batches of 64
    # is padded with images that weigh nothing).
    accuracy = results[0]["test_accuracy"]
    assert results[1]["test_accuracy"] == accuracy
    assert accuracy * 359 == pytest.approx(round(accuracy * 359), abs=1e-3)
    # Metrics are aggregated over the cluster: both workers print the same
    # lines, apart from the epoch time.
    without_time = [[m[0].rsplit(" ", 1)[0] for m in epoch_lines(w.stdout())] for w in workers]
    assert without_time[0] == without_time[1]
    assert (model_dir / "saved_model.pb").is_file()  # written by the chief only


def test_killed_job_resumes_from_backup(tmp_path):
    backup = tmp_path / "backup"
    args = [*FAST, "--epochs", "12", "--backup-dir", str(backup)]
    first = start_workers(2, args, tmp_path, tag="first")
    try:
        # BackupAndRestore runs before the epoch line is printed.
        first[0].wait_for_line("epoch 1/12", timeout=120)
        assert all(w.proc.poll() is None for w in first), "finished before the kill"
    finally:
        for w in first:
            w.kill()
    assert (backup / "chief" / "checkpoint").is_file()

    second = start_workers(2, args, tmp_path, tag="second")
    codes = finish(second, timeout=150)
    assert codes == [0, 0], [w.stderr()[-3000:] for w in second]
    results = [result(tmp_path, "second", i) for i in range(2)]
    start = results[0]["initial_epoch"]
    assert start >= 1
    for w, r in zip(second, results):
        assert r["initial_epoch"] == start and r["epochs"] == 12
        assert [int(m[1]) for m in epoch_lines(w.stdout())] == list(range(start + 1, 13))
        assert r["test_accuracy"] > 0.9
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    assert not (backup / "chief").exists()  # a finished job removes its backup


def test_lost_peer_exits_with_cluster_error(tmp_path):
    workers = start_workers(2, [*FAST, "--epochs", "200"], tmp_path)
    try:
        workers[1].wait_for_line("epoch 1/200", timeout=120)
        workers[0].kill()
        code = workers[1].wait(timeout=60)
    finally:
        for w in workers:
            w.kill()
    assert code == 3
    assert "trainer: lost the cluster" in workers[1].stderr()
    assert "Traceback" not in workers[1].stderr()


def test_frozen_peer_hits_the_collective_timeout(tmp_path):
    workers = start_workers(2, [*FAST, "--epochs", "200", "--collective-timeout", "5"], tmp_path)
    try:
        workers[0].wait_for_line("epoch 2/200", timeout=120)
        workers[1].proc.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        code = workers[0].wait(timeout=60)
        elapsed = time.monotonic() - started
    finally:
        for w in workers:
            w.kill()
    assert code == 3
    err = workers[0].stderr()
    assert "trainer: lost the cluster: DeadlineExceededError" in err and "timed out" in err, err[-3000:]
    assert elapsed < 30


def test_two_workers_train_resnet56_on_cifar10_with_the_recipe(tmp_path):
    """The recipe's defaults and pipeline on CIFAR-shaped random data: 5 x 26 training
    images, one step of the recipe's global batch of 128 (64 on each of 2 workers)."""
    write_cifar10(tmp_path / "cifar", per_batch=26, test=129)
    args = ["--threads", "1", "--model", "resnet56", "--dataset", "cifar10",
            "--data-dir", str(tmp_path / "cifar"), "--epochs", "1"]
    workers = start_workers(2, args, tmp_path)
    # Tracing ResNet-56 takes most of it: up to 160 s was seen on 2 busy cores.
    codes = finish(workers, timeout=240)
    assert codes == [0, 0], [w.stderr()[-3000:] for w in workers]
    results = [result(tmp_path, "run", i) for i in range(2)]
    for w, r in zip(workers, results):
        assert (r["model"], r["dataset"], r["recipe"]) == ("resnet56", "cifar10", "resnet56/cifar10")
        assert (r["global_batch_size"], r["steps_per_epoch"], r["epochs"]) == (128, 1, 1)
        assert r["learning_rate"] == pytest.approx(0.1)
        assert "sgd learning rate 0.1, x0.1 after 30 epochs, x0.01 after 45 epochs" in w.lines[0]
    # BatchNorm moving statistics included: the workers end identical.
    assert results[0]["weights_sha256"] == results[1]["weights_sha256"]
    # Evaluated together: 129 test images make one full global batch and 1 image padded
    # to a second one; every image counts once, the padding not at all.
    accuracy = results[0]["test_accuracy"]
    assert results[1]["test_accuracy"] == accuracy
    assert accuracy * 129 == pytest.approx(round(accuracy * 129), abs=1e-3)
