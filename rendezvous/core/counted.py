"""What a peer's view of its job counts (core.view.PeerView): which adverts are trusted
and of the job's IP family, which are confirmed candidates, whom to join, whom to ask for a
Status, and what to say of the peers while waiting and at the timeout. Pure reads of the
view's fields: the view itself, and how what this node hears changes it, are core.view's.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Iterator, Mapping, Optional

from .advert import Advert, Phase
from .family import Family, choose_family
from .peer import Peer, describe_peers, elect_coordinator, shared_address
from .record import record
from .unformed import Oddity, describe_odd, describe_twin, oddity


@record
class Target:
    """Where to send the Join: a known peer, or an endpoint a frozen job advertises."""

    endpoint: str
    peer: Optional[Peer] = None


class Counting:
    """Who counts in a view and whom it joins: the reads of `PeerView`, whose fields (see
    there) are all they read. A view never changes (changes make a new one), so what it
    derives is kept: a node asks its view many times per change, and a job may have dozens
    of nodes."""

    if TYPE_CHECKING:
        me: Advert
        others: Mapping[str, Advert]
        unreachable: Mapping[str, float]
        distrusted: frozenset[str]
        confirmed: Mapping[str, Advert]
        hints: frozenset[str]
        shadowed: frozenset[str]
        superseded: Mapping[str, str]
        left_odd: Mapping[str, Advert]
        twins: Mapping[str, Advert]

    @cached_property
    def family(self) -> Family:
        """The IP family of this node's job, chosen from every member known that counts
        (core.family), and the members that cannot use it."""
        return choose_family([self.me, *(a for a in self.others.values() if self._trusted(a))])

    @cached_property
    def _usable(self) -> dict[str, Advert]:
        """Every other node's advert on the IP family this node uses (the job's, once this
        node switched to it), by node id: as advertised, or at its address of this family
        when a dual-stack node advertises the other one (it may have switched back since,
        and its new announcement been lost). Only these can be candidates."""
        version = self.me.peer.address.version
        found = ((a.node_id, a.using(version)) for a in self._current)
        return {node_id: a for node_id, a in found if a is not None}

    def is_suspected(self, node_id: str, now: float) -> bool:
        return self.unreachable.get(node_id, now) > now

    def next_lapse(self, now: float) -> Optional[float]:
        """Seconds until the first suspicion lapses (None: no peer is suspected), the
        one change of the target that time alone makes."""
        ends = [until for until in self.unreachable.values() if until > now]
        return min(ends) - now if ends else None

    def _trusted(self, advert: Advert) -> bool:
        """Whether an advert counts at all: it did not fail authentication, and it wants
        a token if this node has one."""
        return advert.node_id not in self.distrusted and (advert.auth or not self.me.auth)

    def unconfirmed(self, now: float) -> list[Advert]:
        """The adverts this node needs a Status for, lowest first: claims no Status has
        confirmed yet (new ones, changed ones) or of a suspected peer (an answer makes it a
        candidate again), that could change what this node does (`_could_matter`)."""
        target = self.target(now)
        pending = (
            a for a in self._counted
            if a.node_id in self.unreachable or not _same_claims(self.confirmed.get(a.node_id), a)
        )
        return sorted((a for a in pending if self._could_matter(a, target)), key=lambda a: a.peer)

    def _could_matter(self, advert: Advert, target: Target) -> bool:
        """Whether confirming `advert` could change whom this node joins or whom it
        disagrees with: a peer below `target` would be elected, and a peer that claims a
        frozen round elsewhere, a newer round, another --expect or a token redirects or
        fails this node. A waiting peer above the target that agrees with it changes
        nothing, and proves itself when it joins: asking every peer would cost a job of N
        nodes N² calls. Two kinds are always asked: a mere hint (no answer is what drops
        it), and every peer of a node that coordinates, as the request brings that peer the
        coordinator's advert before any mDNS answer does (StatusRequest.caller)."""
        if advert.node_id in self.hints or target.peer in (None, self.me.peer) or advert.peer < target.peer:
            return True
        frozen_elsewhere = advert.phase is not Phase.WAITING and advert.coordinator not in (None, target.endpoint)
        return (
            frozen_elsewhere or advert.round > self.me.round or advert.expect != self.me.expect
            or (advert.auth and not self.me.auth)
        )

    @cached_property
    def _current(self) -> list[Advert]:
        """The other nodes' adverts but those a newer node id at their endpoint shadows."""
        return [a for node_id, a in self.others.items() if node_id not in self.shadowed]

    @cached_property
    def _counted(self) -> list[Advert]:
        """The adverts of other peers that may become candidates: trusted, and of this
        node's family."""
        return [a for a in self._usable.values() if self._trusted(a)]

    @cached_property
    def _candidates(self) -> list[Advert]:
        """The other peers that count, with their claims as their Status confirmed them."""
        found = (self.confirmed.get(a.node_id) for a in self._counted)
        return [c for c in found if c is not None and c.peer == self._usable[c.node_id].peer]

    @property
    def adverts(self) -> list[Advert]:
        return [self.me, *self.others.values()]

    @property
    def peers(self) -> list[Peer]:
        """Every peer seen that has an address of this node's family."""
        return sorted([self.me.peer, *(a.peer for a in self._usable.values())])

    @property
    def complete(self) -> bool:
        """Whether as many peers were seen as the job may have (--expect MAX)."""
        return len(self.peers) >= self.me.expect.max

    def present(self, now: float) -> list[Peer]:
        """The peers seen and not suspected of being gone, confirmed or not (for status)."""
        return sorted(a.peer for a in [self.me, *self._counted] if not self.is_suspected(a.node_id, now))

    def live_peers(self, now: float) -> list[Peer]:
        """The peers that count: every one seen but those suspected of being gone, or
        left out for authentication."""
        return sorted(self._live(now))

    def _live(self, now: float) -> Iterator[Peer]:
        return (a.peer for a in [self.me, *self._candidates] if not self.is_suspected(a.node_id, now))

    @property
    def latest_round(self) -> int:
        """The latest round of this node's job that it knows of: its own, or one a peer's
        confirmed advert says it waits for (a daemon restarted in a running job starts in
        round 1 while its job has moved on)."""
        return max(a.round for a in [self.me, *self._candidates])

    def target(self, now: float) -> Target:
        """Whom to join: a frozen job's coordinator if one is advertised, else the lowest
        live peer. Adverts of an earlier round than the latest one advertised (this node's
        included), and of suspected nodes or naming one as coordinator, are stale: a node killed without a goodbye keeps its
        last advert in every mDNS cache for many minutes."""
        latest = self.latest_round  # a round others already moved on from is over
        frozen = [
            a for a in self._candidates
            if a.phase is not Phase.WAITING and a.coordinator and a.round >= latest
            and not self.is_suspected(a.node_id, now)
        ]
        if frozen:
            suspected = {
                a.peer.endpoint for a in self._current
                if self.is_suspected(a.node_id, now) or not self._trusted(a)
            }
            frozen = sorted((a for a in frozen if a.coordinator not in suspected), key=lambda a: a.peer)
        if frozen:
            endpoint = frozen[0].coordinator or ""
            known = [p for p in self.peers if p.endpoint == endpoint]
            return Target(endpoint, known[0] if known else None)
        coordinator = elect_coordinator(self._live(now))
        return Target(coordinator.endpoint, coordinator)

    def suspected(self, now: float) -> list[Peer]:
        return sorted(a.peer for a in self._current if self.is_suspected(a.node_id, now))


def conflicts(view: Counting, now: float, expect_source: str = "--expect") -> list[str]:
    """Why the view's node cannot be in its job: a peer of the job wants a token this node lacks,
    or the peer it would join (the job's coordinator) runs the job with another
    --expect. The coordinator's --expect rules: a member that differs from it is the odd
    one and is refused, while the members that agree with it keep waiting; the
    coordinator itself is never refused by a member's --expect. `expect_source`: where this
    node's --expect came from (`--expect`, `RENDEZVOUS_EXPECT`, `FILE: expect`)."""
    candidates = sorted(view._candidates, key=lambda a: a.peer)
    tokens = [
        f"this job requires a token: peer {a.peer.describe()} runs job {a.job!r} with one; "
        "start this node with --token-file holding the same secret"
        for a in [c for c in candidates if c.auth and not view.me.auth][:1]
    ]
    coordinator = view.target(now).peer
    return tokens or [
        f"peer {a.peer.describe()}, the job's coordinator, runs job {a.job!r} with --expect "
        f"{a.expect}, but this node, {view.me.peer.describe()}, runs it with --expect "
        f"{view.me.expect} (set by {expect_source}); start it with --expect {a.expect} to join"
        for a in candidates
        if a.peer == coordinator and a.expect != view.me.expect
    ]


def describe_missing(view: Counting, expect_source: str = "--expect") -> str:
    """For the timeout message: who was seen and counts, who was heard but cannot be in
    the job with this node (`odd`: another --expect, no token where this node has one,
    failed authentication; `expect_source` says where this node's --expect came from),
    how many never appeared, and an address several nodes have."""
    me, odd = view.me, odd_peers(view)
    left_out = {a.node_id for a, _ in odd}
    counted = sorted([me.peer, *(a.peer for a in view._counted if a.node_id not in left_out)])
    missing = max(0, me.expect.min - len(counted) - len(odd))
    twins = "".join(f"; {line}" for line in describe_shared(view))
    heard = f"; {describe_odd(me, odd, expect_source)}" if odd else ""
    return (
        f"saw {len(counted)} of {me.expect.describe()} peers of job {me.job!r}: "
        f"{describe_peers(counted)}{heard}; {missing} never appeared{twins}"
    )


def odd_peers(view: Counting) -> list[tuple[Advert, Oddity]]:
    """The peers of the view's job it heard that cannot be in the job with it
    (`core.unformed.oddity`), those gone since included: why the job may not form."""
    claims = {**view.left_odd, **{n: view.confirmed.get(n, a) for n, a in view.others.items()}}
    sure = view.confirmed.keys() | view.left_odd.keys()  # those gone were judged as they left
    found = ((a, oddity(view.me, a, n in sure, n in view.distrusted)) for n, a in claims.items())
    return [(a, why) for a, why in found if why is not None]


def describe_shared(view: Counting) -> list[str]:
    """What to say, while waiting and at the timeout, of an address that several nodes of
    the view have: counted peers at one address, or an endpoint where a newer node id
    superseded others (a daemon restarted there, or two hosts given the same address)."""
    counted = [view.me.peer, *(a.peer for a in view._counted)]
    addresses = [p.address for p in counted]
    said = [shared_address(a, f"{addresses.count(a)} nodes")
            for a in sorted({a for a in addresses if addresses.count(a) > 1})]
    holders = {p.endpoint: p.node_id for p in counted}
    for endpoint in sorted(set(view.superseded.values())):
        older = sorted(n for n, e in view.superseded.items() if e == endpoint)
        holder = holders.get(endpoint)  # gone, when the node that answered there has left since
        nodes = f"{', '.join(older)} before {holder or 'another node'}, which answer{'s' if holder else 'ed'} there"
        said.append(
            f"{endpoint} was advertised by {len(older) + 1} nodes: {nodes}; a daemon "
            "restarted there, or two hosts configured with the same address and port"
        )
    return said + [describe_twin(view.me, t) for t in sorted(view.twins.values(), key=lambda t: t.node_id)]


def _same_claims(confirmed: Optional[Advert], advert: Advert) -> bool:
    """Whether an advert claims what its Status confirmed: the same endpoint, --expect, and
    frozen coordinator of the same round."""
    def claims(a: Advert) -> tuple[object, ...]:
        frozen = a.phase is not Phase.WAITING and a.coordinator
        return (a.peer, a.expect, a.round, a.coordinator if frozen else None)

    return confirmed is not None and claims(confirmed) == claims(advert)
