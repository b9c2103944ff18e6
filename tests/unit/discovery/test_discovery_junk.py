"""Junk and foreign DNS-SD records of our service type never disturb a rendezvous."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import socket
from types import SimpleNamespace

from zeroconf import IPVersion
from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from peers import assert_consistent, join_argv, records, start_peer
from rendezvous.core.advert import SERVICE_TYPE
from rendezvous.discovery.mdns import MAX_RESOLVING, MdnsDiscovery

JUNK_ADDRESS = "127.0.0.20"


def junk_services(job: str) -> list[AsyncServiceInfo]:
    valid = {"v": "1", "job": job, "expect": "2", "port": "4000", "tfport": "4001", "phase": "waiting", "round": "1"}
    variants = [
        {},  # no TXT at all
        {"v": "x"},
        {**valid, "v": "2"},  # a future protocol version: ignored, not parsed
        {**valid, "expect": "0"},
        {**valid, "expect": "99999999999999999999"},
        {**valid, "node": "NOT-HEX"},
        {**valid, "node": "abcdef012345", "port": "1234"},  # TXT port differs from SRV port
        {**valid, "node": "abcdef012346", "phase": "exploded"},
        {**valid, "node": "abcdef012347", "job": "bad job name"},
        {**valid, "node": "abcdef012348", "job": b"\xff\xfe".decode("latin-1")},
    ]
    infos = []
    for i, props in enumerate(variants):
        name = f"junk{i}{secrets.token_hex(3)}"
        infos.append(
            AsyncServiceInfo(
                SERVICE_TYPE,
                f"{name}.{SERVICE_TYPE}",
                addresses=[socket.inet_aton(JUNK_ADDRESS)],
                port=4000,
                properties=props,
                server=f"{name}.local.",
            )
        )
    return infos


def test_peers_ignore_junk_records(tmp_path):
    job = f"j-{secrets.token_hex(4)}"

    async def scenario() -> None:
        zc = AsyncZeroconf(interfaces=[JUNK_ADDRESS], ip_version=IPVersion.V4Only)
        try:
            for info in junk_services(job):
                await zc.async_register_service(info, cooperating_responders=True)
            out = tmp_path / "out"
            out.mkdir()
            first = start_peer(join_argv(2, job, out, address="127.0.0.2", options=["-v"]), tmp_path, "first")
            # the first peer waits among the junk until it has looked at it
            for _ in range(200):
                if "ignoring service junk" in first.log:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"the junk was never looked at:\n{first.log}")
            second = start_peer(join_argv(2, job, out, address="127.0.0.3", options=["-v"]), tmp_path, "second")
            peers = [first, second]
            codes = await asyncio.gather(*(asyncio.to_thread(p.wait) for p in peers))
            for peer, code in zip(peers, codes):
                assert code == 0, peer.log
                assert JUNK_ADDRESS not in peer.log, peer.log
            assert_consistent(records(out), ["127.0.0.2", "127.0.0.3"])
        finally:
            await zc.async_unregister_all_services()
            await zc.async_close()

    asyncio.run(scenario())


def test_asking_again_resolves_a_bounded_number_of_unresolved_names_longest_waiting_first():
    """A flood of service names that never resolve (a PTR without SRV or TXT) must not make
    every node query for all of them at every ask: at most MAX_RESOLVING per ask, in turn."""
    sent: list[set] = []
    started: list[str] = []
    discovery = MdnsDiscovery(ipaddress.ip_address("127.0.0.2"), None, lambda event: None)
    discovery._browser = SimpleNamespace(query_scheduler=SimpleNamespace(
        async_send_ready_queries=lambda first, now, types: sent.append(types)))
    discovery._start_resolving = started.append  # type: ignore[method-assign]
    names = [f"n{i}.{SERVICE_TYPE}" for i in range(MAX_RESOLVING + 3)]
    discovery._unresolved = dict.fromkeys(names)
    discovery.ask_again()
    assert sent == [{SERVICE_TYPE}] and started == names[:MAX_RESOLVING]
    discovery._unresolved.update(dict.fromkeys(started))  # they fail again: last in line
    started.clear()
    discovery.ask_again()
    assert started[:3] == names[MAX_RESOLVING:] and len(started) == MAX_RESOLVING
