"""A script that sets TF_CONFIG itself, as TensorFlow's multi-worker tutorial does, then
creates the strategy: run by rendezvous, it replaces the TF_CONFIG each round gives it."""

import json
import os

os.environ["TF_CONFIG"] = json.dumps({
    "cluster": {"worker": ["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 0}})

import tensorflow as tf  # noqa: E402

strategy = tf.distribute.MultiWorkerMirroredStrategy()
print("the strategy works", flush=True)
