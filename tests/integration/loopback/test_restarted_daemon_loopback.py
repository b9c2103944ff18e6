"""A daemon killed -9 and restarted at the same address and port (what systemd does with
Restart=) comes back with a new node id while its predecessors' adverts stay in its peers'
mDNS caches for many minutes: the new one supersedes them at once, so a waiting peer
neither counts them ("4/3 peers seen") nor follows them."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from patience import wait_until
from peers import FAST, join_argv, records, start_peer, wait_for_records

PORT_OF_A = 47123  # the restarted daemon's fixed --port, as a unit file would give it
PREDECESSORS = 2


def test_a_daemon_restarted_at_its_address_supersedes_its_predecessors(tmp_path: Path):
    job = f"s-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()

    def start(address: str, name: str, *options: str):
        return start_peer(join_argv(3, job, out, address=address, options=[*FAST, *options]), tmp_path, name)

    def node_id(peer) -> str:
        found = wait_until(lambda: re.search(r"node (\w+) uses ", peer.log), f"{peer.name}'s node id")
        return found.group(1)

    waiting = start("127.0.0.3", "b")
    killed = []
    for n in range(PREDECESSORS + 1):
        a = start("127.0.0.2", f"a{n}", "--port", str(PORT_OF_A))
        ident = node_id(a)
        # the waiting peer has it in its view, then it dies without a goodbye
        wait_until(lambda: f"127.0.0.2 ({ident})" in waiting.log, f"b seeing {ident}")
        if n < PREDECESSORS:
            a.proc.kill()
            assert a.proc.wait() == -9
            killed.append(ident)
    third = start("127.0.0.4", "c")
    try:
        wait_for_records(out, 3)
        for peer in (a, waiting, third):
            assert peer.proc.wait() == 0, peer.log
    finally:
        for peer in (a, waiting, third):
            if peer.proc.poll() is None:
                peer.proc.kill()
    progress = [line for line in waiting.log.splitlines() if "peers seen" in line]
    # never more peers seen than the job has, and the dead are never shown as coordinator
    assert not any(re.search(r": [4-9]/3 peers seen", line) for line in progress), waiting.log
    for dead in killed:
        assert f"({dead}) [coordinator]" not in progress[-1], waiting.log
    assert f"coordinator 127.0.0.2 ({ident})" in waiting.log, waiting.log
    assert len(records(out)) == 3
