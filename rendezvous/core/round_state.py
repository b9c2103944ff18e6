"""One round of the coordinator's state machine as plain data: its phases, the policy for
restarts, the round itself and the `Step` each of `round`'s decisions returns (the next
state and the one action the coordinator's adapter must carry out)."""

from __future__ import annotations

from enum import Enum
from typing import Mapping, Optional

from .failure import Failure
from .manifest import SyncSummary
from .peer import Peer
from .gpus import GpuPolicy
from .preflight import Fingerprint, Mismatch
from .record import field, record
from .size import Size
from .stopping import StopOrder
from .tf_config import Membership


class RoundPhase(str, Enum):
    GATHERING = "gathering"
    FROZEN = "frozen"
    SYNCING = "syncing"  # every member makes its --sync-dir the source's, then the release
    RELEASED = "released"
    COMPLETED = "completed"
    FINAL_SYNC = "final_sync"  # after every command exited 0: the chief's copy everywhere
    ABORTED = "aborted"


# After the freeze, before the end: a member lost now fails the round.
_RUNNING = frozenset({RoundPhase.FROZEN, RoundPhase.SYNCING, RoundPhase.RELEASED, RoundPhase.FINAL_SYNC})


# The exit code of an abort that no command caused (a member lost, a digest that differs).
ROUND_FAILED = 6


class Action(str, Enum):
    NOTHING = "nothing"
    BROADCAST_WAITING = "broadcast_waiting"
    BROADCAST_FROZEN = "broadcast_frozen"
    BROADCAST_SYNC = "broadcast_sync"
    RELEASE = "release"
    COMPLETE = "complete"
    ABORT = "abort"
    REJECT = "reject"


class RejectReason(str, Enum):
    EXPECT_MISMATCH = "expect_mismatch"
    ALREADY_FROZEN = "already_frozen"
    DUPLICATE_NODE = "duplicate_node"
    ENDPOINT_CLASH = "endpoint_clash"
    NOT_A_MEMBER = "not_a_member"


@record
class Rejection:
    reason: RejectReason
    message: str


@record
class Policy:
    """When an aborted round is the last: after `max_restarts` restarts, or when a command
    exited with a code a restart cannot fix (a usage error, a command that cannot run).
    `allow_mismatch`: the preflight differences that are only warnings; `gpus`: how
    many GPUs each command uses (`--gpus`), decided at every freeze."""

    max_restarts: int = 0
    no_restart_on: frozenset[int] = frozenset({2, 126, 127})
    allow_mismatch: frozenset[Mismatch] = frozenset()
    gpus: GpuPolicy = GpuPolicy()

    def is_final(self, number: int, exit_code: int) -> bool:
        return number > self.max_restarts or exit_code in self.no_restart_on


@record
class Round:
    job: str
    expect: Size
    # An elastic round (MIN < MAX) with at least MIN peers freezes once the joined list
    # has not changed for `settle` seconds; `changed` is when it last did.
    settle: float = 0.0
    changed: float = 0.0
    number: int = 1
    phase: RoundPhase = RoundPhase.GATHERING
    joined: tuple[Peer, ...] = ()
    membership: Optional[Membership] = None
    ready: frozenset[str] = field(default_factory=frozenset)
    frozen_at: float = 0.0  # when the frozen list went out
    abort_reason: Optional[str] = None
    policy: Policy = Policy()
    # After the release: members whose command finished with 0, and when each member was
    # last heard from.
    succeeded: frozenset[str] = field(default_factory=frozenset)
    heard: Mapping[str, float] = field(default_factory=dict)
    exit_code: int = ROUND_FAILED  # of an abort
    failure: Optional[Failure] = None  # the failed command that caused the abort, and why it failed
    final: bool = False  # an abort after which no round follows
    stop: Optional[StopOrder] = None  # `rendezvous stop` ended it: who asked
    # What each peer's command runs with, by node id (None: an older peer sent none), and
    # the allowed differences found at the freeze, which every member logs.
    fingerprints: Mapping[str, Optional[Fingerprint]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    refused: bool = False  # aborted by the preflight
    # --sync-dir: each member's copy as it reported it, the copy every member gets, and
    # the members that have it.
    sync: Mapping[str, SyncSummary] = field(default_factory=dict)
    source: Optional[Peer] = None
    source_digest: str = ""
    source_reason: str = ""
    synced: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.number < 1:
            raise ValueError(f"round numbers start at 1, got {self.number}")

    def next(self, number: Optional[int] = None) -> "Round":
        """A fresh round for the same job (`number`, by default the next one)."""
        return Round(
            job=self.job, expect=self.expect, settle=self.settle, number=number or self.number + 1,
            policy=self.policy,
        )

    @property
    def running(self) -> bool:
        """Frozen and not over yet: a member lost or silent now fails the round."""
        return self.phase in _RUNNING

    def is_joined(self, node_id: str) -> bool:
        return any(p.node_id == node_id for p in self.joined)

    def member(self, node_id: str) -> Optional[Peer]:
        members = self.membership.members if self.membership else self.joined
        return next((p for p in members if p.node_id == node_id), None)


@record
class Step:
    state: Round
    action: Action
    rejection: Optional[Rejection] = None
