"""Failures with a known fix: the TensorFlow and rendezvous errors a multi-worker job meets
most, recognized in what a failed command left (its error file or its stderr tail), each
with a one-line fix and its entry in the troubleshooting page.

The member whose command failed matches its own failure (`recognize`) and sends the key of
what it recognized with it (`Failure.known`); every node, `status --job` and the JSON then
show that entry's fix and link. The table is plain data: a new entry is a pattern, a fix
and an anchor of docs/troubleshooting.md (a test checks that every anchor exists).
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from .record import record

TROUBLESHOOTING = "docs/troubleshooting.md"


@record
class KnownFailure:
    """One failure with a known fix: `patterns` (regular expressions, any of which found in
    a line of the cause or the tail recognizes it), the `fix` in one line, and the `anchor`
    of its entry in the troubleshooting page."""

    key: str
    title: str
    fix: str
    anchor: str
    patterns: tuple[str, ...] = ()

    @property
    def link(self) -> str:
        return f"{TROUBLESHOOTING}#{self.anchor}"


KERAS3_FIT = KnownFailure(
    "keras3-fit", "Keras 3's model.fit under MultiWorkerMirroredStrategy",
    "Keras 3's model.fit fails under MultiWorkerMirroredStrategy: pip install tf-keras, set "
    "TF_USE_LEGACY_KERAS=1 before importing TensorFlow and use tf.keras (or a custom training loop)",
    # the message's first line, or its last: the PerReplica value between them can be longer
    # than the tail kept
    "known-keras3-fit", (r"Attempt to convert a value \(PerReplica",
                         r"unsupported type \(<class '[\w.]*PerReplica'>\) to a Tensor"),
)
STRATEGY_LATE = KnownFailure(
    "strategy-late", "the strategy created after another TensorFlow call",
    "create tf.distribute.MultiWorkerMirroredStrategy() first, before any other TensorFlow call "
    "(tf.constant, a dataset, a model, tf.config.list_logical_devices)",
    "known-strategy-late", (r"Collective ops must be configured at program startup",),
)
GROUP_SIZE = KnownFailure(
    "group-size", "workers with different numbers of devices",
    "every worker must run the same number of devices: give every node as many GPUs "
    "(--gpus N, or the same CUDA_VISIBLE_DEVICES count)",
    "known-group-size", (r"is joining a group with size ?\d+, but that group has size \d+",
                         r"[Gg]roup size mismatch"),
)
SCRIPT_TF_CONFIG = KnownFailure(
    "script-tf-config", "the script sets TF_CONFIG itself",
    "the command set its own TF_CONFIG instead of the one rendezvous gave it: delete the "
    "os.environ[\"TF_CONFIG\"] = ... lines from the script",
    "known-script-tf-config",
)
TF_PORT_IN_USE = KnownFailure(
    "tf-port-in-use", "TensorFlow's port already in use",
    "another process holds this node's TensorFlow port: end it, or give every node a free "
    "--tf-port (nodes sharing one machine need different ones)",
    "known-tf-port-in-use", (r"Could not start gRPC server", r"Failed to add port to server"),
)
TF_PORT_BLOCKED = KnownFailure(
    "tf-port-blocked", "a TensorFlow port that does not answer",
    "another node's TensorFlow port does not answer (a firewall drops it): fix the port with "
    "--tf-port PORT on every node and open it between them, as --port",
    "known-tf-port-blocked", (r"^TensorFlow port \S+ of .* does not answer",),
)

# In the order they are tried: the first that matches is the one shown.
KNOWN_FAILURES: tuple[KnownFailure, ...] = (
    KERAS3_FIT, STRATEGY_LATE, GROUP_SIZE, TF_PORT_BLOCKED, TF_PORT_IN_USE,
)
_ALL = {known.key: known for known in (*KNOWN_FAILURES, SCRIPT_TF_CONFIG)}

# Where TensorFlow names the endpoint its worker listens on, or tried to.
_OWN_ENDPOINT = (
    re.compile(r"Started server with target: grpc://(\S+):(\d+)"),
    re.compile(r"Failed to add port to server: .*resolved for '(\S*):(\d+)'"),
)


# A script that assigns TF_CONFIG (not one that reads it, or sets it only when missing):
# os.environ["TF_CONFIG"] = ..., os.environ.update(TF_CONFIG=...) or ({"TF_CONFIG": ...}),
# os.putenv("TF_CONFIG", ...).
_ASSIGNS_TF_CONFIG = re.compile(
    r"""environ\s*\[\s*["']TF_CONFIG["']\s*\]\s*=(?!=)"""
    r"""|environ\.update\(.*TF_CONFIG|putenv\(\s*["']TF_CONFIG["']""")


def tf_config_assignment(source: str) -> Optional[tuple[int, str]]:
    """The first line of a script's `source` that sets TF_CONFIG itself (its number and
    text), replacing the one rendezvous gives the command; None if none does. Comments
    are skipped; a string that only looks like code is not told apart."""
    for number, line in enumerate(source.splitlines(), 1):
        code = line.split("#", 1)[0]
        if _ASSIGNS_TF_CONFIG.search(code):
            return number, line.strip()
    return None


def known_failure(key: str) -> Optional[KnownFailure]:
    """The entry of `key` (what a failure carries), None for no key or one this version
    does not know (a newer peer's)."""
    return _ALL.get(key)


def _foreign_port(lines: Iterable[str], tf_port: int) -> bool:
    """Whether TensorFlow says it listens (or tried to) on a port other than `tf_port`, the
    one the TF_CONFIG rendezvous gave the command names for this node."""
    for line in lines:
        for pattern in _OWN_ENDPOINT:
            found = pattern.search(line)
            if found and int(found.group(2)) != tf_port:
                return True
    return False


def recognize(lines: Iterable[str], tf_port: Optional[int] = None) -> Optional[KnownFailure]:
    """The known failure that `lines` (a failure's cause, message and tail) show, or None.
    With `tf_port` (this node's port in the TF_CONFIG it gave the command), TensorFlow
    listening on another port means the script replaced TF_CONFIG: that comes first, as it
    is what made the port clash or the job hang."""
    lines = list(lines)
    if tf_port is not None and _foreign_port(lines, tf_port):
        return SCRIPT_TF_CONFIG
    for known in KNOWN_FAILURES:
        if any(re.search(pattern, line) for pattern in known.patterns for line in lines):
            return known
    return None
