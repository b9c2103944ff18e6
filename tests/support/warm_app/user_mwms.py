"""A user's own MultiWorkerMirroredStrategy script, of the common kind: user_mwms.py OUT
sets legacy Keras up, creates the strategy first, trains a small model on fixed data and
writes the SHA-256 of its final weights to OUT."""
import hashlib
import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow is imported, as its docs say
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()  # before any op runs
tf.keras.utils.set_random_seed(1)
rng = np.random.default_rng(7)
x = rng.normal(size=(256, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(data, epochs=2, steps_per_epoch=5, verbose=0)
digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()
with open(sys.argv[1], "w") as out:
    out.write(f"{digest} {tf.keras.__name__}\n")
