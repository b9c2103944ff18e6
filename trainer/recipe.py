"""Training hyperparameters: the defaults, the reference recipe, and the rules that
combine them with the options given. Pure functions: no TensorFlow, no cluster.

The reference recipe is ResNet-56's CIFAR-10 recipe from He et al. 2015 (section 4.2) on
a shorter schedule: SGD with momentum 0.9 at 0.1 per 128 examples, divided by 10 at half
and at three quarters of the training, random 32x32 crops of the image padded by 4 pixels,
random flips. Images are standardized one by one instead of by a per-pixel mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_GLOBAL_BATCH = 64
DEFAULT_EPOCHS = 10
ADAM_LR = 1e-3
SGD_LR_PER_128 = 0.1  # SGD learning rate for a global batch of 128, scaled linearly
DEFAULT_OPTIMIZER = {"small_cnn": "adam", "resnet56": "sgd"}
CROP_PADDING = 4  # pixels of zeros on each side before a random crop: 32x32 -> 40x40


@dataclass(frozen=True)
class Recipe:
    """The defaults a published recipe brings for one model on one dataset."""

    name: str
    global_batch: int  # summed over the replicas: it stays when the worker count changes
    epochs: int
    decays: tuple[tuple[int, float], ...]  # (epoch from which, multiplier of the base rate)
    standardize: bool  # every image to zero mean and unit variance
    augment: bool  # training images: random crop of the padded image, random flip


RESNET56_CIFAR10 = Recipe(
    name="resnet56/cifar10",
    global_batch=128,  # the paper's, on one GPU
    epochs=60,
    decays=((30, 0.1), (45, 0.01)),
    standardize=True,
    augment=True,
)
RECIPES = {("resnet56", "cifar10"): RESNET56_CIFAR10}


@dataclass(frozen=True)
class Hyperparameters:
    """What a run trains with, once the options and the defaults are combined."""

    global_batch_size: int
    epochs: int
    optimizer: str
    learning_rate: float  # the base rate, before any decay
    decays: tuple[tuple[int, float], ...] = ()
    standardize: bool = False
    augment: bool = False
    recipe: str | None = None

    def learning_rate_at(self, epoch: int) -> float:
        """The rate of `epoch`, counted from 0: the base rate times the multiplier of the
        last decay reached."""
        multiplier = 1.0
        for first_epoch, factor in self.decays:
            if epoch >= first_epoch:
                multiplier = factor
        return self.learning_rate * multiplier

    def describe(self) -> str:
        """For the log: 'sgd learning rate 0.2, x0.1 after 30 epochs, ... (recipe name)'."""
        decays = "".join(f", x{factor:g} after {epoch} epochs" for epoch, factor in self.decays)
        recipe = f" ({self.recipe} recipe)" if self.recipe else ""
        return f"{self.optimizer} learning rate {self.learning_rate:g}{decays}{recipe}"


def round_global_batch(requested: int, replicas: int) -> int:
    """Round up to a multiple of `replicas`, which must share every batch equally.

    The result never grows with the number of replicas beyond that rounding, so an
    elastic restart on more or fewer workers trains with the same global batch:
    64 stays 64 on 2 replicas and becomes 66 on 3.
    """
    return math.ceil(requested / replicas) * replicas


def resolve(
    model: str,
    dataset: str,
    replicas: int,
    *,
    global_batch_size: int | None = None,
    epochs: int | None = None,
    optimizer: str | None = None,
    learning_rate: float | None = None,
) -> Hyperparameters:
    """The hyperparameters of a run: each option given wins; the others come from the
    recipe of `model` on `dataset` if there is one, else from the plain defaults."""
    found = RECIPES.get((model, dataset))
    if global_batch_size is None:
        global_batch_size = found.global_batch if found else DEFAULT_GLOBAL_BATCH
    batch = round_global_batch(global_batch_size, replicas)
    if optimizer is None:
        optimizer = DEFAULT_OPTIMIZER[model]
    if learning_rate is None:
        learning_rate = ADAM_LR if optimizer == "adam" else SGD_LR_PER_128 * batch / 128
    if epochs is None:
        epochs = found.epochs if found else DEFAULT_EPOCHS
    if not found:
        return Hyperparameters(batch, epochs, optimizer, learning_rate)
    return Hyperparameters(
        batch, epochs, optimizer, learning_rate,
        decays=found.decays, standardize=found.standardize, augment=found.augment,
        recipe=found.name,
    )
