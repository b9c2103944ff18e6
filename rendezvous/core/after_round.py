"""What a node does when one of its rounds has ended: the ladder of the round's end (a stop,
a completion, a failure, final or not) x a stop signal x the preflight's refusal x the
restart policy -> the next step. Its order is policy: a `rendezvous stop` rules everything,
a completed job is done whatever else came, a stop signal ends the node before any restart,
a refused job fails before the restart policy is asked."""

from __future__ import annotations

from enum import Enum

from .member import RoundEnd, is_last_round
from .round_state import Policy


class Next(str, Enum):
    STOPPED = "stopped"  # `rendezvous stop` ended the job: the command gets the stop's grace, no restart
    COMPLETED = "completed"  # every command exited 0: the job is done, exit 0
    SIGNALLED = "signalled"  # a stop signal came as the round ended: no round follows
    REFUSED = "refused"  # the preflight refused the members before the freeze: the job fails
    FAILED = "failed"  # the failed round was the last one (final, or --max-restarts used up)
    RESTART = "restart"  # the next round follows


def after_round(end: RoundEnd, played: int, policy: Policy, *, signalled: bool, refused: bool) -> Next:
    """The next step after round `played` ended with `end`. `signalled`: a stop signal came;
    `refused`: the preflight refused the round before it froze. A stop is decided before
    the round's command ends (it sets the command's grace), the rest once it has: a signal
    may come meanwhile, so a node asks again then."""
    if end.stop is not None:
        return Next.STOPPED
    if end.completed:
        return Next.COMPLETED
    if signalled:
        return Next.SIGNALLED
    if refused:
        return Next.REFUSED
    if is_last_round(end, played, policy):
        return Next.FAILED
    return Next.RESTART
