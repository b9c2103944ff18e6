"""ResNet-56 on CIFAR-10 under MultiWorkerMirroredStrategy, on every node of a rendezvous job:

    rendezvous join --expect 2 -- python cifar10_resnet56.py --backup-dir /shared/backup

The recipe of He et al. 2015 (section 4.2) on a 60-epoch schedule: SGD with momentum 0.9 at
0.1 per 128 images, divided by 10 at half and at three quarters of the epochs, random crops
of the image padded by 4 pixels, random flips, weight decay 1e-4. `--data-dir` reads the
python batches where there is no internet; `--synthetic --steps N` trains on random images
instead, N steps an epoch.
"""
import argparse
import hashlib
import os
import pickle

import numpy as np

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # Keras 3's fit fails under MWMS (TF 2.21)
import tensorflow as tf  # noqa: E402  (after the variable: it picks the Keras)

import rendezvous.script as rdv  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--epochs", type=int, default=60)
p.add_argument("--global-batch", type=int, default=128, help="summed over the workers")
p.add_argument("--backup-dir", default="resnet56-backup", help="BackupAndRestore's; share it, or use --sync-dir")
p.add_argument("--data-dir", help="CIFAR-10's python batches (cifar-10-batches-py), if not downloaded")
p.add_argument("--synthetic", action="store_true", help="random images: no download")
p.add_argument("--steps", type=int, help="steps per epoch (default: the whole training set)")
p.add_argument("--threads", type=int, default=0, help="TensorFlow threads (0: its default)")
args = p.parse_args()

if args.threads:  # configuration, not an op: it may come before the strategy
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
strategy = tf.distribute.MultiWorkerMirroredStrategy()  # first of all: before any other TF op
rdv.exit_on_sigterm()  # end at once when rendezvous stops the round (TF took SIGTERM over)
keras, layers = tf.keras, tf.keras.layers
job = rdv.env()  # None when run alone


def resnet(depth=56, classes=10):
    reg = keras.regularizers.l2(1e-4)

    def conv(x, filters, stride=1):
        return layers.Conv2D(filters, 3, stride, "same", use_bias=False, kernel_initializer="he_normal",
                             kernel_regularizer=reg)(x)

    def bn(x):
        return layers.BatchNormalization(momentum=0.9, epsilon=1e-5)(x)

    inputs = keras.Input((32, 32, 3))
    x = layers.ReLU()(bn(conv(inputs, 16)))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range((depth - 2) // 6):
            stride = 2 if stage and not block else 1
            y = bn(conv(layers.ReLU()(bn(conv(x, filters, stride))), filters))
            if stride > 1:  # option A: subsample, zero-pad the channels
                x = layers.Lambda(lambda t, f=filters: tf.pad(
                    t[:, ::2, ::2], [[0, 0], [0, 0], [0, 0], [f // 4, f // 4]]))(x)
            x = layers.ReLU()(layers.Add()([x, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(classes, kernel_regularizer=reg)(x), name=f"resnet{depth}")


def load():
    if args.synthetic:  # the same random images on every worker
        rng = np.random.default_rng(0)
        return (rng.integers(0, 256, (1024, 32, 32, 3), np.uint8), rng.integers(0, 10, (1024, 1))), None
    if not args.data_dir:
        return keras.datasets.cifar10.load_data()  # downloads once to ~/.keras/datasets

    def batch(name):  # rows of 3072 bytes, channel by channel
        with open(os.path.join(args.data_dir, name), "rb") as f:
            d = pickle.load(f, encoding="bytes")
        return d[b"data"].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), np.array(d[b"labels"])[:, None]
    parts = [batch(f"data_batch_{i}") for i in range(1, 6)]
    return (np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts])), batch("test_batch")


def prepare(image, label, train):
    image = tf.cast(image, tf.float32)
    if train:
        image = tf.image.random_crop(tf.image.resize_with_crop_or_pad(image, 40, 40), (32, 32, 3))
        image = tf.image.random_flip_left_right(image)
    return tf.image.per_image_standardization(image), label


@rdv.record  # an uncaught exception goes to $RENDEZVOUS_ERROR_FILE, for every node to see
def main():
    (x, y), test = load()
    steps = args.steps or len(x) // args.global_batch

    def train_input(ctx):
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        ds = ds.shuffle(len(x), seed=0).repeat().map(lambda i, l: prepare(i, l, True), tf.data.AUTOTUNE)
        return ds.batch(ctx.get_per_replica_batch_size(args.global_batch), drop_remainder=True).prefetch(2)

    rate = 0.1 * args.global_batch / 128
    with strategy.scope():
        model = resnet()
        model.compile(keras.optimizers.SGD(rate, momentum=0.9),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    schedule = keras.callbacks.LearningRateScheduler(
        lambda epoch: rate * (0.01 if epoch >= args.epochs * 3 // 4 else 0.1 if epoch >= args.epochs // 2 else 1))
    callbacks = [keras.callbacks.BackupAndRestore(args.backup_dir), schedule,
                 rdv.ProgressCallback(global_batch_size=args.global_batch, every=50)]
    where = f"worker {job.rank}/{job.world_size}, round {job.round}" if job else "alone"
    print(f"{where}: {model.count_params()} parameters, {steps} steps/epoch", flush=True)
    model.fit(strategy.distribute_datasets_from_function(train_input), epochs=args.epochs,
              steps_per_epoch=steps, callbacks=callbacks, verbose=2 if not job or job.is_chief else 0)
    if test is not None:
        data = tf.data.Dataset.from_tensor_slices(test).map(lambda i, l: prepare(i, l, False))
        accuracy = model.evaluate(data.batch(args.global_batch, drop_remainder=True), verbose=0)[1]
        print(f"test accuracy {accuracy:.4f}", flush=True)
    digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()
    print("weights sha256", digest, flush=True)  # the same on every worker: they train one model


main()
