"""Training hyperparameters: the defaults, the reference recipe, and the rules that
combine them with the options given. Pure functions: no TensorFlow, no cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_GLOBAL_BATCH = 64
DEFAULT_EPOCHS = 10
ADAM_LR = 1e-3
SGD_LR_PER_128 = 0.1  # SGD learning rate for a global batch of 128, scaled linearly
DEFAULT_OPTIMIZER = {"small_cnn": "adam", "resnet56": "sgd"}


@dataclass(frozen=True)
class Hyperparameters:
    global_batch_size: int
    epochs: int
    optimizer: str
    learning_rate: float  # at epoch 0


def round_global_batch(requested: int, replicas: int) -> int:
    """Round up to a multiple of `replicas`, which must share every batch equally.

    The result never grows with the number of replicas beyond that rounding, so an
    elastic restart on more or fewer workers trains with the same global batch:
    64 stays 64 on 2 replicas and becomes 66 on 3.
    """
    return math.ceil(requested / replicas) * replicas


def resolve(
    model: str,
    replicas: int,
    *,
    global_batch_size: int | None = None,
    epochs: int | None = None,
    optimizer: str | None = None,
    learning_rate: float | None = None,
) -> Hyperparameters:
    """The hyperparameters of a run: each option given wins, the others take the
    default of `model`."""
    if global_batch_size is None:
        global_batch_size = DEFAULT_GLOBAL_BATCH
    batch = round_global_batch(global_batch_size, replicas)
    if optimizer is None:
        optimizer = DEFAULT_OPTIMIZER[model]
    if learning_rate is None:
        learning_rate = ADAM_LR if optimizer == "adam" else SGD_LR_PER_128 * batch / 128
    if epochs is None:
        epochs = DEFAULT_EPOCHS
    return Hyperparameters(batch, epochs, optimizer, learning_rate)
