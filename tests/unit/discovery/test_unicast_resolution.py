"""Resolving seed names: a name that does not resolve is named in one warning, and a
resolver that hangs neither holds up the node nor keeps its process from exiting."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import subprocess
import sys
import textwrap
import threading

from rendezvous.config import Timings
from rendezvous.core.seeds import parse_seed
from rendezvous.discovery.unicast import UnicastDiscovery

# Names under .invalid never resolve (RFC 6761); these tests never ask a real resolver.
MISSING = "no.such.host.invalid"
TIMINGS = Timings(gossip_interval=0.2)


def discovery(resolve, seeds=(MISSING,)) -> UnicastDiscovery:
    return UnicastDiscovery(
        ipaddress.ip_address("127.0.0.2"), None, lambda event: None, [parse_seed(s) for s in seeds], TIMINGS,
        resolve=resolve,
    )


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_name_that_does_not_resolve_is_named_once(caplog):
    asked: list[str] = []

    def resolve(host, port, **kwargs):
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async def scenario():
        unicast = discovery(resolve)
        await unicast.start()
        while len(asked) < 3:  # resolved again at every exchange
            await asyncio.sleep(TIMINGS.gossip_interval / 4)
        await unicast.close()

    with caplog.at_level(logging.WARNING):
        asyncio.run(scenario())
    assert asked[:3] == [MISSING] * 3
    [warning] = warnings_of(caplog)
    assert MISSING in warning and "Name or service not known" in warning


def test_a_hanging_resolver_is_bounded_asked_once_and_not_waited_for_at_exit(caplog):
    """`--peer no.such.host.invalid --timeout 2` took 6.4 s and never named the name: the
    loop's getaddrinfo waited for the system resolver, and asyncio.run for its thread."""
    release = threading.Event()
    calls: list[str] = []
    returned = threading.Event()

    def resolve(host, port, **kwargs):
        calls.append(host)
        if host != MISSING:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.3", port))]
        release.wait()
        returned.set()
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    async def scenario():
        unicast = discovery(resolve, seeds=(MISSING, "127.0.0.3:1"))
        await unicast.start()  # bounded by the gossip interval: the seed that answers is used
        targets = await unicast._targets()
        await unicast._targets()
        await unicast.close()
        return targets

    try:
        with caplog.at_level(logging.WARNING):
            targets = asyncio.run(scenario())
        assert not returned.is_set()  # asyncio.run did not wait for the resolver
    finally:
        release.set()
    assert targets == ["127.0.0.3:1"]
    assert calls.count(MISSING) == 1  # one lookup in flight, awaited again, never piled up
    [warning] = warnings_of(caplog)
    assert MISSING in warning and "no answer from the resolver" in warning


def test_an_address_seed_is_resolved_without_a_thread():
    threads: list[str] = []

    def resolve(host, port, **kwargs):
        threads.append(threading.current_thread().name)
        return socket.getaddrinfo(host, port, **kwargs)  # an address: nothing is asked

    async def scenario():
        unicast = discovery(resolve, seeds=("127.0.0.3:1",))
        return await unicast._targets()

    assert asyncio.run(scenario()) == ["127.0.0.3:1"] and threads == ["MainThread"]


SCRIPT = textwrap.dedent("""
    import socket, sys, threading
    real = socket.getaddrinfo
    def hanging(host, *args, **kwargs):
        if str(host).endswith(".invalid"):
            threading.Event().wait()  # a DNS server that never answers
        return real(host, *args, **kwargs)
    socket.getaddrinfo = hanging
    from rendezvous.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def test_a_join_whose_seed_never_resolves_ends_at_its_timeout_naming_the_seed(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / "run")}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, "join", "--expect", "2", "--job", "r-unresolved", "--address", "127.0.0.2",
         "--discovery", "unicast", "--peer", MISSING, "--timeout", "1", "--", "true"],
        capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
        timeout=120,  # only if the process waits for the resolver; asyncio.run would wait 300 s
    )
    assert result.returncode == 3, result.stderr
    assert f"cannot resolve {MISSING}" in result.stderr and "no rendezvous within --timeout 1s" in result.stderr
