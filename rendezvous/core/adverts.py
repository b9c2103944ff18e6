"""The adverts a node knows from unicast gossip: merged from seeds and peers, expired by age.

Where multicast does not pass, nodes exchange what they know with a few others over gRPC.
An advert learned second hand may be older than one already known, so every announcement
carries a `serial` its node raises each time it announces: the highest serial of a node
wins, and a serial that rose is a sign of life. A node that says goodbye announces a last
record marked `goodbye`; that record spreads like any other so that the node is dropped
everywhere, and is forgotten after `ttl` like a node that stopped announcing.

Anyone who reaches a node's port can send it records. Without a token a record is only
taken from its own node (the sender's address is the advert's: `admit`), at most
MAX_PER_ADDRESS nodes per address, and from the answers of the node's own seeds, which
relay the job; never second hand from anyone else, so that a flood of forged adverts
brings a bounded number of nodes in, each at the address that sent it. With a token, an
Exchange signed with it is trusted whole, and an unsigned one brings nothing in.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from .advert import Advert
from .record import field, record, replace
from .size import MAX_PEERS

# Nodes one address may announce for itself at once: a host runs a daemon per job, and a
# daemon that restarts is a new node until its last record expires.
MAX_PER_ADDRESS = 16
# Nodes a store holds at most: twice the largest job, so that jobs sharing seeds fit.
MAX_NODES = 2 * MAX_PEERS


@record
class Record:
    """One announcement of one node, as gossip carries it."""

    advert: Advert
    serial: int
    goodbye: bool = False

    @property
    def node_id(self) -> str:
        return self.advert.node_id


@record
class Gossip:
    """One side of an exchange: records the other side may lack, and the digest of all the
    sender knows (node id -> serial)."""

    records: tuple[Record, ...] = ()
    known: Mapping[str, int] = field(default_factory=dict)
    # The sender's address when it is not trusted (`AdvertStore.admit`); None when it is:
    # one of this node's seeds, or a sender that signed with the job's token.
    source: Optional[str] = None


@record
class Entry:
    record: Record
    heard: float  # when its serial last rose, by this node's clock


@record
class Changes:
    """What a merge or an expiry changed: adverts new or different, nodes gone."""

    store: "AdvertStore"
    seen: tuple[Advert, ...] = ()
    gone: tuple[str, ...] = ()


@record
class AdvertStore:
    """Every node's latest record; `ttl` seconds without a higher serial and it is gone."""

    ttl: float
    entries: Mapping[str, Entry] = field(default_factory=dict)

    def answer(self, gossip: Gossip) -> Gossip:
        """What to send a node that sent `gossip` (merged already): what it lacks."""
        return Gossip(tuple(self.newer_than(gossip.known)), self.digest())

    def admit(self, records: Iterable[Record], source: str) -> list[Record]:
        """The records an untrusted sender at address `source` may bring in: those its own
        node announces from there, for at most MAX_PER_ADDRESS nodes of that address."""
        held = sum(1 for e in self.entries.values() if _speaks_for(e.record.advert, source))
        admitted = []
        for record in records:
            if not _speaks_for(record.advert, source):
                continue
            if record.node_id not in self.entries:
                if held >= MAX_PER_ADDRESS:
                    continue
                held += 1
            admitted.append(record)
        return admitted

    def merge(self, records: Iterable[Record], now: float) -> Changes:
        """Keep each record newer than what is known of its node, of at most MAX_NODES
        nodes; report what changed."""
        entries = dict(self.entries)
        for record in records:
            known = entries.get(record.node_id)
            if known is None and len(entries) >= MAX_NODES:
                continue
            if known is None or known.record.serial < record.serial:
                entries[record.node_id] = Entry(record, now)
        merged = replace(self, entries=entries)
        changed = [k for k, e in entries.items() if self.entries.get(k) is not e]
        seen = tuple(a for a in map(merged._live, changed) if a is not None and a != self._live(a.node_id))
        gone = tuple(k for k in changed if merged._live(k) is None and self._live(k) is not None)
        return Changes(merged, seen, gone)

    def _live(self, node_id: str) -> Optional[Advert]:
        entry = self.entries.get(node_id)
        return None if entry is None or entry.record.goodbye else entry.record.advert

    def expire(self, now: float) -> Changes:
        """Forget every node not heard of for `ttl`; those that had not said goodbye are gone."""
        old = {k: e for k, e in self.entries.items() if now - e.heard > self.ttl}
        if not old:
            return Changes(self)
        kept = {k: e for k, e in self.entries.items() if k not in old}
        gone = tuple(k for k, e in old.items() if not e.record.goodbye)
        return Changes(replace(self, entries=kept), gone=gone)

    def digest(self) -> dict[str, int]:
        """The serial of every node known, goodbyes included: what this store has."""
        return {k: e.record.serial for k, e in self.entries.items()}

    def newer_than(self, known: Mapping[str, int]) -> list[Record]:
        """What a store with digest `known` lacks: every record newer than its serial of
        that node. Exchanges carry this rather than everything, so that a large job in
        steady state exchanges little."""
        return [e.record for k, e in self.entries.items() if e.record.serial > known.get(k, 0)]

    def records(self) -> list[Record]:
        """What to tell others: every record, goodbyes included so that they spread."""
        return [e.record for e in self.entries.values()]

    def adverts(self) -> list[Advert]:
        """The nodes that are there: every advert but those that said goodbye."""
        return [e.record.advert for e in self.entries.values() if not e.record.goodbye]


def _speaks_for(advert: Advert, source: str) -> bool:
    """Whether a record sent from address `source` comes from the node it describes."""
    return str(advert.peer.address) == source or (advert.alternate is not None and str(advert.alternate) == source)
