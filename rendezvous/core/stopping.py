"""`rendezvous stop`: who asked to end a job, and how, as plain data.

The coordinator fills `address` from the connection (never from what the caller claims);
`user` and `reason` are the caller's words, cut short and made printable before any log
line shows them. A stop ends the job on every member with `JobStopped.exit_code`, with no
restart, and is never taken for a failure.
"""

from __future__ import annotations

import math
from typing import Optional

from ..errors import JobStopped
from .record import record
from .status import printable

# A user name or a reason longer than this is cut: they are for a log line.
MAX_WORDS = 200

#: The exit status of every `join` of a stopped job.
STOPPED = JobStopped.exit_code


def _short(text: str) -> str:
    text = printable(text.strip())
    return text if len(text) <= MAX_WORDS else text[: MAX_WORDS - 3] + "..."


def check_grace(grace: Optional[float]) -> Optional[float]:
    """A grace sent over the network: None (each member's own) or a finite number of
    seconds from 0; ValueError otherwise."""
    if grace is None:
        return None
    if not (isinstance(grace, (int, float)) and math.isfinite(grace) and grace >= 0):
        raise ValueError(f"stop grace must be a number of seconds from 0, got {grace!r}")
    return float(grace)


@record
class StopOrder:
    address: str  # the caller's, as the coordinator saw the connection
    user: str = ""
    reason: str = ""
    grace: Optional[float] = None  # SIGTERM -> SIGKILL; None: each member's --stop-grace

    def __post_init__(self) -> None:
        object.__setattr__(self, "user", _short(self.user))
        object.__setattr__(self, "reason", _short(self.reason))
        object.__setattr__(self, "grace", check_grace(self.grace))

    def describe(self) -> str:
        """`10.0.0.4 (user alice): maintenance`, for log lines."""
        who = printable(self.address) + (f" (user {self.user})" if self.user else "")
        return who + (f": {self.reason}" if self.reason else "")
