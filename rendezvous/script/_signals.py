"""SIGTERM for a script under MultiWorkerMirroredStrategy.

Creating the strategy starts TensorFlow's coordination service, which installs a SIGTERM
handler of its own: the signal only records a preemption notice and the training goes on,
so the script never ends by itself when its round ends; the daemon kills it after the grace.
"""

from __future__ import annotations

import signal


def exit_on_sigterm() -> None:
    """Give SIGTERM its default action again: the process ends at once when it gets one,
    even in the middle of a collective (the kernel ends it; no Python code has to run). Call it
    after creating the strategy, which is when TensorFlow takes the signal over. A script that
    wants to save something on SIGTERM installs its own handler instead, and keeps it short:
    the daemon sends SIGKILL after --stop-grace (--abort-grace when a round is aborted)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
