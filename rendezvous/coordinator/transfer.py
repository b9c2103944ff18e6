"""`--sync-dir` over the Rendezvous service: the source member serves its manifest and its
files (GetManifest, FetchFiles); a member that lacks them fetches them.

Only the copy every member was told to take is served (FetchRequest.digest): a directory
that changed since is refused instead of sent half old, half new.
"""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator, Optional

import grpc

from ..core.auth import Keys
from ..core.manifest import Manifest
from ..core.member import SyncFrom
from ..core.peer import Peer
from ..errors import SyncError
from ..host.syncdir import CHUNK, Chunks, Progress, SyncDir
from ..v1 import rendezvous_pb2 as pb
from ..v1 import rendezvous_pb2_grpc as pb_grpc
from . import _auth, _wire, _wire_sync

log = logging.getLogger(__name__)

# A manifest of many files is one message; chunks are far smaller.
MAX_MESSAGE = 64 << 20

def _options() -> list[tuple[str, int]]:
    return [*_wire.channel_options(), ("grpc.max_receive_message_length", MAX_MESSAGE)]


# -- the source's side -------------------------------------------------------------------------


class FileSource:
    """Serves this node's synced directory, as of its last scan."""

    def __init__(self, sync: SyncDir) -> None:
        self.sync = sync

    async def manifest(self, request: pb.ManifestRequest, context: grpc.aio.ServicerContext) -> pb.ManifestResponse:
        return pb.ManifestResponse(header=request.header, files=_wire_sync.manifest_to_pb(self.sync.manifest))

    async def files(self, request: pb.FetchRequest, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.FileChunk]:
        manifest = self.sync.manifest
        if request.digest != manifest.digest:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"this copy is {manifest.digest[:12]} now, not {request.digest[:12]}",
            )
        listed = manifest.by_path()
        for path in request.paths:
            if path not in listed:
                await context.abort(grpc.StatusCode.NOT_FOUND, f"{path!r} is not in this copy")
            async for chunk in self._chunks(path):
                yield chunk

    async def _chunks(self, path: str) -> AsyncIterator[pb.FileChunk]:
        f = await asyncio.to_thread(self.sync.open, path)
        try:
            offset = 0
            while True:
                data = await asyncio.to_thread(f.read, CHUNK)
                if not data and offset:
                    return
                yield pb.FileChunk(path=path, offset=offset, data=data)
                offset += len(data)
                if not data:
                    return
        finally:
            f.close()


# -- the fetching member's side ------------------------------------------------------------------


async def pull(sync: SyncDir, order: SyncFrom, me: Peer, job: str, round: int, keys: Optional[Keys] = None) -> Manifest:
    """Make `sync` the copy `order` names; the copy this node has after it. SyncError when
    it cannot (the directory is then as it was). With the job's `keys`, every request is
    signed: a source serves only nodes that hold the token."""
    local = await sync.scan()
    if order.source.node_id == me.node_id or local.digest == order.digest:
        return local
    endpoint = order.source.endpoint
    header = _wire.header(job, round, me.node_id)
    async with grpc.aio.insecure_channel(endpoint, options=_options()) as channel:
        stub = pb_grpc.RendezvousStub(channel)
        try:
            response = await stub.GetManifest(_auth.sign_request(keys, pb.ManifestRequest(header=header))[1])
        except grpc.aio.AioRpcError as exc:
            raise SyncError(f"could not read the manifest of {order.source.describe()}: {exc.code().name} {exc.details()}") from None
        manifest = _wire_sync.manifest_from_pb(response.files)
        if manifest.digest != order.digest:
            raise SyncError(f"the copy of {order.source.describe()} changed since the freeze")

        def fetch(paths: list[str]) -> Chunks:
            request = pb.FetchRequest(header=header, digest=order.digest, paths=paths)
            return _chunks(stub, _auth.sign_request(keys, request)[1], order.source)

        return await sync.pull(manifest, fetch, Progress(str(order.source.address)))


async def _chunks(stub: pb_grpc.RendezvousStub, request: pb.FetchRequest, source: Peer) -> Chunks:
    call = stub.FetchFiles(request)
    try:
        async for chunk in call:
            yield chunk.path, chunk.offset, chunk.data
    except grpc.aio.AioRpcError as exc:
        raise SyncError(f"fetching from {source.describe()} failed: {exc.code().name} {exc.details()}") from None
    finally:
        call.cancel()

