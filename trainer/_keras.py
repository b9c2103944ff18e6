"""The one place that chooses the Keras implementation.

Keras 3 ``model.fit`` does not work under MultiWorkerMirroredStrategy with
TensorFlow 2.21, so the trainer uses legacy Keras (the ``tf-keras`` package)
through ``tf.keras``. ``TF_USE_LEGACY_KERAS`` must be set before TensorFlow is
imported. Everything else imports ``tf`` and ``keras`` from here, so moving to
Keras 3 later means changing this module.
"""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402,F401  (fails clearly when tf-keras is missing)

keras = tf.keras

if not keras.__name__.startswith("tf_keras"):
    raise RuntimeError(
        "tf.keras is not legacy Keras (tf-keras): TensorFlow was imported before "
        "TF_USE_LEGACY_KERAS=1 could take effect"
    )

if os.environ["TF_CPP_MIN_LOG_LEVEL"] not in ("0", "1"):
    tf.get_logger().setLevel("ERROR")

__all__ = ["tf", "keras"]
