"""The variables the daemon gives a command, read into one value."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from ._errors import ERROR_VARIABLE
from ._progress import PROGRESS_VARIABLE

if TYPE_CHECKING:
    from typing import Mapping, Optional


class Env(NamedTuple):
    """Where this process stands in the job, as the daemon told it."""

    rank: int  # this worker's index in TF_CONFIG, 0 to world_size - 1
    world_size: int  # workers in this round
    round: int  # 1 for the first round, one more after each restart
    restart_count: int  # rounds before this one
    job: str
    coordinator: str  # HOST:PORT of the coordinating daemon (gRPC), not a TensorFlow address
    node_id: str
    progress_file: Optional[str]  # where progress lines go (None: nobody reads them)
    error_file: Optional[str]  # where `record` writes an uncaught exception (None: nowhere)

    @property
    def is_chief(self) -> bool:
        """Whether this worker is MultiWorkerMirroredStrategy's chief (worker 0): the one
        that saves the model and writes the summaries."""
        return self.rank == 0


def _whole(environ: Mapping[str, str], name: str, least: int) -> int:
    text = environ.get(name)
    try:
        value = int(text) if text is not None else None
    except ValueError:
        value = None
    if value is None or value < least:
        raise ValueError(f"{name}={text!r} is not a whole number of at least {least}: "
                         "the daemon sets it; was the environment edited on the way?")
    return value


def env(environ: Optional[Mapping[str, str]] = None) -> Optional[Env]:
    """This process's place in the job, or None when it was not started by `rendezvous join`
    (no `RENDEZVOUS_RANK`): a script can then run alone. ValueError names a variable whose
    value is not what the daemon sets."""
    environ = os.environ if environ is None else environ
    if "RENDEZVOUS_RANK" not in environ:
        return None
    rank = _whole(environ, "RENDEZVOUS_RANK", 0)
    world_size = _whole(environ, "RENDEZVOUS_WORLD_SIZE", 1)
    if rank >= world_size:
        raise ValueError(f"RENDEZVOUS_RANK={rank} is not below RENDEZVOUS_WORLD_SIZE={world_size}")
    round = _whole(environ, "RENDEZVOUS_ROUND", 1)
    return Env(
        rank=rank,
        world_size=world_size,
        round=round,
        restart_count=_whole(environ, "RENDEZVOUS_RESTART_COUNT", 0)
        if "RENDEZVOUS_RESTART_COUNT" in environ else round - 1,
        job=environ.get("RENDEZVOUS_JOB", ""),
        coordinator=environ.get("RENDEZVOUS_COORDINATOR", ""),
        node_id=environ.get("RENDEZVOUS_NODE_ID", ""),
        progress_file=environ.get(PROGRESS_VARIABLE) or None,
        error_file=environ.get(ERROR_VARIABLE) or None,
    )
