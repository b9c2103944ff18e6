"""Forged adverts for a job, run inside a test's network namespace until killed: one with
--expect 1, one claiming a running job whose coordinator does not exist, and ten valid ones
at unused addresses lower than any host's.

    forge_adverts.py JOB INTERFACE_ADDRESS [COUNT [auth]]

With COUNT, COUNT valid adverts at unused addresses 10.0.x.y instead (marked as wanting a
token with `auth`), for a job of 3.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import sys

from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from rendezvous.core.advert import SERVICE_TYPE


def forged(job: str, own_address: str) -> list[tuple[str, dict]]:
    valid = {"v": "1", "job": job, "expect": "2", "port": "4000", "tfport": "4001", "phase": "waiting", "round": "1"}
    adverts = [
        (own_address, {**valid, "expect": "1"}),
        (own_address, {**valid, "phase": "running", "coord": "10.0.0.99:4000"}),
    ]
    adverts += [(f"10.0.0.{i}", dict(valid)) for i in range(1, 11)]
    return adverts


def many(job: str, count: int, auth: bool) -> list[tuple[str, dict]]:
    valid = {"v": "1", "job": job, "expect": "3", "port": "4000", "tfport": "4001", "phase": "waiting", "round": "1"}
    return [(f"10.0.{i // 250}.{i % 250 + 1}", {**valid, **({"auth": "1"} if auth else {})}) for i in range(count)]


async def main(job: str, own_address: str, count: str = "", auth: str = "") -> None:
    zc = AsyncZeroconf(interfaces=[own_address], ip_version=IPVersion.V4Only)
    adverts = many(job, int(count), auth == "auth") if count else forged(job, own_address)
    for address, props in adverts:
        node = secrets.token_hex(6)
        info = AsyncServiceInfo(
            SERVICE_TYPE, f"{node}.{SERVICE_TYPE}", addresses=[socket.inet_aton(address)], port=4000,
            properties={**props, "node": node}, server=f"{node}.local.",
        )
        await zc.async_register_service(info, cooperating_responders=True)
    print("advertised", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
