"""Input pipelines, run by one TensorFlow subprocess without a cluster; the checks are
NumPy in this process."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_cluster import run_python

pytestmark = pytest.mark.training

PROBE = """
import numpy as np
from trainer import pipeline
from trainer.data import Dataset

out = {}
rng = np.random.default_rng(0)
data = Dataset(
    "cifar10",
    rng.uniform(size=(20, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 20).astype(np.int32),
    rng.uniform(size=(7, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 7).astype(np.int32),
)
out["x_test"], out["y_test"] = data.x_test, data.y_test
batches = list(pipeline.test_dataset(data, 4))
out["test"] = np.concatenate([x.numpy() for x, _, _ in batches])
out["test_labels"] = np.concatenate([y.numpy() for _, y, _ in batches])
out["test_weights"] = np.concatenate([w.numpy() for _, _, w in batches])
out["test_batch_sizes"] = np.array([len(x) for x, _, _ in batches])
np.savez(%(path)r, **out)
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipeline") / "probe.npz"
    proc = run_python(PROBE % {"path": str(path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as arrays:
        return dict(arrays)


def test_test_set_is_all_there_in_order(probe):
    np.testing.assert_array_equal(probe["test"][:7], probe["x_test"])
    np.testing.assert_array_equal(probe["test_labels"][:7], probe["y_test"])


def test_test_set_is_padded_to_full_batches_that_weigh_nothing(probe):
    # 7 images in batches of 4: one blank image of weight 0 makes the second batch full.
    assert probe["test_batch_sizes"].tolist() == [4, 4]
    assert probe["test_weights"].tolist() == [1] * 7 + [0]
    assert not probe["test"][7].any()
