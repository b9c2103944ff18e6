"""bind_server: a busy --port is one clear error of ours, without gRPC's native log line."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from rendezvous.coordinator.server import bind_server
from rendezvous.host.ports import check_port_free


def listening(host: str = "127.0.0.1", family: int = socket.AF_INET) -> socket.socket:
    s = socket.socket(family, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, 0))
    s.listen()
    return s


async def bind_and_stop(host: str, port: int) -> int:
    server, bound = bind_server(host, port)
    await server.stop(None)
    return bound


def test_a_listening_port_is_busy(capfd):
    with listening() as held:
        port = held.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: Address already in use"):
            asyncio.run(bind_and_stop("127.0.0.1", port))
    err = capfd.readouterr().err
    assert "add_port" not in err and "Failed to add port" not in err, err


def test_a_bound_port_is_busy():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        with pytest.raises(OSError, match="Address already in use"):
            check_port_free("127.0.0.1", held.getsockname()[1])


def test_a_port_in_time_wait_is_free():
    # The side that closes first keeps the port in TIME_WAIT; gRPC's listener binds it anyway.
    with listening() as server:
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
    accepted.close()
    client.close()
    check_port_free("127.0.0.1", port)
    assert asyncio.run(bind_and_stop("127.0.0.1", port)) == port


def test_any_free_port_and_a_free_fixed_port():
    port = asyncio.run(bind_and_stop("127.0.0.1", 0))
    assert port > 0
    check_port_free("127.0.0.1", 0)


def listening_on_ipv6_loopback() -> socket.socket:
    try:
        return listening("::1", socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")


def test_a_busy_ipv6_port(capfd):
    with listening_on_ipv6_loopback() as held:
        port = held.getsockname()[1]
        with pytest.raises(OSError, match=rf"cannot listen on \[::1\]:{port}: Address already in use"):
            asyncio.run(bind_and_stop("[::1]", port))
    assert "add_port" not in capfd.readouterr().err


def test_join_on_a_busy_port_exits_5_with_one_error_line():
    with listening() as held:
        port = held.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--address", "127.0.0.1",
             "--port", str(port), "--timeout", "5", "--", "true"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )
    assert result.returncode == 5, result.stderr
    assert f"rendezvous: error: --port {port}: cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "add_port" not in result.stderr, result.stderr


def test_a_dual_stack_node_listens_on_both_of_its_addresses_on_one_port():
    listening_on_ipv6_loopback().close()

    async def bind_and_connect() -> int:
        server, port = bind_server("127.0.0.1", 0, also=["[::1]"])
        await server.start()
        try:
            for host in ("127.0.0.1", "::1"):
                socket.create_connection((host, port), timeout=5).close()
        finally:
            await server.stop(None)
        return port

    assert asyncio.run(bind_and_connect()) > 0


def test_a_busy_port_on_the_other_address_is_busy_too():
    with listening_on_ipv6_loopback() as held:
        port = held.getsockname()[1]
        with pytest.raises(OSError, match=rf"cannot listen on \[::1\]:{port}"):
            bind_server("127.0.0.1", port, also=["[::1]"])
