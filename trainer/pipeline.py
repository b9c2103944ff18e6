"""Input pipelines. Importing this imports TensorFlow.
"""

from __future__ import annotations

import numpy as np

from trainer import ConfigError
from trainer._keras import tf


def train_dataset(dataset, ctx: tf.distribute.InputContext, global_batch_size: int, seed: int):
    """This worker's share of the training data: shard ``input_pipeline_id`` of
    ``num_input_pipelines``, shuffled with a fixed seed, repeated, batched per replica.
    Deterministic for a given cluster size and seed."""
    pid, n = ctx.input_pipeline_id, ctx.num_input_pipelines
    x, y = dataset.x_train[pid::n], dataset.y_train[pid::n]
    batch = ctx.get_per_replica_batch_size(global_batch_size)
    if len(x) < batch:
        raise ConfigError(
            f"worker shard has {len(x)} examples, fewer than the per-replica batch {batch}"
        )
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).repeat()
    return ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


def test_dataset(dataset, global_batch_size: int):
    """The whole test set as (image, label, weight) in full global batches, for
    ``model.evaluate`` to split among the replicas.

    The set is padded up to a whole number of batches with blank images of weight 0:
    a short last batch would leave some replica an empty batch, and an empty batch fails
    the step (oneDNN's convolution rejects it). Weighted metrics then count every real
    example once and the padding not at all.
    """
    x, y = dataset.x_test, dataset.y_test
    padding = -len(x) % global_batch_size
    weights = np.concatenate([np.ones(len(x), np.float32), np.zeros(padding, np.float32)])
    x = np.concatenate([x, np.zeros((padding, *x.shape[1:]), x.dtype)])
    y = np.concatenate([y, np.zeros(padding, y.dtype)])
    ds = tf.data.Dataset.from_tensor_slices((x, y, weights))
    options = tf.data.Options()
    # In-memory arrays have no files to share out: split by example, not by file.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    ds = ds.batch(global_batch_size, drop_remainder=True).with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE)
