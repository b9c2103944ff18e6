"""Hyperparameter defaults and the rules that combine them with the options: pure, no TensorFlow."""

from __future__ import annotations

import sys

import pytest

from trainer_cluster import REPO

sys.path.insert(0, str(REPO))
from trainer.recipe import resolve, round_global_batch  # noqa: E402


@pytest.mark.parametrize("requested", [1, 7, 63, 64, 65, 96, 128, 1000])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 5, 8])
def test_global_batch_is_rounded_up_to_the_replicas_never_scaled(requested, replicas):
    batch = round_global_batch(requested, replicas)
    assert batch % replicas == 0
    assert requested <= batch < requested + replicas


@pytest.mark.parametrize("model", ["small_cnn", "resnet56"])
@pytest.mark.parametrize("requested, on_2, on_3", [(96, 96, 96), (64, 64, 66), (None, 64, 66)])
def test_a_restart_on_other_workers_keeps_the_global_batch(model, requested, on_2, on_3):
    """An elastic restart changes the number of workers: the global batch must not follow it."""
    before = resolve(model, 2, global_batch_size=requested)
    after = resolve(model, 3, global_batch_size=requested)
    assert (before.global_batch_size, after.global_batch_size) == (on_2, on_3)


def test_defaults():
    cnn = resolve("small_cnn", 1)
    assert (cnn.global_batch_size, cnn.epochs, cnn.optimizer, cnn.learning_rate) == (64, 10, "adam", 1e-3)
    resnet = resolve("resnet56", 1)
    assert (resnet.optimizer, resnet.learning_rate) == ("sgd", pytest.approx(0.1 * 64 / 128))


def test_sgd_learning_rate_follows_the_rounded_global_batch():
    assert resolve("resnet56", 3, global_batch_size=64).learning_rate == pytest.approx(0.1 * 66 / 128)
    assert resolve("small_cnn", 2, optimizer="sgd", global_batch_size=256).learning_rate == pytest.approx(0.2)


def test_options_given_win():
    hp = resolve("resnet56", 2, global_batch_size=32, epochs=3, optimizer="adam", learning_rate=0.5)
    assert (hp.global_batch_size, hp.epochs, hp.optimizer, hp.learning_rate) == (32, 3, "adam", 0.5)
