"""The trainer's option checks: a bad value stops it at once with one readable line and
exit status 2, before TensorFlow is imported."""

from __future__ import annotations

import sys

import pytest

from trainer_cluster import REPO, run_trainer

sys.path.insert(0, str(REPO))
from trainer.cli import build_parser  # noqa: E402


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
