"""Fits a tiny model for 2 epochs of 4 steps with rendezvous.script's ProgressCallback
(every 2 steps, global batch 8), under legacy Keras (tf-keras) or Keras 3.

Usage: keras_progress.py legacy|keras3   (the lines go to $RENDEZVOUS_PROGRESS_FILE)"""

import os
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1" if sys.argv[1] == "legacy" else "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import rendezvous.script as rdv  # noqa: E402

keras = tf.keras
expected = "tf_keras" if sys.argv[1] == "legacy" else "keras"
assert keras.__name__.split(".")[0] == expected, keras.__name__
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
x, y = np.zeros((32, 4), "float32"), np.zeros((32, 1), "float32")
callback = rdv.ProgressCallback(global_batch_size=8, every=2)
assert isinstance(callback, keras.callbacks.Callback)
model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[callback])
print("fitted", keras.__name__)
