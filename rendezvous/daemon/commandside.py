"""What a round gives its command and what the node says of it: the GPUs and the data
network it uses, and, when it fails, why (its error file or its stderr's tail), in the one
form every node of the job logs."""

from __future__ import annotations

import logging
import os
import signal
from typing import Mapping, Optional, Sequence

from ..core import member as machine
from ..core.failure import Failure, bounded, failure_to_dict, recognized, scrub
from ..core.known_failures import tf_config_assignment
from ..core.gpus import SOCKET_VARIABLES, VISIBLE, describe_devices
from ..core.peer import Peer
from ..core.preflight import Fingerprint
from ..core.record import replace
from ..core.tf_config import Membership
from ..launch.errorfile import ErrorReport
from ..launch.launcher import Launcher
from ..launch.prewarm import plan

log = logging.getLogger(__name__)

SCRIPT_READ_LIMIT = 1 << 20  # of a script looked at for TF_CONFIG lines


def log_failure(failure: Failure) -> None:
    """One line naming the node, its rank, how the command ended and its cause, then the
    tail (or traceback) indented, a line each: what every node of the job shows. The JSON
    log carries the whole failure with the first line."""
    log.error("command failed: %s", failure.headline(), extra={"failure": failure_to_dict(failure)})
    for line in failure.details():
        log.error("    %s", line)


def warn_inherited_tf_config(environ: Mapping[str, str]) -> None:
    """A TF_CONFIG in this daemon's environment (a hand-written launch script's leftover) is
    never the command's: every round replaces it with the one built for that round. Said
    once at the start, naming it, so that nobody believes it is used."""
    if "TF_CONFIG" in environ:
        log.warning("TF_CONFIG is set in this daemon's environment (%s): the command gets the one rendezvous "
                    "builds for each round instead; unset it", scrub(environ["TF_CONFIG"], 200))


def warn_script_tf_config(command: Sequence[str]) -> None:
    """A Python script that sets TF_CONFIG itself (the classic tutorial's lines) replaces
    the one each round gives it: its workers then look for each other where the old cluster
    was, and may wait for ever. Said once at the start, naming the line to delete."""
    found = plan(command)
    if found is None or found.mode != "file":
        return
    try:
        with open(found.target, "rb") as script:
            source = script.read(SCRIPT_READ_LIMIT).decode("utf-8", "replace")
    except OSError:
        return  # not readable here: the command's start says so
    line = tf_config_assignment(source)
    if line is not None:
        log.warning("%s line %d sets TF_CONFIG itself (%s): that replaces the one rendezvous gives it, and its "
                    "workers will not find each other; delete that line", found.target, line[0], scrub(line[1], 200))


def signal_name(number: Optional[int]) -> str:
    try:
        return signal.Signals(number).name if number else ""
    except ValueError:
        return f"signal {number}"


def describe_failure(me: Peer, membership: Optional[Membership], report: machine.Report, launcher: Launcher,
                     error: Optional[ErrorReport]) -> Failure:
    """Why this node's command failed: its error file when it wrote one, else its stderr's
    tail; a failure with a known fix is recognized here, where this node's TF port is known."""
    failure = Failure(
        node_id=me.node_id, address=str(me.address), rank=membership.rank_of(me.node_id) if membership else None,
        exit_code=report.exit_code, signal="" if report.reason else signal_name(launcher.signal),
        reason=report.reason, tail=launcher.tail(),
    )
    if error is not None:
        failure = replace(failure, error_type=error.error_type, message=error.message, tail=error.traceback,
                          from_error_file=True)
    tf_port = membership.members[membership.rank_of(me.node_id)].tf_port if membership else None
    return recognized(bounded(failure), tf_port)  # well within a request's size, however the command wrote


def log_devices(membership: Membership, env: dict[str, str], fingerprint: Optional[Fingerprint], gpus: str,
                data_interface: Optional[str]) -> None:
    """Which GPUs this node's command uses, and the socket variables of the data network."""
    devices = describe_devices(membership.gpus, fingerprint.gpu_ids if fingerprint else ())
    chosen = fingerprint.gpu_option if fingerprint else gpus
    option = f" (--gpus {chosen})" if membership.gpus is not None else ""
    shown = f", {VISIBLE}={env[VISIBLE]!r}" if VISIBLE in env else ""
    log.info("this node's command uses %s%s%s", devices, option, shown)
    sockets = [f"{name}={env.get(name, os.environ.get(name))}" for name in SOCKET_VARIABLES if data_interface]
    if sockets:
        log.info("training traffic on the data network: %s", ", ".join(sockets))
