"""Real TensorFlow scripts that fail the ways rendezvous recognizes (its table of known
failures), one per mode, each as a user writes it by mistake.

Usage: tf_failures.py MODE
  late        runs a TensorFlow op, then creates the strategy
  group-size  a collective whose group size differs between the workers, as when their
              GPU counts differ (rank 0: 2, the others: 3)
  port-held   rank 1 holds its own TensorFlow port (from TF_CONFIG) before the strategy
  plain       only creates the strategy (for a test that blocks a port)
"""

import json
import os
import socket
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
mode = sys.argv[1]
rank = int(os.environ["RENDEZVOUS_RANK"])
held = []
if mode == "port-held" and rank == 1:
    port = int(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"][rank].rsplit(":", 1)[1])
    held.append(socket.socket())
    held[0].setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held[0].bind(("", port))
    held[0].listen()

import tensorflow as tf  # noqa: E402

if mode == "late":
    tf.constant(1.0)
strategy = tf.distribute.MultiWorkerMirroredStrategy()
if mode == "group-size":

    @tf.function
    def reduce():
        return tf.raw_ops.CollectiveReduceV2(
            input=tf.constant([1.0]), group_size=2 if rank == 0 else 3, group_key=1, instance_key=1,
            ordering_token=[], merge_op="Add", final_op="Id")

    reduce()
print(f"{mode}: the strategy works", flush=True)
