"""A hostile Join stream, run inside a test's network namespace: it claims an identity given
on the command line, and with --replay TOKEN_FILE sends a join and a proof recorded from an
earlier stream (signed for that stream's challenge). Prints what the coordinator answered as
one JSON line: {"code": gRPC status name, "kind": the first message's body, "reason": ...}.
With --round N its header asks for round N (default 1).

    forge_join.py ENDPOINT JOB NODE_ID ADDRESS PORT TF_PORT [--replay TOKEN_FILE] [--round N]
"""

from __future__ import annotations

import asyncio
import json
import sys

import grpc

from rendezvous.coordinator import _auth, _wire
from rendezvous.core.peer import Peer, parse_address
from rendezvous.host.token import load_keys
from rendezvous.v1 import rendezvous_pb2 as pb
from rendezvous.v1 import rendezvous_pb2_grpc as pb_grpc


def recorded(job: str, me: Peer, expect: int, token_file: str, round_: int = 1) -> list[pb.PeerMessage]:
    """A join and its proof as they went over the wire on an earlier stream."""
    signer, nonce = _auth.client_signer(load_keys(token_file, job))
    join = signer.seal(pb.PeerMessage(header=_wire.header(job, round_, me.node_id), join=pb.JoinRequest(peer=_wire.peer_to_pb(me), expect=expect)), nonce)
    signer.stream = signer.stream.with_server_nonce(_auth.new_nonce())  # that stream's challenge
    proof = signer.seal(pb.PeerMessage(header=_wire.header(job, round_, me.node_id), heartbeat=pb.Heartbeat()))
    return [join, proof]


def options(flags: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(flags[::2], flags[1::2]))


async def main(endpoint: str, job: str, node_id: str, address: str, port: str, tf_port: str, *flags: str) -> dict:
    me = Peer(node_id, parse_address(address), int(port), int(tf_port))
    given = options(flags)
    round_ = int(given.get("--round", "1"))
    if "--replay" in given:
        messages = recorded(job, me, 2, given["--replay"], round_)
    else:
        header = _wire.header(job, round_, node_id)
        messages = [pb.PeerMessage(header=header, join=pb.JoinRequest(peer=_wire.peer_to_pb(me), expect=2))]
    async with grpc.aio.insecure_channel(endpoint) as channel:
        call = pb_grpc.RendezvousStub(channel).Join(iter(messages))
        try:
            async for message in call:
                kind = message.WhichOneof("body")
                if kind == "heartbeat" and message.header.auth.nonce:
                    continue  # the challenge
                reason = pb.Rejected.Reason.Name(message.rejected.reason) if kind == "rejected" else ""
                return {"code": "OK", "kind": kind, "reason": reason, "message": message.rejected.message}
        except grpc.aio.AioRpcError as exc:
            return {"code": exc.code().name, "kind": None, "reason": "", "message": exc.details()}
    return {"code": "OK", "kind": None, "reason": "", "message": "the stream ended"}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:]))))
