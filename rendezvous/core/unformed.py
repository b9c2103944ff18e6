"""Why a job did not form, as a waiting node can tell: the peers it heard that cannot be in
the job with it, and the nodes that advertise its own address and port.

A peer that was heard and refused is no network problem: a node whose only peer was refused
for another --expect must not say that multicast may be blocked, nor that its peer "never
appeared". Two hosts given one address never hear each other (each one's kernel drops
packets from its own address), but a third node hears both and asks each advert's node for
its Status at that address: the node that answers learns that another node id advertises
its own endpoint (`StatusRequest.about`). Everything here is pure; the view keeps what it is
about (core.view.PeerView: `odd`, `left_odd`, `twins`).
"""

from __future__ import annotations

from enum import Enum
from typing import Collection, Optional, Sequence

from .advert import Advert
from .peer import IPAddress, Peer

# Nodes remembered of each kind (odd peers gone, twins): forged adverts and `about` names
# cost nothing past this many, and a message names no more.
MAX_REMEMBERED = 8


class Oddity(str, Enum):
    """Why a peer of the job cannot be in it with this node."""

    EXPECT = "expect"  # its Status confirmed another --expect
    NO_TOKEN = "no_token"  # it runs without a token, this node with one
    AUTH_FAILED = "auth_failed"  # it failed authentication with this node


def oddity(me: Advert, advert: Advert, confirmed: bool, distrusted: bool) -> Optional[Oddity]:
    """Why `advert`'s node cannot be in the job with this node (`me`), or None. Only a
    confirmed advert counts for --expect (anyone may send an advert)."""
    if distrusted:
        return Oddity.AUTH_FAILED
    if me.auth and not advert.auth:
        return Oddity.NO_TOKEN
    if confirmed and advert.expect != me.expect:
        return Oddity.EXPECT
    return None


def describe_odd(me: Advert, odd: Sequence[tuple[Advert, Oddity]], expect_source: str) -> str:
    """The peers heard that cannot be in the job with this node, each with why: for the
    timeout message and the hint while waiting. `expect_source`: where this node's
    --expect came from (`--expect`, `RENDEZVOUS_EXPECT`, `FILE: expect`)."""
    said = []
    for advert, why in sorted(odd, key=lambda found: found[0].peer):
        peer = advert.peer.describe()
        if why is Oddity.EXPECT:
            said.append(f"{peer} runs it with --expect {advert.expect}, this node with --expect "
                        f"{me.expect} (set by {expect_source})")
        elif why is Oddity.NO_TOKEN:
            said.append(f"{peer} runs it without a token, this node with --token-file")
        else:
            said.append(f"{peer} failed authentication: it does not hold this node's --token-file")
    return f"heard but not in the job with this node: {'; '.join(said)}"


def odd_advice(odd: Sequence[tuple[Advert, Oddity]]) -> str:
    kinds = {why for _, why in odd}
    options = (["--expect"] if Oddity.EXPECT in kinds else []) + (["--token-file"] if kinds - {Oddity.EXPECT} else [])
    return f"Start every node of the job with the same {' and '.join(options)}"


def is_twin(me: Peer, job: str, advert: Advert) -> bool:
    """Whether `advert` is another node of this node's job at this node's own address and
    port: another host given the same address, or a daemon that ran here before."""
    return advert.job == job and advert.node_id != me.node_id and advert.peer.endpoint == me.endpoint


def describe_twin(me: Advert, twin: Advert) -> str:
    """What a node says of a node that advertises its own endpoint, at once (the warning
    adds what to do: `TWIN_ADVICE`) and at the end."""
    return (
        f"node {twin.node_id} also advertises this node's address and port {me.peer.endpoint} "
        f"(job {me.job!r}; this node is {me.node_id}): two hosts are configured with the address "
        f"{me.peer.address}, unless a daemon ran here before with that id"
    )


TWIN_ADVICE = "Give each host its own address"



def describe_held(address: IPAddress, interface: str, hardware: str) -> str:
    """What a node says when ARP shows another host holding its address (host.arp)."""
    return (f"another host (hardware address {hardware}) answers for this node's address {address} on "
            f"{interface}: two hosts are configured with the address {address}")


def waiting_hint(me: Advert, odd: Sequence[tuple[Advert, Oddity]], shared: Sequence[str], seconds: float,
                 expect_source: str) -> Optional[str]:
    """What a node that has no peer to count after `seconds` says instead of blaming the
    network, when it heard peers it cannot be in the job with, or found its address held
    by another host (`shared`: `describe_twin`, `describe_held`); None when neither (the
    network may be to blame: core.seeds.lonely_hint)."""
    causes = ([describe_odd(me, odd, expect_source)] if odd else []) + list(shared)
    if not causes:
        return None
    return f"no peer of job {me.job!r} to join after {seconds:g}s: {'; '.join(causes)}"


def alone_hint(me: Advert, others: Collection[str], odd: Sequence[tuple[Advert, Oddity]], shared: Sequence[str],
               seconds: float, expect_source: str, network: str) -> Optional[str]:
    """What a waiting node says when, after `seconds`, no peer it heard can be in the job
    with it (`others`: the node ids it heard): what it heard (`waiting_hint`), else the
    `network` hint (core.seeds.lonely_hint) when it heard nobody; None when a peer counts."""
    if set(others) - {a.node_id for a, _ in odd}:
        return None
    return waiting_hint(me, odd, shared, seconds, expect_source) or network


def timeout_advice(odd: Sequence[tuple[Advert, Oddity]], shared: bool) -> str:
    """The last sentence of the timeout message: what to fix, the network only when no
    other cause was seen (`shared`: another host holds this node's address)."""
    if odd:
        return odd_advice(odd)
    if shared:
        return TWIN_ADVICE
    return ("Check that every node runs the same --job, --expect and --token-file and that "
            "multicast (UDP 5353) passes between them, or give seeds with --peer")
