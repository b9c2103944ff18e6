"""MultiWorkerMirroredStrategy trainer launched by the rendezvous daemon.

Run as ``python -m trainer``. Importing this package does not import
TensorFlow: argument parsing and data validation happen first, so ``--help``
and configuration errors are fast.
"""

INSTALL_HINT = (
    "pip install 'tf-rendezvous[trainer]'  (or pip install '.[trainer]' from a checkout)"
)


class ConfigError(Exception):
    """Bad options, environment or data: reported in one line, exit code 2."""
