"""Whether the other workers' TensorFlow ports answer: a firewall that drops them leaves
every worker waiting in the strategy's start-up for ever, with nothing on stderr.

While its command runs, a member knocks (a TCP connect) at its own TensorFlow port and at
every other member's. A port with nothing listening is refused at once by its host's
kernel; only a filter leaves a knock unanswered (`SILENT`). So once this node's own
worker listens (its command is a TensorFlow worker, which needs the others), another's
port that stays silent for `window` seconds is blocked: the member fails its command with
that reason (rendezvous.core.known_failures shows the fix). A port that answers once is
not knocked at again. Pure: the knocks' results and `now` come in.
"""

from __future__ import annotations

import enum
from typing import Mapping, Optional

from .record import record, replace


class Knock(enum.Enum):
    OPEN = "open"  # a connection was made: a worker listens
    REFUSED = "refused"  # the host answered: nothing listens (yet), or a filter rejects
    SILENT = "silent"  # no answer in time: a filter drops it


@record
class Reach:
    """What the knocks have shown so far: since when this node's own worker listens
    (`own_since`), since when each other port has been silent without a break, and which
    answered (done with)."""

    window: float
    own_since: Optional[float] = None
    silent_since: tuple[tuple[str, float], ...] = ()
    answered: frozenset[str] = frozenset()

    def to_knock(self, endpoints: tuple[str, ...]) -> tuple[str, ...]:
        """The other endpoints still to knock at."""
        return tuple(e for e in endpoints if e not in self.answered)

    def saw(self, own: Knock, others: Mapping[str, Knock], now: float) -> "Reach":
        """The results of one round of knocks at `now`."""
        own_since = self.own_since if self.own_since is not None else now if own is Knock.OPEN else None
        silent = dict(self.silent_since)
        answered = set(self.answered)
        for endpoint, knock in others.items():
            if knock is Knock.OPEN:
                answered.add(endpoint)
            if knock is Knock.SILENT:
                silent.setdefault(endpoint, now)
            else:
                silent.pop(endpoint, None)
        return replace(self, own_since=own_since, silent_since=tuple(sorted(silent.items())),
                       answered=frozenset(answered))

    def blocked(self, now: float) -> Optional[str]:
        """The first endpoint silent for the whole window since this node's own worker
        listened (and since it was first silent), or None."""
        if self.own_since is None or self.window <= 0:
            return None
        for endpoint, since in self.silent_since:
            if now - max(since, self.own_since) >= self.window:
                return endpoint
        return None


def blocked_reason(endpoint: str, holder: str, window: float) -> str:
    """The reason the member fails its command with (known_failures matches it)."""
    return (f"TensorFlow port {endpoint} of {holder} does not answer: connections to it time out, "
            f"{window:g} s after this node's own worker started listening (a firewall drops it?)")
