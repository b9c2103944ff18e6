"""Training under MultiWorkerMirroredStrategy. Importing this imports TensorFlow.

Ordering rule: with a cluster in TF_CONFIG, collective ops must be configured
before the TensorFlow runtime starts, so :func:`create_strategy` must run
before any other TensorFlow op (creating a tensor, a variable, a dataset or a
model all start the runtime). Thread settings are configuration, not ops, and
must come even earlier.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import numpy as np

from trainer import ConfigError, pipeline, recipe, reporting, scratch
from trainer._keras import keras, tf
from trainer.cluster import EXIT_CLUSTER, EXIT_CONFIG, EXIT_FAILED, EXIT_OK, ClusterInfo
from trainer.errorfile import write_error

# A peer died, froze past the collective timeout, or the collective was aborted.
CLUSTER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.DeadlineExceededError,
    tf.errors.AbortedError,
    tf.errors.CancelledError,
)


def create_strategy(threads: int, collective_timeout: float):
    """Create the strategy. Call this before any other TensorFlow op."""
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=collective_timeout or None
    )
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def exit_on_sigterm() -> None:
    """Make SIGTERM stop the trainer at once, with status 143.

    With a cluster, TensorFlow's coordination service takes over SIGTERM as a preemption
    notice and training goes on. Here the launcher (rendezvous, systemd) owns the
    lifecycle: a stopped worker must stop, and --backup-dir makes the restart resume.
    A Python handler runs only once the main thread gets control back, which a step blocked
    in a collective whose peer died does not give until TensorFlow's heartbeat fails it (8 s
    measured). So the signal's wake-up byte is also read by a thread of its own, which does
    not wait for the main thread (TensorFlow releases the GIL while it executes).
    """

    leaving = threading.Lock()  # the handler and the thread may both get there: one says it

    def stop(signum, frame=None):
        if leaving.acquire(blocking=False):
            print("trainer: stopped by SIGTERM", file=sys.stderr, flush=True)
            scratch.leave(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)

    def watch():
        while True:
            if signal.SIGTERM in os.read(wake_read, 64):
                stop(signal.SIGTERM)

    threading.Thread(target=watch, name="sigterm", daemon=True).start()


FINAL_WAIT_MIN_S = 600  # seconds the workers wait for each other at the end, at least


class OutputError(Exception):
    """The model or the result file could not be written after the training."""


def run(args, cluster: ClusterInfo, dataset, start_time: float) -> int:
    try:
        strategy = create_strategy(args.threads, args.collective_timeout)
        exit_on_sigterm()  # after the strategy: creating it installs TensorFlow's handler
        result = train(strategy, args, cluster, dataset, start_time)
    except ConfigError as e:
        return _fail(f"trainer: {e}", EXIT_CONFIG, e)
    except OutputError as e:
        return _fail(f"trainer: {e}", EXIT_FAILED, e)
    except CLUSTER_ERRORS as e:
        return _fail(f"trainer: lost the cluster: {_describe(e)}", EXIT_CLUSTER, e)
    except tf.errors.OpError as e:
        return _fail(f"trainer: training failed: {_describe(e)}", EXIT_FAILED, e)
    first, last = result["initial_epoch"] + 1, result["epochs"]
    trained = f"epochs {first}-{last}" if first <= last else "no epochs left"
    print(
        f"done: test accuracy {result['test_accuracy']:.4f} "
        f"loss {_fmt(result['final_loss'])} accuracy {_fmt(result['final_accuracy'])} "
        f"({trained} of {last}, worker {result['worker_index']}/{result['num_workers']}, "
        f"{result['timing']['total_s']:.1f}s)",
        flush=True,
    )
    return EXIT_OK


def train(strategy, args, cluster: ClusterInfo, dataset, start_time: float) -> dict:
    keras.utils.set_random_seed(args.seed)
    replicas = strategy.num_replicas_in_sync
    hp = recipe.resolve(
        args.model, args.dataset, replicas, global_batch_size=args.global_batch_size,
        epochs=args.epochs, optimizer=args.optimizer, learning_rate=args.learning_rate,
    )
    steps = args.steps_per_epoch or max(1, len(dataset.x_train) // hp.global_batch_size)
    train_data = strategy.distribute_datasets_from_function(
        lambda ctx: pipeline.train_dataset(dataset, ctx, hp, args.seed)
    )
    test_data = pipeline.test_dataset(dataset, hp)
    model = build_model(strategy, args.model, dataset, hp)
    print(
        f"worker {cluster.worker_index}/{cluster.num_workers}: {args.model} "
        f"({model.count_params()} parameters) on {dataset.name} "
        f"({len(dataset.x_train)} train, {len(dataset.x_test)} test), "
        f"global batch {hp.global_batch_size} over {replicas} replica(s), "
        f"{steps} steps/epoch, {hp.describe()}",
        flush=True,
    )

    progress = EpochProgress(hp.epochs)
    fit_start = time.time()
    reports = [
        reporting.progress_callback(hp.epochs, steps, hp.global_batch_size, args.progress_every),
        reporting.tensorboard_callback(args.log_dir, cluster.is_chief),
    ]
    callbacks = make_callbacks(args.backup_dir, hp, progress) + [c for c in reports if c is not None]
    model.fit(train_data, epochs=hp.epochs, steps_per_epoch=steps, callbacks=callbacks, verbose=0)
    fit_end = time.time()

    # Every worker takes part in these: each runs collectives.
    test_accuracy = float(model.evaluate(test_data, verbose=0, return_dict=True)["accuracy"])
    digest = weights_sha256(model.get_weights())
    if args.model_dir:
        save_model(model, args.model_dir, cluster.is_chief)
    wait_for_all(strategy, args.collective_timeout)

    logs = progress.last_logs
    now = time.time()
    result = {
        "worker_index": cluster.worker_index,
        "task_type": cluster.task_type,
        "task_index": cluster.task_index,
        "num_workers": cluster.num_workers,
        "is_chief": cluster.is_chief,
        "model": args.model,
        "dataset": dataset.name,
        "recipe": hp.recipe,
        "global_batch_size": hp.global_batch_size,
        "learning_rate": hp.learning_rate,
        "steps_per_epoch": steps,
        "initial_epoch": progress.initial_epoch if progress.initial_epoch is not None else hp.epochs,
        "epochs": hp.epochs,
        "final_loss": _float_or_none(logs.get("loss")),
        "final_accuracy": _float_or_none(logs.get("accuracy")),
        "test_accuracy": test_accuracy,
        "weights_sha256": digest,
        "timing": {
            "process_start_unix": process_start_time(start_time),
            "fit_start_unix": fit_start,
            "first_step_unix": progress.first_step_unix,
            "fit_end_unix": fit_end,
            "end_unix": now,
            "epoch_s": progress.epoch_seconds,
            "total_s": now - process_start_time(start_time),
        },
    }
    if args.result_file:
        try:
            write_json(args.result_file, result)
        except OSError as e:
            raise OutputError(f"cannot write --result-file {args.result_file}: {e.strerror or e}") from None
    return result


def build_model(strategy, name: str, dataset, hp: recipe.Hyperparameters):
    from trainer import models

    with strategy.scope():
        model = models.build(name, dataset.input_shape, dataset.num_classes)
        model.compile(
            optimizer=make_optimizer(hp.optimizer, hp.learning_rate),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            # Weighted, so that the test set's padding (weight 0) does not count.
            weighted_metrics=["accuracy"],
        )
    return model


def make_callbacks(backup_dir: str | None, hp: recipe.Hyperparameters, progress) -> list:
    callbacks = []
    if backup_dir:
        # Before `progress`: an epoch line is printed only after the backup is written.
        callbacks.append(keras.callbacks.BackupAndRestore(backup_dir))
    # Set from the epoch number at every epoch start, so a resumed run continues the schedule.
    callbacks.append(keras.callbacks.LearningRateScheduler(lambda epoch, _: hp.learning_rate_at(epoch)))
    callbacks.append(progress)
    return callbacks


def make_optimizer(name: str, learning_rate: float):
    if name == "adam":
        return keras.optimizers.Adam(learning_rate)
    return keras.optimizers.SGD(learning_rate, momentum=0.9)


class EpochProgress(keras.callbacks.Callback):
    """Prints one line per epoch and records timings and the resume epoch."""

    def __init__(self, epochs: int):
        super().__init__()
        self.epochs = epochs
        self.initial_epoch: int | None = None
        self.first_step_unix: float | None = None
        self.epoch_seconds: list[float] = []
        self.last_logs: dict = {}
        self._epoch_start = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        if self.initial_epoch is None:
            self.initial_epoch = epoch
        self._epoch_start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if self.first_step_unix is None:
            self.first_step_unix = time.time()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._epoch_start
        self.epoch_seconds.append(seconds)
        self.last_logs = {k: float(v) for k, v in (logs or {}).items()}
        print(
            f"epoch {epoch + 1}/{self.epochs} loss {self.last_logs.get('loss', float('nan')):.4f} "
            f"accuracy {self.last_logs.get('accuracy', float('nan')):.4f} {seconds:.1f}s",
            flush=True,
        )


def weights_sha256(weights: list[np.ndarray]) -> str:
    """sha256 over the bytes of every weight array, in model order."""
    h = hashlib.sha256()
    for w in weights:
        h.update(np.ascontiguousarray(w).tobytes())
    return h.hexdigest()


def save_model(model, model_dir: str, is_chief: bool) -> None:
    """All workers save (saving may run collectives); only the chief keeps its copy."""
    try:
        if is_chief:
            model.save(model_dir)
            return
        tmp = tempfile.mkdtemp(prefix="trainer-model-")
        try:
            model.save(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    except CLUSTER_ERRORS:
        raise
    except OSError as e:
        raise OutputError(f"cannot save the model in {model_dir}: {e.strerror or e}") from None
    except tf.errors.OpError as e:
        raise OutputError(f"cannot save the model in {model_dir}: {_describe(e)}") from None


def wait_for_all(strategy, collective_timeout: float) -> None:
    """Return once every worker has got here, through one all-reduce: a worker that
    exits while a peer is still in its last collective can fail that peer."""
    # Generous: saving the model can hold one worker back. A lost peer still fails the
    # all-reduce at once, a frozen one through the coordination service's heartbeat.
    timeout = max(collective_timeout, FINAL_WAIT_MIN_S) if collective_timeout else None
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)

    def arrive():
        context = tf.distribute.get_replica_context()
        return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(1.0), options=options)

    strategy.run(arrive)


def process_start_time(fallback: float) -> float:
    """Wall-clock start of this process (Linux /proc), else ``fallback``."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        start_ticks = int(fields[19])  # field 22 of stat: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - (uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return fallback


def write_json(path: str, obj: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".result-")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _float_or_none(v):
    return None if v is None else float(v)


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def _describe(e: Exception) -> str:
    text = getattr(e, "message", None) or str(e)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    head = "\n  ".join(lines[:3])
    return f"{type(e).__name__}: {head}"


def _fail(message: str, code: int, error: BaseException) -> int:
    print(message, file=sys.stderr, flush=True)
    write_error(type(error).__name__, message.removeprefix("trainer: "), error)
    return code
