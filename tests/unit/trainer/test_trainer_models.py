"""Model architectures, built by a TensorFlow subprocess."""

from __future__ import annotations

import json

import pytest

from trainer_cluster import run_python

pytestmark = pytest.mark.training

SHAPES = [(32, 32, 3), (8, 8, 1), (17, 23, 2)]

PROBE = """
import json
from trainer import models
from trainer._keras import keras, tf
out = {}
for name in ("resnet56", "small_cnn"):
    for shape in %r:
        m = models.build(name, shape, 10)
        counts = {}
        for layer in m.layers:
            counts[type(layer).__name__] = counts.get(type(layer).__name__, 0) + 1
        y = m(tf.zeros((2,) + tuple(shape)), training=False)
        out[f"{name} {shape}"] = {
            "counts": counts,
            "params": m.count_params(),
            "output": list(y.shape),
            "keras": keras.__name__,
        }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def built():
    proc = run_python(PROBE % (SHAPES,), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("shape", SHAPES)
def test_resnet56_depth(built, shape):
    info = built[f"resnet56 {tuple(shape)}"]
    c = info["counts"]
    # 1 stem conv + 3 stages x 9 blocks x 2 convs; parameter-free shortcuts
    # (2 of them subsample and zero-pad), so no projection convs.
    assert c["Conv2D"] == 1 + 3 * 9 * 2 == 55
    assert c["Dense"] == 1
    assert c["Conv2D"] + c["Dense"] == 56
    assert c["BatchNormalization"] == 55
    assert c["Add"] == 27
    assert c["ZeroPadShortcut"] == 2
    assert info["output"] == [2, 10]
    assert info["keras"].startswith("tf_keras")


@pytest.mark.parametrize("shape", SHAPES)
def test_resnet56_parameter_count(built, shape):
    channels = shape[-1]
    convs = (
        3 * 3 * channels * 16                       # stem
        + 18 * 3 * 3 * 16 * 16                      # stage 1
        + 3 * 3 * 16 * 32 + 17 * 3 * 3 * 32 * 32    # stage 2
        + 3 * 3 * 32 * 64 + 17 * 3 * 3 * 64 * 64    # stage 3 (convs have no bias)
    )
    batch_norm = 4 * (16 + 18 * 16 + 18 * 32 + 18 * 64)  # gamma, beta, moving mean/var
    dense = 64 * 10 + 10
    assert built[f"resnet56 {tuple(shape)}"]["params"] == convs + batch_norm + dense
    if shape == (32, 32, 3):
        assert convs + batch_norm + dense == 857_082  # the paper's "0.85M"


@pytest.mark.parametrize("shape", SHAPES)
def test_small_cnn_any_shape(built, shape):
    info = built[f"small_cnn {tuple(shape)}"]
    assert info["output"] == [2, 10]
    assert info["counts"]["Conv2D"] == 3
