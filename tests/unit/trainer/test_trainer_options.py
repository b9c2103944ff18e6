"""The trainer's option checks: a bad value or an unwritable output path stops it at once
with one readable line and exit status 2, before TensorFlow is imported; a write that fails
after the training is one line and exit status 1, never a traceback."""

from __future__ import annotations

import json
import sys

import pytest

from trainer_cluster import REPO, run_python, run_trainer

sys.path.insert(0, str(REPO))
from trainer.cli import build_parser  # noqa: E402

# Parses the options and checks the paths, then stops: `tensorflow` must not be imported by then.
CHECK_ONLY = """
import sys
import trainer.cli as cli
from trainer import ConfigError
args = cli.build_parser().parse_args({argv!r})
try:
    cli.check_output_paths(args, cli.read_tf_config())
except ConfigError as e:
    print(f"trainer: {{e}}", file=sys.stderr)
    sys.exit(2)
assert "tensorflow" not in sys.modules
"""


def assert_one_line_error(proc, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "option, value, needle",
    [
        ("--seed", "-1", "argument --seed: must be a whole number from 0 to 4294967295, got '-1'"),
        ("--seed", "4294967296", "got '4294967296'"),
        ("--seed", "x", "argument --seed: must be a whole number"),
        ("--epochs", "abc", "argument --epochs: must be a whole number of at least 1, got 'abc'"),
        ("--epochs", "0", "argument --epochs: must be a whole number of at least 1, got '0'"),
        ("--epochs", "1_0", "got '1_0'"),
        ("--epochs", "2.5", "got '2.5'"),
        ("--global-batch-size", "-64", "argument --global-batch-size: must be a whole number"),
        ("--steps-per-epoch", "many", "argument --steps-per-epoch: must be a whole number"),
        ("--threads", "-1", "argument --threads: must be a whole number from 0 to 4096, got '-1'"),
        ("--threads", "99999999999", "got '99999999999'"),
        ("--learning-rate", "0", "argument --learning-rate: must be a positive number, got '0'"),
        ("--learning-rate", "inf", "got 'inf'"),
        ("--learning-rate", "nan", "got 'nan'"),
        ("--learning-rate", "fast", "got 'fast'"),
        ("--collective-timeout", "-1", "argument --collective-timeout: must be a number of seconds from 0"),
        ("--collective-timeout", "inf", "got 'inf'"),
        ("--collective-timeout", "1e300", "got '1e300'"),
    ],
)
def test_bad_value_is_one_readable_line_and_exit_2(option, value, needle, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args([option, value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert needle in err, err
    assert "invalid" not in err and "_int" not in err and "_float" not in err, err


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("--seed", "0", 0),
        ("--seed", "4294967295", 2**32 - 1),
        ("--epochs", "3", 3),
        ("--threads", "0", 0),
        ("--learning-rate", "0.05", 0.05),
        ("--learning-rate", "1e-4", 1e-4),
        ("--collective-timeout", "0", 0.0),
        ("--collective-timeout", "12.5", 12.5),
    ],
)
def test_good_values_parse(option, value, expected):
    args = build_parser().parse_args([option, value])
    assert getattr(args, option[2:].replace("-", "_")) == expected


def test_negative_seed_exits_2_from_the_command_line():
    proc = run_trainer(["--seed", "-1"])
    assert_one_line_error(proc, 2, "--seed", "'-1'")


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--result-file", "/proc/nope/x.json"], ["--result-file /proc/nope/x.json", "/proc/nope", "cannot be created"]),
        (["--result-file", "/proc/x.json"], ["--result-file /proc/x.json", "cannot write in /proc"]),
        (["--model-dir", "/proc/nope/model"], ["--model-dir /proc/nope/model", "cannot be created"]),
        (["--backup-dir", "/proc/nope/backup"], ["--backup-dir /proc/nope/backup", "cannot be created"]),
    ],
)
def test_unwritable_output_path_exits_2_before_training(args, needles):
    proc = run_trainer(["--epochs", "1", *args])
    assert_one_line_error(proc, 2, *needles)
    assert "epoch" not in proc.stdout
    proc = run_python(CHECK_ONLY.format(argv=args))
    assert_one_line_error(proc, 2, *needles)


def test_output_path_under_a_file_or_onto_a_directory_exits_2(tmp_path):
    (tmp_path / "file").write_text("")
    proc = run_python(CHECK_ONLY.format(argv=["--result-file", str(tmp_path / "file" / "r.json")]))
    assert_one_line_error(proc, 2, f"{tmp_path / 'file'} is not a directory")
    proc = run_python(CHECK_ONLY.format(argv=["--result-file", str(tmp_path)]))
    assert_one_line_error(proc, 2, "is a directory")
    proc = run_python(CHECK_ONLY.format(argv=["--backup-dir", str(tmp_path / "file")]))
    assert_one_line_error(proc, 2, "is not a directory")


def test_writable_output_paths_pass_and_leave_nothing_behind(tmp_path):
    argv = [
        "--result-file", str(tmp_path / "new" / "r.json"),
        "--model-dir", str(tmp_path / "model"),
        "--backup-dir", str(tmp_path),
    ]
    proc = run_python(CHECK_ONLY.format(argv=argv))
    assert proc.returncode == 0, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_model_dir_is_checked_on_the_chief_only():
    # Only worker 0 keeps the model; the others save it to a temporary directory.
    two = json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}})
    proc = run_python(CHECK_ONLY.format(argv=["--model-dir", "/proc/nope/model"]), config=two)
    assert proc.returncode == 0, proc.stderr


# The output path goes bad after the up-front check (here: the check is skipped).
AFTER_THE_CHECK = """
import sys
import trainer.cli as cli
cli.check_output_paths = lambda args, cluster: None
sys.exit(cli.main({argv!r}))
"""


@pytest.mark.training
@pytest.mark.parametrize(
    "option, needle",
    [("--result-file", "cannot write --result-file"), ("--model-dir", "cannot save the model in")],
)
def test_a_failed_write_after_training_is_one_line_and_exit_1(tmp_path, option, needle):
    (tmp_path / "file").write_text("")
    target = str(tmp_path / "file" / "out")  # under a file: cannot be created
    proc = run_python(AFTER_THE_CHECK.format(argv=["--epochs", "1", "--threads", "1", option, target]), timeout=300)
    assert_one_line_error(proc, 1, f"trainer: {needle} {target}: ")
    assert "epoch 1/1" in proc.stdout
    assert len(proc.stderr.strip().splitlines()[-1]) < 300


@pytest.mark.training
def test_a_failed_result_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "result"
    target.mkdir()  # a directory where the file should go
    proc = run_python(AFTER_THE_CHECK.format(argv=["--epochs", "1", "--threads", "1", "--result-file", str(target)]), timeout=300)
    assert_one_line_error(proc, 1, f"cannot write --result-file {target}: Is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result"]
