"""A peer's view of its job: who it has discovered, whom to join, what to report."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional, Sequence

from .advert import Advert, Phase
from .peer import Peer, describe_peers, elect_coordinator


@dataclass(frozen=True)
class Target:
    """Where to send the Join: a known peer, or an endpoint a frozen job advertises."""

    endpoint: str
    peer: Optional[Peer] = None

    @property
    def is_frozen_job(self) -> bool:
        return self.peer is None


@dataclass(frozen=True)
class PeerView:
    """The adverts of this node's job that this node has seen, itself included.

    `unreachable` peers are left out of the election: a node killed without a goodbye stays
    in the mDNS cache for many minutes, and electing it would block the job that long.
    Hearing from such a peer again (a new advert) makes it a candidate again.
    """

    me: Advert
    others: Mapping[str, Advert] = field(default_factory=dict)
    unreachable: frozenset[str] = frozenset()

    def seen(self, advert: Advert) -> "PeerView":
        """Add or update a discovered advert. Other jobs are not part of the view."""
        if advert.job != self.me.job or advert.node_id == self.me.node_id:
            return self
        return replace(
            self,
            others={**self.others, advert.node_id: advert},
            unreachable=self.unreachable - {advert.node_id},
        )

    def gone(self, node_id: str) -> "PeerView":
        if node_id not in self.others:
            return self
        others = dict(self.others)
        del others[node_id]
        return replace(self, others=others, unreachable=self.unreachable - {node_id})

    def suspect(self, node_id: str) -> "PeerView":
        """Leave a peer that cannot be reached out of the election (never this node)."""
        if node_id not in self.others:
            return self
        return replace(self, unreachable=self.unreachable | {node_id})

    def trust(self, node_id: str) -> "PeerView":
        """Make a suspected peer a candidate again."""
        return replace(self, unreachable=self.unreachable - {node_id})

    def with_me(self, me: Advert) -> "PeerView":
        return replace(self, me=me)

    @property
    def adverts(self) -> list[Advert]:
        return [self.me, *self.others.values()]

    @property
    def peers(self) -> list[Peer]:
        return sorted(a.peer for a in self.adverts)

    def conflicts(self) -> list[str]:
        """Peers of the same job that disagree with this node about --expect."""
        return [
            f"peer {a.peer.describe()} runs job {a.job!r} with --expect {a.expect}, "
            f"but this node, {self.me.peer.describe()}, runs it with --expect {self.me.expect}"
            for a in sorted(self.others.values(), key=lambda a: a.peer)
            if a.expect != self.me.expect
        ]

    def target(self) -> Target:
        """Whom to join: a frozen job's coordinator if one is advertised, else the lowest peer."""
        frozen = sorted(
            (a for a in self.others.values() if a.phase is not Phase.WAITING and a.coordinator),
            key=lambda a: a.peer,
        )
        if frozen:
            endpoint = frozen[0].coordinator or ""
            known = [p for p in self.peers if p.endpoint == endpoint]
            return Target(endpoint, known[0] if known else None)
        candidates = [a.peer for a in self.adverts if a.node_id not in self.unreachable]
        coordinator = elect_coordinator(candidates)
        return Target(coordinator.endpoint, coordinator)

    def progress(self) -> str:
        """One line: how many of how many peers were seen, and who."""
        unreachable = [a.peer for a in self.others.values() if a.node_id in self.unreachable]
        return describe_progress(self.me.job, self.me.expect, self.peers, self.target().peer, unreachable)

    def missing_summary(self) -> str:
        """For the timeout message: who was seen, and how many never appeared."""
        missing = max(0, self.me.expect - len(self.peers))
        return (
            f"saw {len(self.peers)} of {self.me.expect} peers of job {self.me.job!r}: "
            f"{describe_peers(self.peers)}; {missing} never appeared"
        )


def describe_progress(
    job: str,
    expect: int,
    peers: Sequence[Peer],
    coordinator: Optional[Peer] = None,
    unreachable: Sequence[Peer] = (),
) -> str:
    """`job 'x': 2/3 peers seen: 10.0.0.9 (...) [coordinator], 10.0.0.10 (...)`.

    The coordinator is the lowest peer unless given (an unreachable one is skipped)."""
    peers = sorted(peers)
    if coordinator is None and peers:
        coordinator = elect_coordinator(peers)

    def name(p: Peer) -> str:
        mark = " [coordinator]" if p == coordinator else " [unreachable]" if p in unreachable else ""
        return p.describe() + mark

    return f"job {job!r}: {len(peers)}/{expect} peers seen: " + ", ".join(map(name, peers))
