"""Hyperparameter defaults and the rules that combine them with the options: pure, no TensorFlow."""

from __future__ import annotations

import sys

import pytest

from trainer_cluster import REPO

sys.path.insert(0, str(REPO))
from trainer.cli import build_parser  # noqa: E402
from trainer.recipe import resolve, round_global_batch  # noqa: E402


@pytest.mark.parametrize("requested", [1, 7, 63, 64, 65, 96, 128, 1000])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 5, 8])
def test_global_batch_is_rounded_up_to_the_replicas_never_scaled(requested, replicas):
    batch = round_global_batch(requested, replicas)
    assert batch % replicas == 0
    assert requested <= batch < requested + replicas


@pytest.mark.parametrize("model, dataset", [("small_cnn", "digits"), ("resnet56", "cifar10")])
@pytest.mark.parametrize("requested, on_2, on_3", [(96, 96, 96), (64, 64, 66), (256, 256, 258)])
def test_a_restart_on_other_workers_keeps_the_global_batch(model, dataset, requested, on_2, on_3):
    """An elastic restart changes the number of workers: a global batch given must not follow it."""
    before = resolve(model, dataset, 2, global_batch_size=requested)
    after = resolve(model, dataset, 3, global_batch_size=requested)
    assert (before.global_batch_size, after.global_batch_size) == (on_2, on_3)


def test_the_plain_default_batch_is_kept_too():
    assert [resolve("small_cnn", "digits", n).global_batch_size for n in (1, 2, 3, 4)] == [64, 64, 66, 64]


def test_plain_defaults():
    cnn = resolve("small_cnn", "digits", 1)
    assert (cnn.global_batch_size, cnn.epochs, cnn.optimizer, cnn.learning_rate) == (64, 10, "adam", 1e-3)
    assert (cnn.decays, cnn.standardize, cnn.augment, cnn.recipe) == ((), False, False, None)
    assert cnn.learning_rate_at(9) == cnn.learning_rate


@pytest.mark.parametrize(
    "model, dataset", [("resnet56", "synthetic"), ("resnet56", "digits"), ("small_cnn", "cifar10")]
)
def test_only_resnet56_on_cifar10_gets_the_recipe(model, dataset):
    hp = resolve(model, dataset, 2)
    assert (hp.global_batch_size, hp.epochs, hp.recipe, hp.augment, hp.decays) == (64, 10, None, False, ())


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_recipe_defaults(replicas):
    hp = resolve("resnet56", "cifar10", replicas)
    assert hp.recipe == "resnet56/cifar10"
    assert hp.global_batch_size == 129 if replicas == 3 else 128  # a multiple of the replicas
    assert hp.epochs == 60
    assert hp.optimizer == "sgd"
    assert hp.learning_rate == pytest.approx(0.1 * hp.global_batch_size / 128)
    assert hp.standardize and hp.augment


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_recipe_schedule(replicas):
    hp = resolve("resnet56", "cifar10", replicas)
    base = 0.1 * hp.global_batch_size / 128
    rates = {epoch: hp.learning_rate_at(epoch) for epoch in (0, 29, 30, 44, 45, 59)}
    assert rates == {
        0: pytest.approx(base), 29: pytest.approx(base),
        30: pytest.approx(base * 0.1), 44: pytest.approx(base * 0.1),
        45: pytest.approx(base * 0.01), 59: pytest.approx(base * 0.01),
    }


@pytest.mark.parametrize(
    "option, value, field, expected",
    [
        ("global_batch_size", 96, "global_batch_size", 96),
        ("global_batch_size", 96, "learning_rate", pytest.approx(0.1 * 96 / 128)),
        ("epochs", 3, "epochs", 3),
        ("learning_rate", 0.05, "learning_rate", 0.05),
        ("optimizer", "adam", "learning_rate", 1e-3),
    ],
)
def test_an_option_given_wins_over_the_recipe(option, value, field, expected):
    hp = resolve("resnet56", "cifar10", 2, **{option: value})
    assert getattr(hp, field) == expected
    assert (hp.recipe, hp.decays, hp.augment) == ("resnet56/cifar10", ((30, 0.1), (45, 0.01)), True)


def test_explicit_base_rate_keeps_the_recipe_decays():
    hp = resolve("resnet56", "cifar10", 1, learning_rate=0.02)
    assert [hp.learning_rate_at(e) for e in (0, 30, 45)] == pytest.approx([0.02, 0.002, 0.0002])


def test_sgd_learning_rate_follows_the_rounded_global_batch():
    assert resolve("resnet56", "digits", 3, global_batch_size=64).learning_rate == pytest.approx(0.1 * 66 / 128)
    assert resolve("small_cnn", "digits", 2, optimizer="sgd", global_batch_size=256).learning_rate == pytest.approx(0.2)


def test_describe_names_the_schedule_and_the_recipe():
    assert resolve("resnet56", "cifar10", 2).describe() == (
        "sgd learning rate 0.1, x0.1 after 30 epochs, x0.01 after 45 epochs (resnet56/cifar10 recipe)"
    )
    assert resolve("small_cnn", "digits", 2).describe() == "adam learning rate 0.001"


def test_help_explains_the_recipe_and_the_rounding():
    text = " ".join(build_parser().format_help().split())
    for needle in ("--model resnet56 --dataset cifar10", "a global batch of 128 (whatever the number of workers)",
                   "60 epochs", "learning rate of 0.1", "x0.1 after 30 and x0.01 after 45 epochs",
                   "standardized", "40x40", "32x32", "flipped",
                   "rounded up to a multiple of the number of replicas", "64 is 64 on 2 workers and 66 on 3",
                   "stays the same through a restart on more or fewer workers"):
        assert needle in text, needle
