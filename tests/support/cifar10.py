"""CIFAR-10's python batches, written small, in the real format."""

from __future__ import annotations

import pickle

import numpy as np


def write_cifar10(root, per_batch=6, test=4, seed=0, subdir=True, protocol=2):
    """Write CIFAR-10 python batches in the real format: pickled dicts with
    bytes keys, b'data' uint8 N x 3072 (channel-major rows) and b'labels'."""
    rng = np.random.default_rng(seed)
    d = root / "cifar-10-batches-py" if subdir else root
    d.mkdir(parents=True, exist_ok=True)
    batches = {}
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        n = test if name == "test_batch" else per_batch
        batch = {
            b"batch_label": name.encode(),
            b"labels": [int(v) for v in rng.integers(0, 10, n)],
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"filenames": [f"img_{i}.png".encode() for i in range(n)],
        }
        with open(d / name, "wb") as f:
            pickle.dump(batch, f, protocol=protocol)
        batches[name] = batch
    return d, batches
