"""The helper for training scripts: the job's variables, progress lines the daemon reads, the
error file, SIGTERM's default action, and that importing it loads nothing heavy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import rendezvous.script as rdv
from paths import REPO
from rendezvous.core.progress import Progress, parse_progress
from rendezvous.script._errors import MAX_MESSAGE, MAX_TRACEBACK

JOB = {
    "RENDEZVOUS_RANK": "1", "RENDEZVOUS_WORLD_SIZE": "3", "RENDEZVOUS_ROUND": "2",
    "RENDEZVOUS_RESTART_COUNT": "1", "RENDEZVOUS_JOB": "cifar", "RENDEZVOUS_NODE_ID": "a1b2",
    "RENDEZVOUS_COORDINATOR": "10.0.0.2:7070", "RENDEZVOUS_PROGRESS_FILE": "/run/p.jsonl",
}


def test_env_reads_what_the_daemon_sets():
    info = rdv.env(JOB)
    assert info == rdv.Env(rank=1, world_size=3, round=2, restart_count=1, job="cifar",
                           coordinator="10.0.0.2:7070", node_id="a1b2", progress_file="/run/p.jsonl",
                           error_file=None)
    assert not info.is_chief
    assert rdv.env({**JOB, "RENDEZVOUS_RANK": "0"}).is_chief


def test_env_is_none_outside_rendezvous():
    assert rdv.env({}) is None
    assert rdv.env({"TF_CONFIG": "{}"}) is None


@pytest.mark.parametrize("name, value", [
    ("RENDEZVOUS_RANK", "one"), ("RENDEZVOUS_RANK", "-1"), ("RENDEZVOUS_RANK", "3"),
    ("RENDEZVOUS_WORLD_SIZE", "0"), ("RENDEZVOUS_ROUND", ""), ("RENDEZVOUS_RESTART_COUNT", "x"),
])
def test_env_names_a_variable_it_cannot_read(name, value):
    with pytest.raises(ValueError, match=name):
        rdv.env({**JOB, name: value})


def test_env_without_a_restart_count_derives_it_from_the_round():
    environ = {k: v for k, v in JOB.items() if k != "RENDEZVOUS_RESTART_COUNT"}
    assert rdv.env(environ).restart_count == 1


def test_progress_lines_are_what_the_daemon_reads(tmp_path):
    path = tmp_path / "progress.jsonl"
    assert rdv.write_progress(epoch=3, epochs=10, step=120, loss=float("nan"), images_per_s=2310.5,
                              metrics={"accuracy": 0.5, "lr": float("inf"), "x" * 100: 1}, path=str(path))
    assert rdv.write_progress(epoch=4, step=160, loss=0.25, path=str(path))
    first, second = path.read_text().splitlines()
    assert "NaN" not in first and "Infinity" not in first
    assert parse_progress(first) == Progress(epoch=3, epochs=10, step=120, images_per_s=2310.5,
                                             metrics=(("accuracy", 0.5), ("x" * 64, 1.0)))
    assert parse_progress(second) == Progress(epoch=4, step=160, loss=0.25)


def test_progress_goes_nowhere_outside_rendezvous(monkeypatch):
    monkeypatch.delenv(rdv.PROGRESS_VARIABLE, raising=False)
    assert rdv.write_progress(epoch=1) is False


def test_progress_never_blocks_nor_fails_the_training(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody reads it: opening it for writing would block
    assert rdv.write_progress(epoch=1, path=str(fifo)) is False
    assert rdv.write_progress(epoch=1, path=str(tmp_path / "missing" / "p")) is False


def _failing(message="loss is NaN at step 1200"):
    @rdv.record
    def main():
        def inner():
            raise ValueError(message)
        inner()
    return main


def test_record_writes_the_error_file_and_raises_on(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv(rdv.ERROR_VARIABLE, str(path))
    with pytest.raises(ValueError, match="loss is NaN"):
        _failing()()
    error = json.loads(path.read_bytes().decode("utf-8"))
    assert set(error) == {"type", "message", "traceback"}
    assert error["type"] == "ValueError" and error["message"] == "loss is NaN at step 1200"
    assert error["traceback"].startswith("Traceback (most recent call last):")
    assert "in main" in error["traceback"] and "in wrapper" not in error["traceback"]
    assert "in inner" in error["traceback"] and error["traceback"].rstrip().endswith("ValueError: loss is NaN at step 1200")
    assert [p.name for p in tmp_path.iterdir()] == ["error.json"]  # no temporary file left


def test_record_writes_utf8_and_bounds_what_it_writes(tmp_path):
    path = tmp_path / "error.json"

    @rdv.record(path=str(path))
    def main():
        raise RuntimeError("perte infinie \u00e0 l'\u00e9poque 3 \u2014 " + "x" * (2 * MAX_MESSAGE))

    with pytest.raises(RuntimeError):
        main()
    raw = path.read_bytes()
    assert "\u00e9poque".encode("utf-8") in raw
    error = json.loads(raw.decode("utf-8"))
    assert len(error["message"]) == MAX_MESSAGE and error["message"].endswith("...")
    assert len(error["traceback"]) <= MAX_TRACEBACK


def test_record_keeps_the_return_value_and_records_no_exit(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv(rdv.ERROR_VARIABLE, str(path))
    assert rdv.record(lambda x: x + 1)(1) == 2

    @rdv.record
    def leave():
        sys.exit(3)

    with pytest.raises(SystemExit):
        leave()
    assert not path.exists()


def test_record_replaces_an_older_error_file(tmp_path):
    path = tmp_path / "error.json"
    path.write_text("{\"type\": \"Old\"}")
    assert rdv.write_error(KeyError("k"), str(path))
    assert json.loads(path.read_text())["type"] == "KeyError"


def test_an_unwritable_error_file_is_reported_and_the_error_raised_on(tmp_path, capsys):
    @rdv.record(path=str(tmp_path / "missing" / "error.json"))
    def main():
        raise ValueError("the real error")

    with pytest.raises(ValueError, match="the real error"):
        main()
    assert "cannot write the error file" in capsys.readouterr().err


def test_a_script_that_dies_of_an_exception_leaves_the_error_file(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import rendezvous.script as rdv

        @rdv.record
        def main():
            raise ZeroDivisionError("division by zero in epoch 2")

        main()
    """))
    path = tmp_path / "error.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), rdv.ERROR_VARIABLE: str(path)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "ZeroDivisionError" in done.stderr
    assert json.loads(path.read_text())["type"] == "ZeroDivisionError"


def test_exit_on_sigterm_ends_a_process_whose_sigterm_was_taken_over():
    code = textwrap.dedent("""
        import os, signal, time
        import rendezvous.script as rdv
        signal.signal(signal.SIGTERM, lambda *_: None)  # as TensorFlow's coordination service does
        rdv.exit_on_sigterm()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    """)
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert done.returncode == -signal.SIGTERM


@pytest.mark.parametrize("arguments, named", [
    ({"every": -1}, "every=-1"), ({"every": "5"}, "every='5'"), ({"global_batch_size": 0}, "global_batch_size=0"),
])
def test_the_progress_callback_names_a_bad_argument(arguments, named):
    with pytest.raises(ValueError, match=named):
        rdv.ProgressCallback(**arguments)


HEAVY = ("tensorflow", "keras", "tf_keras", "grpc", "zeroconf", "google.protobuf", "asyncio",
         "rendezvous.core", "rendezvous.config", "rendezvous.daemon", "numpy")


def test_importing_the_helper_loads_nothing_heavy():
    code = f"import sys, rendezvous.script; print([m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
