"""The recipe's input pipelines (standardization, padded random crop, random flip), run by
one TensorFlow subprocess without a cluster; the checks are NumPy in this process."""

from __future__ import annotations

import numpy as np
import pytest

from trainer_cluster import run_python

pytestmark = pytest.mark.training

SEEDS = 48
PROBE = """
import numpy as np
from trainer import pipeline
from trainer._keras import tf
from trainer.data import Dataset
from trainer.recipe import resolve

out = {}
image = np.arange(32 * 32 * 3, dtype=np.float32).reshape(32, 32, 3) / 3072
out["image"] = image
for key in ("augmented", "again"):
    out[key] = np.stack([
        pipeline.augment(tf.constant(image), tf.constant([seed, 7], tf.int64)).numpy()
        for seed in range(%(seeds)d)
    ])

rng = np.random.default_rng(0)
data = Dataset(
    "cifar10",
    rng.uniform(size=(20, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 20).astype(np.int32),
    rng.uniform(size=(7, 32, 32, 3)).astype(np.float32), rng.integers(0, 10, 7).astype(np.int32),
)
out["x_test"] = data.x_test
hp = resolve("resnet56", "cifar10", 1, global_batch_size=4)
one = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1)
for key, seed in (("train_5", 5), ("train_5_again", 5), ("train_6", 6)):
    batches = pipeline.train_dataset(data, one, hp, seed).take(3)
    out[key] = np.stack([x.numpy() for x, _ in batches])
batches = list(pipeline.test_dataset(data, hp))
out["test"] = np.concatenate([x.numpy() for x, _, _ in batches])
out["test_labels"] = np.concatenate([y.numpy() for _, y, _ in batches])
out["test_weights"] = np.concatenate([w.numpy() for _, _, w in batches])
out["test_batch_sizes"] = np.array([len(x) for x, _, _ in batches])
out["y_test"] = data.y_test
np.savez(%(path)r, **out)
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipeline") / "probe.npz"
    proc = run_python(PROBE % {"seeds": SEEDS, "path": str(path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(path) as arrays:
        return dict(arrays)


def standardized(images: np.ndarray) -> np.ndarray:
    """tf.image.per_image_standardization in NumPy."""
    axes = tuple(range(1, images.ndim))
    mean = images.mean(axis=axes, keepdims=True)
    floor = 1 / np.sqrt(np.prod(images.shape[1:]))
    return (images - mean) / np.maximum(images.std(axis=axes, keepdims=True), floor)


def placement(original: np.ndarray, augmented: np.ndarray) -> tuple[int, int, bool] | None:
    """The (dy, dx, flipped) for which `augmented` is `original` moved by up to 4 pixels in
    each direction with zeros coming in, then maybe mirrored; None if there is none."""
    padded = np.pad(original, ((4, 4), (4, 4), (0, 0)))
    for flipped in (False, True):
        target = augmented[:, ::-1] if flipped else augmented
        for dy in range(9):
            for dx in range(9):
                if np.array_equal(padded[dy:dy + 32, dx:dx + 32], target):
                    return dy - 4, dx - 4, flipped
    return None


def test_augment_keeps_shape_and_type(probe):
    assert probe["augmented"].shape == (SEEDS, 32, 32, 3)
    assert probe["augmented"].dtype == np.float32


def test_augment_is_a_padded_crop_maybe_flipped(probe):
    found = [placement(probe["image"], out) for out in probe["augmented"]]
    assert None not in found
    assert len({(dy, dx) for dy, dx, _ in found}) > 10  # 81 crops are possible
    assert {flipped for _, _, flipped in found} == {False, True}


def test_augment_is_determined_by_its_seed(probe):
    np.testing.assert_array_equal(probe["augmented"], probe["again"])
    distinct = {out.tobytes() for out in probe["augmented"]}
    assert len(distinct) > SEEDS // 2


def test_training_batches_are_determined_by_the_seed(probe):
    assert probe["train_5"].shape == (3, 4, 32, 32, 3)  # 3 batches of 4
    np.testing.assert_array_equal(probe["train_5"], probe["train_5_again"])
    assert not np.array_equal(probe["train_5"], probe["train_6"])


def test_training_images_are_standardized(probe):
    images = probe["train_5"].reshape(-1, 32 * 32 * 3)
    np.testing.assert_allclose(images.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(images.std(axis=1), 1, atol=1e-3)


def test_test_images_are_standardized_not_augmented(probe):
    np.testing.assert_allclose(probe["test"][:7], standardized(probe["x_test"]), atol=1e-5)
    np.testing.assert_array_equal(probe["test_labels"][:7], probe["y_test"])


def test_test_set_is_padded_to_full_batches_that_weigh_nothing(probe):
    # 7 images in batches of 4: one blank image of weight 0 makes the second batch full.
    assert probe["test_batch_sizes"].tolist() == [4, 4]
    assert probe["test_weights"].tolist() == [1] * 7 + [0]
    assert not probe["test"][7].any()
