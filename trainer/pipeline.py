"""Input pipelines, with the recipe's image processing. Importing this imports TensorFlow.
"""

from __future__ import annotations

import numpy as np

from trainer import ConfigError
from trainer._keras import tf
from trainer.recipe import CROP_PADDING, Hyperparameters


def train_dataset(dataset, ctx: tf.distribute.InputContext, hp: Hyperparameters, seed: int):
    """This worker's share of the training data: shard ``input_pipeline_id`` of
    ``num_input_pipelines``, shuffled with a fixed seed, repeated, processed, batched
    per replica. Deterministic for a given cluster size and seed."""
    pid, n = ctx.input_pipeline_id, ctx.num_input_pipelines
    x, y = dataset.x_train[pid::n], dataset.y_train[pid::n]
    batch = ctx.get_per_replica_batch_size(hp.global_batch_size)
    if len(x) < batch:
        raise ConfigError(
            f"worker shard has {len(x)} examples, fewer than the per-replica batch {batch}"
        )
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat()
    if hp.augment:
        ds = ds.enumerate().map(_augment_nth(seed, pid, n), num_parallel_calls=tf.data.AUTOTUNE)
    if hp.standardize:
        ds = ds.map(_standardize, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def test_dataset(dataset, hp: Hyperparameters):
    """The whole test set as (image, label, weight) in full global batches, for
    ``model.evaluate`` to split among the replicas.

    The set is padded up to a whole number of batches with blank images of weight 0:
    a short last batch can leave a replica an empty batch, on which the convolution
    fails ("input depth must be evenly divisible by filter depth: 1 vs 32"). Weighted
    metrics then count every real example once and the padding not at all.
    """
    x, y = dataset.x_test, dataset.y_test
    padding = -len(x) % hp.global_batch_size
    real = tf.data.Dataset.from_tensor_slices((x, y, np.ones(len(x), np.float32)))
    blank = tf.data.Dataset.from_tensor_slices((
        np.zeros((padding, *x.shape[1:]), x.dtype),
        np.zeros(padding, y.dtype),
        np.zeros(padding, np.float32),
    ))
    ds = real.concatenate(blank)
    if hp.standardize:
        ds = ds.map(lambda image, label, weight: (*_standardize(image, label), weight),
                    num_parallel_calls=tf.data.AUTOTUNE)
    options = tf.data.Options()
    # In-memory arrays have no files to share out: split by example, not by file.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = ds.batch(hp.global_batch_size, drop_remainder=True).with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE)


def augment(image, seed):
    """Pad with CROP_PADDING zeros on each side, crop back to the original size at a random
    place, flip left-right with probability 1/2. `seed`: two integers; the same seed gives
    the same result (stateless random ops)."""
    height, width, channels = image.shape
    padded = tf.image.resize_with_crop_or_pad(
        image, height + 2 * CROP_PADDING, width + 2 * CROP_PADDING
    )
    crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    cropped = tf.image.stateless_random_crop(padded, (height, width, channels), seed=crop_seed)
    return tf.image.stateless_random_flip_left_right(cropped, seed=flip_seed)


def _augment_nth(seed: int, pid: int, n: int):
    """Augment the `index`-th example of pipeline `pid` of `n`. Its place in the stream of
    all the workers (index * n + pid) seeds its draws: every example of every epoch on
    every worker gets its own crop and flip, and every run with this seed the same ones."""

    def apply(index, example):
        image, label = example
        return augment(image, tf.stack([tf.constant(seed, tf.int64), index * n + pid])), label

    return apply


def _standardize(image, label):
    return tf.image.per_image_standardization(image), label
