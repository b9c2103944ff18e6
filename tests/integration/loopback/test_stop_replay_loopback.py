"""A signed stop recorded on the wire and played to a later run of the same job (the same
name, token, addresses and coordinator port: systemd's Restart=, an operator's rerun),
within the replay window: real daemons refuse it and the job runs on. The stop names the
node id of the daemon it was sent to, which is new at each start of a daemon."""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import sys
import time
from pathlib import Path

import grpc
from patience import wait_until
from peers import FAULT_COMMAND, FAST, join_argv, start_peer
from rendezvous.coordinator import fetch_job_status, fetch_status, stop_job
from rendezvous.coordinator.client import stop_request
from rendezvous.core.auth import derive_keys

STOPPED = 8  # rendezvous.errors.JobStopped.exit_code
# FAST's timings with a replay window no run of this test outlasts: a replay is refused for
# what it is addressed to, not for its age.
TIMINGS = "keepalive=1,suspect-after=1,end-grace=0.5,conflict-linger=0.2,replay-window=3600"
ADDRESSES = ("127.0.0.2", "127.0.0.3")


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


async def send_bytes(endpoint: str, data: bytes) -> grpc.StatusCode:
    """The recorded request, byte for byte, as a replayer sends it."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        call = channel.unary_unary("/rendezvous.v1.Rendezvous/Stop", request_serializer=lambda b: b,
                                   response_deserializer=lambda b: b)
        try:
            await call(data, timeout=10)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_a_recorded_stop_played_to_a_restarted_job_changes_nothing(tmp_path: Path):
    job = f"r-{secrets.token_hex(4)}"
    secret = secrets.token_hex(32)
    token = tmp_path / "token"
    token.write_text(secret + "\n")
    os.chmod(token, 0o600)
    keys = derive_keys(secret.encode(), job)
    port = free_port(ADDRESSES[0])  # the coordinator's, fixed as a unit file would fix it
    endpoint = f"{ADDRESSES[0]}:{port}"

    def start_job(run: int):
        out = tmp_path / f"out{run}"
        out.mkdir()
        peers = []
        for i, address in enumerate(ADDRESSES):
            fixed = ["--port", str(port)] if i == 0 else []
            options = [*FAST, "--timings", TIMINGS, "--token-file", str(token), "--max-restarts", "3", *fixed]
            command = [sys.executable, str(FAULT_COMMAND), str(out), "sleep:600"]
            peers.append(start_peer(join_argv(2, job, out, address=address, options=options, command=command),
                                    tmp_path, f"run{run}-{i}"))
        wait_until(lambda: len(list(out.glob("*-1.json"))) == 2, f"run {run}: both commands started")
        return peers

    first = start_job(1)
    second = []
    try:
        # what `rendezvous stop --token-file` sends the coordinator of the first run, recorded
        node_id = asyncio.run(fetch_status(endpoint, 10, keys)).node.node_id
        _, request = stop_request(job, node_id, keys, user="operator", reason="recorded",
                                  now_ms=int(time.time() * 1e3))
        recorded = request.SerializeToString()
        assert asyncio.run(send_bytes(endpoint, recorded)) is grpc.StatusCode.OK
        for peer in first:
            assert peer.wait() == STOPPED, peer.log
            assert "(user operator): recorded" in peer.log, peer.log

        second = start_job(2)
        replayed = asyncio.run(send_bytes(endpoint, recorded))
        assert replayed is grpc.StatusCode.FAILED_PRECONDITION
        view = asyncio.run(fetch_job_status(endpoint, 10, keys, job))
        assert view.coordinating and view.round == 1 and view.phase == "released", view
        for peer in second:
            assert peer.proc.poll() is None and "stopped by" not in peer.log, peer.log
        # a stop asked now, by the client, still ends it
        assert asyncio.run(stop_job(endpoint, job, 10, keys, "operator", "fresh")).coordinating
        for peer in second:
            assert peer.wait() == STOPPED, peer.log
            assert "(user operator): fresh" in peer.log, peer.log
    finally:
        for peer in (*first, *second):
            if peer.proc.poll() is None:
                peer.proc.kill()
                peer.proc.wait()
