"""Offline datasets as NumPy arrays. No TensorFlow import here.

Every loader returns a :class:`Dataset` with float32 images shaped
``(N, H, W, C)`` scaled to [0, 1] and int32 labels in ``[0, num_classes)``.
Every worker loads the same arrays; sharding happens in the input pipeline.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

import numpy as np

from trainer import ConfigError

CIFAR_SUBDIR = "cifar-10-batches-py"
CIFAR_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_TEST_FILE = "test_batch"
CIFAR_FORMAT = (
    "the CIFAR-10 python version: files data_batch_1..data_batch_5 and test_batch, "
    "each a pickled dict with b'data' (uint8 array, N x 3072) and b'labels' "
    "(N ints in 0..9)"
)

DIGITS_TEST_FRACTION = 0.2
DIGITS_SPLIT_SEED = 0  # fixed: the split never depends on --seed

SYNTHETIC_TRAIN = 4096
SYNTHETIC_TEST = 1024
SYNTHETIC_SHAPE = (32, 32, 3)


class DataError(ConfigError):
    """The requested data is missing or not in the expected format."""


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int = 10

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])


def load(name: str, data_dir: str | None = None, seed: int = 0) -> Dataset:
    if name == "digits":
        return load_digits()
    if name == "cifar10":
        if not data_dir:
            raise DataError("--dataset cifar10 needs --data-dir DIR holding " + CIFAR_FORMAT)
        return load_cifar10(data_dir)
    if name == "synthetic":
        return load_synthetic(seed)
    raise DataError(f"unknown dataset {name!r}")


def load_digits() -> Dataset:
    """scikit-learn's bundled 8x8 digits, with a fixed 80/20 split."""
    from sklearn.datasets import load_digits as sk_load_digits

    bunch = sk_load_digits()
    x = (bunch.images.astype(np.float32) / 16.0)[..., np.newaxis]
    y = bunch.target.astype(np.int32)
    order = np.random.RandomState(DIGITS_SPLIT_SEED).permutation(len(x))
    n_test = int(round(len(x) * DIGITS_TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    return Dataset("digits", x[train], y[train], x[test], y[test])


def load_synthetic(seed: int) -> Dataset:
    """Seeded random 32x32x3 images; each class adds its own fixed pattern,
    so the labels are learnable."""
    rng = np.random.default_rng(seed)
    n = SYNTHETIC_TRAIN + SYNTHETIC_TEST
    patterns = rng.uniform(0.0, 1.0, size=(10,) + SYNTHETIC_SHAPE).astype(np.float32)
    y = rng.integers(0, 10, size=n).astype(np.int32)
    noise = rng.uniform(0.0, 1.0, size=(n,) + SYNTHETIC_SHAPE).astype(np.float32)
    x = 0.5 * noise + 0.5 * patterns[y]
    return Dataset(
        "synthetic",
        x[:SYNTHETIC_TRAIN],
        y[:SYNTHETIC_TRAIN],
        x[SYNTHETIC_TRAIN:],
        y[SYNTHETIC_TRAIN:],
    )


def find_cifar10_dir(data_dir: str) -> str:
    """Return the directory holding the batch files: DIR or DIR/cifar-10-batches-py."""
    if not os.path.isdir(data_dir):
        raise DataError(f"CIFAR-10 data directory {data_dir} does not exist; expected {CIFAR_FORMAT}")
    names = (*CIFAR_TRAIN_FILES, CIFAR_TEST_FILE)
    for candidate in (data_dir, os.path.join(data_dir, CIFAR_SUBDIR)):
        if any(os.path.exists(os.path.join(candidate, n)) for n in names):
            return candidate
    raise DataError(
        f"no CIFAR-10 batches in {data_dir} or {os.path.join(data_dir, CIFAR_SUBDIR)}; "
        f"expected {CIFAR_FORMAT}"
    )


def load_cifar10(data_dir: str) -> Dataset:
    root = find_cifar10_dir(data_dir)
    xs, ys = [], []
    for name in CIFAR_TRAIN_FILES:
        x, y = _read_cifar_batch(os.path.join(root, name))
        xs.append(x)
        ys.append(y)
    x_test, y_test = _read_cifar_batch(os.path.join(root, CIFAR_TEST_FILE))
    return Dataset("cifar10", np.concatenate(xs), np.concatenate(ys), x_test, y_test)


# Globals a CIFAR-10 pickle may reference: NumPy array reconstruction and, in
# protocol-2 pickles written by Python 3, bytes via _codecs.encode.
_ALLOWED_GLOBALS = {
    ("_codecs", "encode"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_cifar_batch(path: str) -> tuple[np.ndarray, np.ndarray]:
    def bad(reason: str) -> DataError:
        return DataError(f"malformed CIFAR-10 batch {path}: {reason}; expected {CIFAR_FORMAT}")

    if not os.path.isfile(path):
        raise DataError(f"missing CIFAR-10 batch file {path}; expected {CIFAR_FORMAT}")
    try:
        with open(path, "rb") as f:
            batch = _ArrayUnpickler(f, encoding="bytes").load()
    except Exception as e:  # any unpickling failure means a bad file
        raise bad(f"cannot unpickle ({type(e).__name__}: {e})") from None
    if not isinstance(batch, dict):
        raise bad(f"a pickled {type(batch).__name__}, not a dict")
    # Python 2 pickles load with bytes keys; accept str keys too.
    data = batch.get(b"data", batch.get("data"))
    labels = batch.get(b"labels", batch.get("labels"))
    if data is None or labels is None:
        raise bad(f"keys {sorted(map(repr, batch))} lack b'data' or b'labels'")
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise bad(f"b'data' is {data.dtype} with shape {data.shape}")
    try:
        labels = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError):
        raise bad("b'labels' is not a list of integers") from None
    if labels.shape != (data.shape[0],):
        raise bad(f"{labels.size} labels for {data.shape[0]} images")
    if data.shape[0] == 0:
        raise bad("no images")
    if labels.min() < 0 or labels.max() > 9:
        raise bad("labels outside 0..9")
    x = data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1).astype(np.float32) / 255.0
    return x, labels.astype(np.int32)
