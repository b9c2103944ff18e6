"""What a training script uses of rendezvous, without TensorFlow, gRPC or the daemon.

    import rendezvous.script as rdv

    info = rdv.env()            # rank, world size, round, ... or None outside rendezvous
    callback = rdv.ProgressCallback(global_batch_size=128)   # a Keras callback
    @rdv.record                 # an uncaught exception is written to the error file
    def main(): ...

- `env()` reads the variables the daemon gives the command (`RENDEZVOUS_RANK`, ...).
- `ProgressCallback` (tf-keras or Keras 3) and `write_progress` (any loop) append the
  progress lines `rendezvous status` and the metrics show (`RENDEZVOUS_PROGRESS_FILE`).
- `record` and `write_error` write `RENDEZVOUS_ERROR_FILE`: one JSON object
  {"type": ..., "message": ..., "traceback": ...}, UTF-8, replaced atomically.
- `exit_on_sigterm` gives SIGTERM back its default action, which TensorFlow's coordination
  service takes over as a preemption notice when the strategy is created.

Importing this costs a few milliseconds: Keras is imported only when a callback is made.
May import: only the standard library; never `core`, `config` or any other layer, whose
imports would load more than a script needs.
"""

from ._env import Env, env
from ._errors import ERROR_VARIABLE, record, write_error
from ._progress import PROGRESS_VARIABLE, ProgressCallback, write_progress
from ._signals import exit_on_sigterm

__all__ = [
    "ERROR_VARIABLE",
    "Env",
    "PROGRESS_VARIABLE",
    "ProgressCallback",
    "env",
    "exit_on_sigterm",
    "record",
    "write_error",
    "write_progress",
]
