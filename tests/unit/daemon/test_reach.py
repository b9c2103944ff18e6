"""The command's end with the TensorFlow ports watched, over real sockets on loopback: a
port that drops connections is not simulable here, but one that answers and one that
refuses are, and neither may ever fail the command."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from rendezvous.core.peer import Peer
from rendezvous.core.reach import Knock
from rendezvous.core.tf_config import Membership
from rendezvous.daemon.reach import command_end
from rendezvous.host.knock import knock


def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_knock_tells_open_from_refused():
    with listening() as sock:
        assert asyncio.run(knock(f"127.0.0.1:{sock.getsockname()[1]}", 2.0)) is Knock.OPEN
    assert asyncio.run(knock(f"127.0.0.1:{free_port()}", 2.0)) is Knock.REFUSED


def test_the_command_ends_with_its_exit_code_whatever_the_ports_say():
    with listening() as own:
        me = Peer("aaaaaaaa", ipaddress.ip_address("127.0.0.1"), 29630, own.getsockname()[1])
        other = Peer("bbbbbbbb", ipaddress.ip_address("127.0.0.1"), 29631, free_port())  # refused: never blocked
        membership = Membership.freeze("job", 1, [me, other])

        async def exits() -> int:
            await asyncio.sleep(0.3)
            return 3

        assert asyncio.run(command_end(exits, me, membership, window=0.1)) == (3, "")
