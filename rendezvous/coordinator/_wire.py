"""Conversions between protobuf messages and domain objects."""

from __future__ import annotations

from typing import Iterable, Optional

from ..core.advert import PROTOCOL_VERSION
from ..core.peer import Peer, parse_address
from ..v1 import rendezvous_pb2 as pb

# Every channel ignores http(s)_proxy: rendezvous traffic never leaves the cluster.
CHANNEL_OPTIONS = [("grpc.enable_http_proxy", 0)]


def header(job: str, round: int, sender: str) -> pb.Header:
    return pb.Header(
        protocol_version=PROTOCOL_VERSION, job=job, round=round, sender_node_id=sender
    )


def peer_to_pb(peer: Peer) -> pb.Peer:
    return pb.Peer(
        node_id=peer.node_id, address=str(peer.address), port=peer.port, tf_port=peer.tf_port
    )


def peer_from_pb(message: pb.Peer) -> Peer:
    """Raises ValueError for a malformed peer."""
    return Peer(
        node_id=message.node_id,
        address=parse_address(message.address),
        port=message.port,
        tf_port=message.tf_port,
    )


def peers_to_pb(peers: Iterable[Peer]) -> list[pb.Peer]:
    return [peer_to_pb(p) for p in peers]


def optional_peer_from_pb(message: pb.Peer) -> Optional[Peer]:
    if not message.node_id:
        return None
    try:
        return peer_from_pb(message)
    except ValueError:
        return None
