"""A plain MultiWorkerMirroredStrategy script, as a user writes one: no signal handling of
its own. It trains a tiny model on random data, printing "training" at its first step, and
writes its pid and round to OUT/<node>-<round>.pid when OUT is given, so that a test or a
benchmark can see what such a script does when its round ends.

Usage: plain_mwms.py [OUT] [--steps N] [--forever-in-round-1] [--exit-on-sigterm]
  --steps N              train N steps, then exit 0 (default: until stopped)
  --forever-in-round-1   in round 1 train until stopped whatever --steps says
  --exit-on-sigterm      call rendezvous.script.exit_on_sigterm() after creating the strategy
"""

import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # first: before any other op
if "--exit-on-sigterm" in sys.argv:
    import rendezvous.script

    rendezvous.script.exit_on_sigterm()

round_ = os.environ.get("RENDEZVOUS_ROUND", "0")
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 10**9
if "--forever-in-round-1" in sys.argv and round_ == "1":
    steps = 10**9
out = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else None
if out:
    with open(os.path.join(out, f"{os.environ.get('RENDEZVOUS_NODE_ID', 'alone')}-{round_}.pid"), "w") as f:
        f.write(str(os.getpid()))

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(4), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
data = tf.data.Dataset.from_tensors((tf.zeros((16, 8)), tf.zeros((16, 1)))).repeat()


class Say(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            print(f"training in round {round_}", flush=True)


model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, callbacks=[Say()])
print("done", flush=True)
