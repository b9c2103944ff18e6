"""Command line of the trainer: ``python -m trainer [options]``.

This module does not import TensorFlow. It parses the options, reads
TF_CONFIG, loads and checks the data, and only then imports the training code.

Exit codes: 0 training finished; 1 training failed, or its model or result
could not be written; 2 bad options, bad TF_CONFIG, missing or malformed data,
an output path that cannot be written, or TensorFlow / tf-keras not installed;
3 the cluster broke up (a peer was lost or a collective timed out), so the
job can be restarted, resuming from --backup-dir if given.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import textwrap
import time

from trainer import INSTALL_HINT, ConfigError
from trainer.cluster import EXIT_CONFIG, ClusterInfo, read_tf_config
from trainer.errorfile import write_error
from trainer.recipe import (
    ADAM_LR,
    CROP_PADDING,
    DEFAULT_EPOCHS,
    DEFAULT_GLOBAL_BATCH,
    RESNET56_CIFAR10,
    SGD_LR_PER_128,
)

DATASETS = ("digits", "cifar10", "synthetic")
MODELS = ("small_cnn", "resnet56")


def _recipe_help() -> str:
    r = RESNET56_CIFAR10
    size = 32  # CIFAR-10 images
    decays = " and ".join(f"x{factor:g} after {epoch}" for epoch, factor in r.decays)
    return (
        f"Recipe: --model resnet56 --dataset cifar10 trains with ResNet-56's CIFAR-10 recipe "
        f"by default: a global batch of {r.global_batch} (whatever the number of workers), "
        f"{r.epochs} epochs, SGD with momentum 0.9 at a base learning rate of "
        f"{SGD_LR_PER_128 * r.global_batch / 128:g} "
        f"({SGD_LR_PER_128:g} x global batch / 128), {decays} epochs; every image "
        f"standardized to zero mean and unit variance; every training image padded with "
        f"zeros to {size + 2 * CROP_PADDING}x{size + 2 * CROP_PADDING}, cropped back to "
        f"{size}x{size} at a random place and flipped left-right at random. "
        f"--global-batch-size, --epochs, --optimizer and --learning-rate each replace their "
        f"part; the decays and the image processing stay. The global batch, and so the "
        f"learning rate, stays the same through a restart on more or fewer workers."
    )


def _paragraphs(*texts: str) -> str:
    return "\n\n".join(textwrap.fill(t, width=79) for t in texts)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m trainer",
        formatter_class=argparse.RawDescriptionHelpFormatter,  # keeps the paragraphs below
        description=_paragraphs(
            "Train a model with TensorFlow MultiWorkerMirroredStrategy. The cluster "
            "comes from the TF_CONFIG environment variable; without it the trainer "
            "runs as a single process."
        ),
        epilog=_paragraphs(
            _recipe_help(),
            "Exit codes: 0 finished; 1 training failed, or the model or result could "
            "not be written; 2 bad options, TF_CONFIG, data or output path, or "
            "TensorFlow missing; 3 lost peer or collective timeout "
            "(restart to resume from --backup-dir).",
        ),
    )
    p.add_argument("--model", choices=MODELS, default="small_cnn",
                   help="small_cnn (default) or resnet56 (CIFAR ResNet-56)")
    p.add_argument("--dataset", choices=DATASETS, default="digits",
                   help="digits (default, scikit-learn's 8x8 digits), cifar10 "
                        "(needs --data-dir) or synthetic (seeded random 32x32x3)")
    p.add_argument("--data-dir", metavar="DIR",
                   help="CIFAR-10 python batches, in DIR or DIR/cifar-10-batches-py")
    p.add_argument("--epochs", type=_whole(1),
                   help=f"default {DEFAULT_EPOCHS}; {RESNET56_CIFAR10.epochs} in the recipe below")
    p.add_argument("--global-batch-size", type=_whole(1),
                   help=f"batch size summed over all replicas (default {DEFAULT_GLOBAL_BATCH}; "
                        f"{RESNET56_CIFAR10.global_batch} in the recipe below), "
                        "rounded up to a multiple of the number of replicas (one per worker on "
                        "CPU). A given size does not grow with the workers: a restart on more "
                        "or fewer of them keeps it up to that rounding, e.g. 64 is 64 on 2 "
                        "workers and 66 on 3")
    p.add_argument("--steps-per-epoch", type=_whole(1),
                   help="default: training examples // global batch size")
    p.add_argument("--optimizer", choices=("adam", "sgd"),
                   help="default: adam for small_cnn, sgd with momentum 0.9 for resnet56")
    p.add_argument("--learning-rate", type=_number("a positive number", 0, False),
                   help=f"the base rate. Default: {ADAM_LR:g} for adam; for sgd "
                        f"{SGD_LR_PER_128:g} x global batch size / 128")
    p.add_argument("--seed", type=_whole(0, MAX_SEED), default=0,
                   help="seeds initial weights, shuffling, augmentation and synthetic data: "
                        f"0 (default) to {MAX_SEED}")
    p.add_argument("--threads", type=_whole(0, MAX_THREADS), default=0,
                   help=f"TensorFlow intra-op and inter-op threads, up to {MAX_THREADS}; 0 "
                        "(default) lets TensorFlow choose. Use 1 when several workers share "
                        "a machine")
    p.add_argument("--collective-timeout", default=60.0, metavar="SECONDS",
                   type=_number(f"a number of seconds from 0 to {MAX_COLLECTIVE_TIMEOUT}",
                                0, True, MAX_COLLECTIVE_TIMEOUT),
                   help="fail a collective operation that waits longer than this for a "
                        f"peer, e.g. a frozen one (default 60; 0 waits forever; at most "
                        f"{MAX_COLLECTIVE_TIMEOUT}). Keep it above the longest lag between "
                        "workers, such as start-up tracing")
    p.add_argument("--backup-dir", metavar="DIR",
                   help="back up at every epoch end; a restarted job resumes after the "
                        "last finished epoch. All workers must share this directory, or run under "
                        "`rendezvous join --sync-dir DIR`, which copies the chief's to every machine")
    p.add_argument("--model-dir", metavar="DIR",
                   help="the chief (worker 0) saves the final model here (SavedModel)")
    p.add_argument("--result-file", metavar="PATH",
                   help="write a JSON summary of the run here (every worker)")
    p.add_argument("--log-dir", metavar="DIR",
                   help="the chief writes TensorBoard logs here: loss, accuracy and learning "
                        "rate per epoch (view with `tensorboard --logdir DIR`)")
    p.add_argument("--progress-every", type=_whole(0), default=50, metavar="STEPS",
                   help="under rendezvous, report progress (to $RENDEZVOUS_PROGRESS_FILE) at "
                        "every epoch end and every STEPS steps (default 50; 0: epochs only)")
    return p


MAX_SEED = 2**32 - 1  # NumPy's legacy seeding takes 0 .. 2**32 - 1
MAX_THREADS = 4096
MAX_COLLECTIVE_TIMEOUT = 1_000_000  # seconds; TensorFlow takes the barrier timeout in int64 ms


# argparse types: each error reads "argument --epochs: must be ..., got 'abc'".


def _whole(low: int, high: int | None = None):
    """A whole number (ASCII digits) from `low` (to `high`)."""
    if high is None:
        what = f"a whole number of at least {low}"
    else:
        what = f"a whole number from {low} to {high}"

    def parse(text: str) -> int:
        word = text.strip()
        digits = word[1:] if word[:1] == "-" else word
        value = int(word) if digits.isascii() and digits.isdigit() else None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return parse


def _number(what: str, low: float, allow_low: bool, high: float | None = None):
    """A finite number above `low` (or equal to it, if `allow_low`), at most `high`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (value >= low if allow_low else value > low)
        if not ok or (high is not None and value > high) or "_" in text:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    return parse


def _check_writable_dir(option: str, path: str, directory: str) -> None:
    """Raise ConfigError unless files can be written in `directory`, or it can be created:
    a bad output path must stop the trainer now, not after the training."""
    directory = os.path.abspath(directory)
    existing = directory
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigError(f"{option} {path}: {existing} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".trainer-check-")
    except OSError as e:
        reason = e.strerror or str(e)
        if existing == directory:
            raise ConfigError(f"{option} {path}: cannot write in {directory}: {reason}") from None
        raise ConfigError(
            f"{option} {path}: {directory} does not exist and cannot be created in "
            f"{existing}: {reason}"
        ) from None
    os.close(fd)
    os.unlink(probe)


def check_output_paths(args: argparse.Namespace, cluster: ClusterInfo) -> None:
    """Every worker writes its --result-file and into --backup-dir; the chief alone keeps
    the model in --model-dir (the others save to a temporary directory)."""
    if args.result_file:
        if os.path.isdir(args.result_file):
            raise ConfigError(f"--result-file {args.result_file} is a directory, not a file")
        _check_writable_dir("--result-file", args.result_file, os.path.dirname(os.path.abspath(args.result_file)))
    if args.backup_dir:
        _check_writable_dir("--backup-dir", args.backup_dir, args.backup_dir)
    if args.model_dir and cluster.is_chief:
        _check_writable_dir("--model-dir", args.model_dir, args.model_dir)
    if args.log_dir and cluster.is_chief:
        _check_writable_dir("--log-dir", args.log_dir, args.log_dir)


# Import name -> name of the package that provides it.
_PACKAGES = {"sklearn": "scikit-learn", "tf_keras": "tf-keras"}


def _missing_dependency(e: ImportError) -> str:
    module = (e.name or "").split(".")[0]
    package = _PACKAGES.get(module, module) or "a dependency"
    return f"trainer: {package} is not installed ({e}). Install the trainer extra: {INSTALL_HINT}"


def main(argv: list[str] | None = None) -> int:
    start = time.time()
    args = build_parser().parse_args(argv)
    try:
        cluster = read_tf_config()
    except ConfigError as e:
        return _fail(f"trainer: {e}", EXIT_CONFIG)
    try:
        if args.data_dir and args.dataset != "cifar10":
            raise ConfigError("--data-dir is only used with --dataset cifar10")
        check_output_paths(args, cluster)
        from trainer import data

        dataset = data.load(args.dataset, args.data_dir, args.seed)
    except ImportError as e:
        return _fail(_missing_dependency(e), EXIT_CONFIG)
    except ConfigError as e:  # includes data.DataError
        return _fail(f"trainer: {e}", EXIT_CONFIG)

    try:
        from trainer import train  # imports TensorFlow
    except ImportError as e:
        return _fail(_missing_dependency(e), EXIT_CONFIG)
    except RuntimeError as e:
        return _fail(f"trainer: {e}", EXIT_CONFIG)
    return train.run(args, cluster, dataset, start_time=start)


def _fail(message: str, code: int) -> int:
    print(message, file=sys.stderr, flush=True)
    write_error("ConfigError" if code == EXIT_CONFIG else "TrainerError", message.removeprefix("trainer: "))
    return code
