"""Offline datasets and the command line's checks, which run before TensorFlow."""

from __future__ import annotations

import pickle
import re
import sys
import time

import numpy as np
import pytest

from cifar10 import write_cifar10
from trainer_cluster import REPO, run_python, run_trainer

sys.path.insert(0, str(REPO))
from trainer import data  # noqa: E402
from trainer.data import DataError  # noqa: E402

pytestmark = pytest.mark.training


def test_digits_shapes_range_and_fixed_split():
    ds = data.load("digits")
    assert ds.x_train.shape == (1438, 8, 8, 1) and ds.x_test.shape == (359, 8, 8, 1)
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert 0.0 <= ds.x_train.min() and ds.x_train.max() <= 1.0
    assert set(np.unique(ds.y_train)) == set(range(10))
    assert ds.input_shape == (8, 8, 1)
    again = data.load("digits", seed=123)  # the split does not depend on --seed
    np.testing.assert_array_equal(ds.x_test, again.x_test)
    np.testing.assert_array_equal(ds.y_train, again.y_train)


def test_synthetic_is_seeded():
    a, b, c = data.load("synthetic", seed=1), data.load("synthetic", seed=1), data.load("synthetic", seed=2)
    assert a.x_train.shape == (data.SYNTHETIC_TRAIN, 32, 32, 3)
    assert a.x_test.shape == (data.SYNTHETIC_TEST, 32, 32, 3)
    assert a.x_train.dtype == np.float32 and 0 <= a.x_train.min() and a.x_train.max() <= 1
    np.testing.assert_array_equal(a.x_train, b.x_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.x_train, c.x_train)


@pytest.mark.parametrize("subdir, protocol", [(True, 2), (False, pickle.HIGHEST_PROTOCOL)])
def test_cifar10_real_format(tmp_path, subdir, protocol):
    d, batches = write_cifar10(tmp_path, subdir=subdir, protocol=protocol)
    ds = data.load("cifar10", str(tmp_path))
    assert ds.x_train.shape == (30, 32, 32, 3) and ds.x_test.shape == (4, 32, 32, 3)
    assert ds.x_train.dtype == np.float32
    # Row layout: 1024 red, then 1024 green, then 1024 blue values, row-major.
    raw = batches["data_batch_2"][b"data"][1]
    img = ds.x_train[6 + 1]
    for ch in range(3):
        for r, c in [(0, 0), (5, 17), (31, 31)]:
            assert img[r, c, ch] == pytest.approx(raw[ch * 1024 + r * 32 + c] / 255.0)
    expected = sum((batches[f"data_batch_{i}"][b"labels"] for i in range(1, 6)), [])
    assert ds.y_train.tolist() == expected
    assert ds.y_test.tolist() == batches["test_batch"][b"labels"]


def test_cifar10_missing_dir(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(DataError, match=re.escape(str(missing)) + ".*does not exist.*data_batch_1"):
        data.load("cifar10", str(missing))
    with pytest.raises(DataError, match=re.escape(f"no CIFAR-10 batches in {tmp_path}")):
        data.load("cifar10", str(tmp_path))
    with pytest.raises(DataError, match="needs --data-dir"):
        data.load("cifar10", None)


def test_cifar10_missing_file(tmp_path):
    d, _ = write_cifar10(tmp_path)
    (d / "data_batch_3").unlink()
    with pytest.raises(DataError, match=re.escape(f"missing CIFAR-10 batch file {d / 'data_batch_3'}")):
        data.load("cifar10", str(tmp_path))


def _dump(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


class _Evil:
    def __reduce__(self):
        return (print, ("pickle code ran",))


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"this is not a pickle", "cannot unpickle"),
        ([1, 2, 3], "not a dict"),
        ({b"labels": [1]}, "lack b'data'"),
        ({b"data": np.zeros((2, 100), np.uint8), b"labels": [1, 2]}, "shape \\(2, 100\\)"),
        ({b"data": np.zeros((2, 3072), np.float32), b"labels": [1, 2]}, "float32"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1]}, "1 labels for 2 images"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [1, 10]}, "outside 0..9"),
        (_Evil(), "refusing to load .*print"),
    ],
)
def test_cifar10_malformed_batch(tmp_path, content, reason):
    d, _ = write_cifar10(tmp_path)
    if isinstance(content, bytes):
        (d / "test_batch").write_bytes(content)
    else:
        _dump(d / "test_batch", content)
    with pytest.raises(DataError, match=re.escape(f"malformed CIFAR-10 batch {d / 'test_batch'}: ") + ".*" + reason):
        data.load("cifar10", str(tmp_path))


def _assert_clean_error(proc, *needles):
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_cli_missing_data_dir_exits_2_without_tensorflow(tmp_path):
    missing = tmp_path / "no-such-dir"
    started = time.monotonic()
    proc = run_trainer(["--dataset", "cifar10", "--data-dir", str(missing)])
    _assert_clean_error(proc, str(missing), "data_batch_1", "test_batch")
    # The check runs before TensorFlow is imported (importing it takes seconds).
    code = (
        "import sys; from trainer.cli import main\n"
        f"rc = main(['--dataset', 'cifar10', '--data-dir', {str(missing)!r}])\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
        "sys.exit(rc)\n"
    )
    proc = run_python(code)
    _assert_clean_error(proc, str(missing))
    assert time.monotonic() - started < 30


def test_cli_malformed_data_dir_exits_2(tmp_path):
    d, _ = write_cifar10(tmp_path)
    (d / "data_batch_4").write_bytes(b"\x80\x02garbage")
    proc = run_trainer(["--dataset", "cifar10", "--data-dir", str(tmp_path)])
    _assert_clean_error(proc, str(d / "data_batch_4"), "malformed")


def test_cli_bad_tf_config_exits_2():
    proc = run_trainer([], config='{"cluster": ')
    _assert_clean_error(proc, "TF_CONFIG is not valid")
    proc = run_trainer([], config='{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}')
    _assert_clean_error(proc, "task index 3")


def test_help_does_not_import_tensorflow():
    proc = run_trainer(["--help"])
    assert proc.returncode == 0
    for option in ("--model", "--dataset", "--data-dir", "--epochs", "--global-batch-size",
                   "--learning-rate", "--seed", "--threads", "--steps-per-epoch",
                   "--collective-timeout", "--backup-dir", "--model-dir", "--result-file"):
        assert option in proc.stdout
    proc = run_python(
        "import sys, trainer, trainer.cli, trainer.data\n"
        "trainer.cli.build_parser().parse_args([])\n"
        "assert 'tensorflow' not in sys.modules\n"
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "blocked, package",
    [("tensorflow", "tensorflow"), ("tf_keras", "tf-keras"), ("sklearn", "scikit-learn")],
)
def test_missing_extra_gives_install_command(blocked, package):
    """Block the import as if the package were not installed, then run the trainer."""
    proc = run_python(
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "from trainer.cli import main\n"
        "sys.exit(main(['--epochs', '1']))\n"
    )
    _assert_clean_error(proc, f"{package} is not installed", "pip install 'tf-rendezvous[trainer]'",
                        "pip install '.[trainer]'")
