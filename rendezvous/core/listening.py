"""What a member notices while it listens on one Join stream: the coordinator's silence,
this node's own pauses, and a stopped (SIGSTOP) command. Pure, like `member`."""

from __future__ import annotations

from typing import Optional

from .member import CommandExited, Lost, Member
from .record import record, replace
from .round import ROUND_FAILED, paused


@record
class Listening:
    """What a member noticed on one Join stream. `silence`: seconds waiting on it since the coordinator
    was last heard, not on other work or stopped (what it sent is not known yet)."""

    silence: float = 0.0
    stopped_since: Optional[float] = None  # this node's command, stopped (SIGSTOP)
    paused_for: Optional[float] = None  # how late the last wait woke: the process did not run

    def woke(self, state: Member, asked: float, poll: Optional[float], now: float) -> "Listening":
        """The wait from `asked`, for at most `poll`, ended at `now`: far later, it was paused."""
        if poll is not None and paused(asked + poll, now, state.heartbeat_interval):
            return replace(self, silence=0.0, paused_for=now - asked - poll)
        return replace(self, silence=self.silence + now - asked, paused_for=None)

    def heard(self) -> "Listening":
        return replace(self, silence=0.0)

    def silent(self, state: Member) -> Optional[Lost]:
        """Lost to silence: heartbeats come from the freeze on (not to the coordinator's own member)."""
        if state.frozen and not state.joined_to_self and self.silence > state.liveness_timeout:
            return Lost(f"nothing heard from it for {self.silence:.1f} s")
        return None

    def command(self, state: Member, stopped: bool, now: float) -> tuple["Listening", Optional[CommandExited]]:
        """The command is `stopped` (SIGSTOP) at `now`, or runs; stopped past the liveness timeout, it failed."""
        since = (now if self.stopped_since is None else self.stopped_since) if stopped else None
        if since is not None and now - since > state.liveness_timeout:
            return replace(self, stopped_since=since), CommandExited(
                ROUND_FAILED, f"command stopped (SIGSTOP) for {now - since:.1f} s")
        return replace(self, stopped_since=since), None
