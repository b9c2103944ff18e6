"""A node learns that another host claims its address and port from a third node's Status
request about that host's advert (StatusRequest.about): the two hosts themselves never
hear each other. Here the third node is this test, asking a real daemon with a real gRPC
request about an advert of another node id at the daemon's own endpoint."""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
from pathlib import Path

from patience import wait_until
from peers import join_argv, start_peer

from rendezvous.coordinator.client import fetch_status
from rendezvous.core.advert import Advert
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size

PORT = 47124  # the daemon's fixed --port: the twin's advert claims the same endpoint
TWIN = "0123456789ab"
OTHER_PORT_NODE = "ba9876543210"


def test_a_status_request_about_another_node_at_this_endpoint_names_it_at_once_and_at_the_timeout(tmp_path: Path):
    job = f"w-{secrets.token_hex(4)}"
    timeout = 8.0  # long enough for the request below; the node then gives up
    node = start_peer(join_argv(2, job, tmp_path, address="127.0.0.2", options=["--port", str(PORT), "--timeout",
                                                                             str(timeout)]), tmp_path, "node")
    wait_until(lambda: "1/2 peers seen" in node.log, "the node up")
    def advert(node_id: str, port: int) -> Advert:
        peer = Peer(node_id=node_id, address=ipaddress.ip_address("127.0.0.2"), port=port, tf_port=47125)
        return Advert(peer=peer, job=job, expect=Size.fixed(2))

    # a node of this host on another port (two daemons of one host) is no twin
    asyncio.run(fetch_status(f"127.0.0.2:{PORT}", 10.0, about=advert(OTHER_PORT_NODE, PORT + 2)))
    status = asyncio.run(fetch_status(f"127.0.0.2:{PORT}", 10.0, about=advert(TWIN, PORT)))
    assert status.node.node_id != TWIN  # the node answers as itself
    said = f"node {TWIN} also advertises this node's address and port 127.0.0.2:{PORT}"
    wait_until(lambda: any("WARNING" in line and said in line for line in node.log.splitlines()), "the warning")
    assert node.wait() == 3, node.log
    [error] = [line for line in node.log.splitlines() if "no rendezvous within --timeout" in line]
    assert said in error and error.endswith("Give each host its own address") and "multicast" not in error, node.log
    assert OTHER_PORT_NODE not in node.log, node.log
