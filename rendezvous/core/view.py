"""A peer's view of its job: who it has discovered, whom to join, what to report.

One endpoint (address and port) holds one daemon: a daemon restarted there (kill -9, then
systemd) comes back with a new node id while its predecessors' adverts stay in every mDNS
cache for many minutes. A new node id at an endpoint shadows the older ones there at once
(they neither count nor are elected, and the new one is asked first); once the endpoint
answers a Status as one node, every other node id there is superseded: dropped, and its
adverts ignored from then on. Where two hosts were given the same address and port, they
look the same: what this node says while it waits names that endpoint (`describe_shared`).
"""

from __future__ import annotations

from typing import Mapping, TypeVar, Union

from .advert import Advert
from .counted import Counting, Target, conflicts, describe_missing, describe_shared, odd_peers
from .record import field, record, replace
from .unformed import MAX_REMEMBERED, is_twin, oddity

__all__ = [
    "DiscoveryEvent", "Gone", "Hinted", "PeerView", "Seen", "Target", "conflicts", "describe_missing",
    "describe_shared", "odd_peers",
]

T = TypeVar("T")


# -- what discovery reports (rendezvous.discovery), applied by `PeerView.apply` ----------


@record
class Seen:
    advert: Advert


@record
class Gone:
    node_id: str


@record
class Hinted:
    """An advert a peer sent with its Status request (`PeerView.hinted`). `vouched`: the
    request proves it as the peer's own Status answer would (signed with the job's token
    where there is one, from the address it claims), so it confirms the advert too: a node
    that starts late among hundreds of forged adverts below its coordinator's address has
    its coordinator confirmed by the coordinator's own request, not after asking them all."""

    advert: Advert
    vouched: bool = False


DiscoveryEvent = Union[Seen, Gone, Hinted]


@record
class PeerView(Counting):
    """The adverts of this node's job that this node has seen, itself included.

    `unreachable` peers (node id -> until when) are left out of the election: a node killed
    without a goodbye stays in the mDNS cache for many minutes, and electing it would block
    the job that long. A changed advert from such a peer makes it a candidate again; the
    same advert delivered again (a cache refresh) does not.

    `distrusted` peers failed authentication with this node (they do not know the job's
    token): they are left out for good, whatever they advertise next. When this node has a
    token, adverts that do not say they want one are left out too.

    An advert is only a hint: anyone on the link can send one. A peer counts (is elected,
    followed, or disagrees on --expect) once `confirmed` holds what its own Status said over
    gRPC, for the same identity and endpoint; its claims are then taken from there. Nodes
    that never answer are never waited for.

    A job uses one IP family (`family`): nodes advertising the other one are kept, as they
    count in the choice of the family and may switch to it, but are no candidates.

    A daemon restarted at its endpoint supersedes its predecessors there (`shadowed`,
    `superseded`: see the module's doc).

    Its methods here are how what this node hears changes it (each returns a new view);
    what it makes of that, who counts and whom to join, is `Counting`'s (core.counted).
    """

    me: Advert
    others: Mapping[str, Advert] = field(default_factory=dict)
    unreachable: Mapping[str, float] = field(default_factory=dict)
    distrusted: frozenset[str] = frozenset()
    confirmed: Mapping[str, Advert] = field(default_factory=dict)
    departed: frozenset[str] = frozenset()  # said goodbye (node ids are new at every start)
    hints: frozenset[str] = frozenset()  # known only from a hint (see `hinted`)
    shadowed: frozenset[str] = frozenset()  # a newer node id was seen at its endpoint
    superseded: Mapping[str, str] = field(default_factory=dict)  # node id -> its endpoint, which answered as another
    missed: frozenset[str] = frozenset()  # confirmed hints whose last Status went unanswered
    left_odd: Mapping[str, Advert] = field(default_factory=dict)  # gone peers that were `odd`, as they claimed
    twins: Mapping[str, Advert] = field(default_factory=dict)  # other node ids at this node's endpoint (core.unformed)


    def apply(self, event: DiscoveryEvent) -> "PeerView":
        """The view after what discovery reported: the same view when it tells nothing new."""
        if isinstance(event, Gone):
            return self.gone(event.node_id)
        if isinstance(event, Seen):
            return self.seen(event.advert)
        view = self.hinted(event.advert)
        return view.confirm(event.advert) if event.vouched else view

    def seen(self, advert: Advert) -> "PeerView":
        """Add or update a discovered advert. Other jobs are not part of the view."""
        if advert.job != self.me.job or advert.node_id == self.me.node_id or advert.node_id in self.superseded:
            return self
        if is_twin(self.me.peer, self.me.job, advert):  # its Status would be this node's own: never a peer
            return _with_twin(self, advert)
        heard = {advert.node_id}
        if self.others.get(advert.node_id) == advert:
            # The same advert again (a cache refresh) is no sign of life; from discovery, it
            # is no longer a mere hint.
            return replace(self, hints=self.hints - heard) if self.hints & heard else self
        older = set() if advert.node_id in self.others else _at(self.others, advert.peer.endpoint)
        return replace(
            self,
            others={**self.others, advert.node_id: advert},
            unreachable=_without(self.unreachable, advert.node_id),
            departed=self.departed - heard,
            hints=self.hints - heard,
            shadowed=(self.shadowed - heard) | older, left_odd=_without(self.left_odd, advert.node_id),
        )

    def hinted(self, advert: Advert) -> "PeerView":
        """An advert a peer sent along with its Status request: it only introduces a node
        this view does not know (discovery stays the source of what known nodes claim), and
        never brings back one that said goodbye, whose request may arrive after it. Until
        discovery hears of the node too, it is a hint: dropped if its confirmation gets no
        answer. Once confirmed, it stays like a node discovery heard of and that later died
        without a goodbye: out of the election once it cannot be reached."""
        if advert.node_id in self.others or advert.node_id in self.departed:
            return self
        view = self.seen(advert)
        return view if advert.node_id not in view.others else replace(view, hints=view.hints | {advert.node_id})

    def unanswered(self, node_id: str) -> "PeerView":
        """A node did not answer its Status: one known only from a hint is dropped, as no
        goodbye or expiry from discovery, which never heard of it, would ever drop it; one
        confirmed before only at its second silence in a row (a node busy with a flood of
        forged adverts answers late). A later hint may bring it back."""
        if node_id not in self.hints:
            return self
        if node_id in self.confirmed and node_id not in self.missed:
            return replace(self, missed=self.missed | {node_id})
        return self._drop(node_id, departed=False)

    def gone(self, node_id: str) -> "PeerView":
        """The node said goodbye (or discovery's record of it expired)."""
        return self._drop(node_id, departed=True)

    def _drop(self, node_id: str, departed: bool) -> "PeerView":
        if node_id not in self.others:
            return self
        return replace(
            self, others=_without(self.others, node_id), unreachable=_without(self.unreachable, node_id),
            confirmed=_without(self.confirmed, node_id), hints=self.hints - {node_id},
            departed=self.departed | {node_id} if departed else self.departed,
            shadowed=self.shadowed - {node_id}, missed=self.missed - {node_id},
            left_odd=_left_odd(self, node_id),
        )

    def answered_as(self, node_id: str, claims: Advert) -> "PeerView":
        """`node_id`'s endpoint answered a Status as another node of this job (`claims`):
        `node_id` is gone (or was forged) and superseded; `claims` is no longer shadowed."""
        if node_id not in self.others or claims.node_id == node_id:
            return self
        view = self._drop(node_id, departed=False)
        superseded = {**view.superseded, node_id: self.others[node_id].peer.endpoint}
        return replace(view, superseded=superseded, shadowed=view.shadowed - {claims.node_id})

    def suspect(self, node_id: str, until: float) -> "PeerView":
        """Leave a peer that cannot be reached out of the election until `until`, or until
        its Status answers again (`confirm`); never this node."""
        if node_id not in self.others:
            return self
        return replace(self, unreachable={**self.unreachable, node_id: until})

    def distrust(self, node_id: str) -> "PeerView":
        """Leave a peer that failed authentication out for good (never this node)."""
        if node_id == self.me.node_id:
            return self
        return replace(self, distrusted=self.distrusted | {node_id})

    def confirm(self, claims: Advert) -> "PeerView":
        """What a peer's own Status said (`NodeStatus.as_advert`): it answers, so it is no
        longer suspected."""
        if claims.node_id not in self.others:
            return self
        view = self
        for older in _at(self.others, claims.peer.endpoint) - {claims.node_id}:
            view = view.answered_as(older, claims)
        return replace(
            view, confirmed={**view.confirmed, claims.node_id: claims},
            unreachable=_without(view.unreachable, claims.node_id), shadowed=view.shadowed - {claims.node_id},
            missed=view.missed - {claims.node_id},
        )

    def with_me(self, me: Advert) -> "PeerView":
        return replace(self, me=me)


def _left_odd(view: PeerView, node_id: str) -> Mapping[str, Advert]:
    """`left_odd` once `node_id` has left: with its claims if it was odd (within bounds)."""
    claims = view.confirmed.get(node_id, view.others[node_id])
    odd = oddity(view.me, claims, node_id in view.confirmed, node_id in view.distrusted)
    kept = odd is not None and len(view.left_odd) < MAX_REMEMBERED
    return {**view.left_odd, node_id: claims} if kept else view.left_odd


def _with_twin(view: PeerView, advert: Advert) -> PeerView:
    """The view that knows `advert` advertises its own endpoint (core.unformed.is_twin)."""
    known = advert.node_id in view.twins or len(view.twins) >= MAX_REMEMBERED
    return view if known else replace(view, twins={**view.twins, advert.node_id: advert})


def _at(adverts: Mapping[str, Advert], endpoint: str) -> set[str]:
    """The node ids advertised at `endpoint`."""
    return {node_id for node_id, a in adverts.items() if a.peer.endpoint == endpoint}


def _without(mapping: Mapping[str, T], key: str) -> dict[str, T]:
    return {k: v for k, v in mapping.items() if k != key}
