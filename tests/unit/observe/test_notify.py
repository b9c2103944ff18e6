"""systemd's notify protocol: message building, the watchdog interval, and a real 2-peer job
reporting READY, its STATUS lines, watchdog pings and STOPPING over AF_UNIX datagram sockets."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import secrets
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from peers import join_argv, start_peer
from rendezvous.core.advert import Phase
from rendezvous.core.peer import Peer
from rendezvous.core.status import NodeStatus
from rendezvous.core.tf_config import Membership
from rendezvous.core.tf_config import NOTIFY_VARIABLES
from rendezvous.observe.notify import SystemdNotifier, notify_message, socket_address, watchdog_interval
from rendezvous.core.size import Size

# --------------------------------------------------------------------------
# Pure parts
# --------------------------------------------------------------------------


def test_message_is_one_assignment_per_line():
    assert notify_message(READY="1") == b"READY=1"
    assert notify_message(STOPPING="1", STATUS="stopping") == b"STOPPING=1\nSTATUS=stopping"


def test_a_newline_in_a_value_cannot_start_another_assignment():
    assert notify_message(STATUS="a\nREADY=1") == b"STATUS=a READY=1"


@pytest.mark.parametrize(
    "value, address",
    [("/run/systemd/notify", "/run/systemd/notify"), ("@abstract/name", "\0abstract/name"),
     ("vsock:2:1234", None), ("relative/path", None)],
)
def test_socket_address(value, address):
    assert socket_address(value) == address


@pytest.mark.parametrize(
    "usec, pid, interval",
    [
        ("30000000", None, 15.0),
        ("200000", "4242", 0.1),
        ("200000", "1", None),  # the watchdog watches another process
        ("0", None, None),
        ("", None, None),
        (None, None, None),
        ("soon", None, None),
        ("-5", None, None),
    ],
)
def test_watchdog_interval_is_half_the_timeout_for_this_pid(usec, pid, interval):
    assert watchdog_interval(usec, pid, 4242) == interval


def test_nothing_without_notify_socket():
    assert SystemdNotifier.from_environ({}, 1) is None
    assert SystemdNotifier.from_environ({"NOTIFY_SOCKET": ""}, 1) is None
    assert SystemdNotifier.from_environ({"NOTIFY_SOCKET": "vsock:1:2"}, 1) is None
    notifier = SystemdNotifier.from_environ({"NOTIFY_SOCKET": "@x", "WATCHDOG_USEC": "1000000"}, 1)
    assert notifier is not None and notifier.address == "\0x" and notifier.watchdog == 0.5
    notifier.close()


def _status(phase=Phase.WAITING, seen=1, exit_code=None):
    a = Peer("aaaaaaaaaaaa", ipaddress.ip_address("10.0.0.1"), 1000, 2000)
    b = Peer("bbbbbbbbbbbb", ipaddress.ip_address("10.0.0.2"), 1000, 2000)
    membership = Membership.freeze("j", 1, [a, b]) if phase is not Phase.WAITING else None
    return NodeStatus(node=b, job="j", expect=Size.fixed(2), phase=phase, seen=(a, b)[2 - seen:], membership=membership, exit_code=exit_code)


class Receiver:
    """A datagram socket standing in for systemd's notify socket, drained by a thread as
    systemd would (a unix datagram queue holds only ~10 messages)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.05)
        self.path = path
        self._received: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop.is_set():
            try:
                self._received.append(self.sock.recv(4096).decode())
            except (socket.timeout, BlockingIOError):
                pass

    def messages(self) -> list[str]:
        time.sleep(0.1)  # whatever is in flight
        return list(self._received)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def test_notifier_sends_status_only_when_it_changes(tmp_path):
    receiver = Receiver(str(tmp_path / "notify"))
    notifier = SystemdNotifier(receiver.path)

    async def scenario():
        notifier.ready()
        notifier.update(_status(seen=1))
        notifier.update(_status(seen=1))  # unchanged: not sent again
        notifier.update(_status(seen=2))
        notifier.update(_status(Phase.RUNNING, seen=2))
        notifier.update(_status(Phase.FINISHED, seen=2, exit_code=0))
        notifier.stopping()

    asyncio.run(scenario())
    notifier.close()
    assert receiver.messages() == [
        "READY=1",
        "STATUS=waiting for peers 1/2",
        "STATUS=waiting for peers 2/2",
        "STATUS=round 1, worker 1 of 2 training",
        "STATUS=round 1, finished: worker 1 of 2, exit code 0",
        "STOPPING=1",
    ]
    receiver.close()


def test_stopping_while_waiting_says_so(tmp_path):
    receiver = Receiver(str(tmp_path / "notify"))
    notifier = SystemdNotifier(receiver.path)
    notifier.update(_status())
    notifier.stopping()
    notifier.close()
    assert receiver.messages()[-1] == "STOPPING=1\nSTATUS=stopping"


def test_abstract_socket(tmp_path):
    name = f"rendezvous-test-{secrets.token_hex(4)}"
    receiver = Receiver("\0" + name)
    notifier = SystemdNotifier.from_environ({"NOTIFY_SOCKET": "@" + name}, os.getpid())
    assert notifier is not None
    notifier.update(_status())
    notifier.close()
    assert receiver.messages() == ["STATUS=waiting for peers 1/2"]
    receiver.close()


def test_a_vanished_socket_is_not_fatal(tmp_path, caplog):
    notifier = SystemdNotifier(str(tmp_path / "nobody-listens"))
    assert notifier.send(READY="1") is False
    assert notifier.send(READY="1") is False
    notifier.close()
    assert sum("cannot notify systemd" in r.getMessage() for r in caplog.records) == 1


def test_watchdog_pings_from_the_loop(tmp_path):
    receiver = Receiver(str(tmp_path / "notify"))
    notifier = SystemdNotifier(receiver.path, watchdog=0.02)

    async def scenario():
        notifier.ready()
        await asyncio.sleep(0.15)
        notifier.close()
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    pings = receiver.messages()
    assert pings[0] == "READY=1"
    assert 4 <= pings.count("WATCHDOG=1") <= 10, pings
    receiver.close()


# --------------------------------------------------------------------------
# A real job: two `rendezvous join` processes, each with its own notify socket
# --------------------------------------------------------------------------


def _child_env_dump(out_dir: Path) -> list[str]:
    code = (
        "import json, os, sys, time; "
        f"open(os.path.join({str(out_dir)!r}, os.environ['RENDEZVOUS_NODE_ID'] + '.env'), 'w')"
        ".write(json.dumps(dict(os.environ))); time.sleep(1)"
    )
    return [sys.executable, "-c", code]


def test_two_peers_speak_the_notify_protocol(tmp_path, monkeypatch):
    job = f"sd-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    receivers, peers = [], []
    for address in ("127.0.0.2", "127.0.0.3"):
        receiver = Receiver(str(tmp_path / f"notify-{address}"))
        receivers.append(receiver)
        monkeypatch.setenv("NOTIFY_SOCKET", receiver.path)
        monkeypatch.setenv("WATCHDOG_USEC", "200000")
        argv = join_argv(2, job, out, address=address, command=_child_env_dump(out))
        peers.append(start_peer(argv, tmp_path, address))
    for peer in peers:
        assert peer.wait() == 0, peer.log
    for rank, receiver in enumerate(receivers):
        messages = receiver.messages()
        receiver.close()
        assert messages[0] == "READY=1", messages
        statuses = [m.split("=", 1)[1] for line in messages for m in line.split("\n") if m.startswith("STATUS=")]
        assert statuses[0].startswith("waiting for peers ") and statuses[0].endswith("/2"), statuses
        assert f"round 1, worker {rank} of 2 training" in statuses, statuses
        assert statuses[-1] == f"round 1, finished: worker {rank} of 2, exit code 0", statuses
        order = [statuses.index(s) for s in (statuses[0], f"round 1, worker {rank} of 2 training", statuses[-1])]
        assert order == sorted(order)
        # the command ran ~1 s; a ping every 0.1 s
        assert messages.count("WATCHDOG=1") >= 5, messages
        # STOPPING once the command has finished (pings may go on until the daemon exits)
        assert messages.count("STOPPING=1") == 1, messages
        assert messages.index("STOPPING=1") > messages.index(f"STATUS=round 1, finished: worker {rank} of 2, exit code 0")
        assert messages.index("READY=1") < messages.index("WATCHDOG=1")
    # the notify socket is the daemon's: the command does not inherit it
    for env_file in out.glob("*.env"):
        import json

        env = json.loads(env_file.read_text())
        assert not set(NOTIFY_VARIABLES) & set(env), env_file
    assert len(list(out.glob("*.env"))) == 2


def test_without_notify_socket_nothing_is_sent(tmp_path, monkeypatch):
    """A socket that is not named in the environment receives nothing, and the daemon never
    creates a notify socket of its own."""
    receiver = Receiver(str(tmp_path / "notify"))
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    monkeypatch.setenv("WATCHDOG_USEC", "200000")
    job = f"sd-{secrets.token_hex(4)}"
    peer = start_peer(join_argv(1, job, tmp_path, address="127.0.0.2", command=["true"]), tmp_path, "p")
    assert peer.wait() == 0, peer.log
    time.sleep(0.1)
    assert receiver.messages() == []
    receiver.close()


def test_a_stop_says_stopping_and_ends_the_command(tmp_path, monkeypatch):
    """`systemctl stop`: SIGTERM to the daemon; it reports STOPPING and stops the command's group."""
    import signal

    from peers import wait_for_records

    receiver = Receiver(str(tmp_path / "notify"))
    monkeypatch.setenv("NOTIFY_SOCKET", receiver.path)
    out = tmp_path / "out"
    out.mkdir()
    job = f"sd-{secrets.token_hex(4)}"
    peer = start_peer(join_argv(1, job, out, address="127.0.0.2", record_args=["--sleep", "60"]), tmp_path, "p")
    [record] = wait_for_records(out, 1)
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.wait() == 128 + signal.SIGTERM, peer.log
    messages = receiver.messages()
    receiver.close()
    assert "STATUS=round 1, worker 0 of 1 training" in messages, messages
    assert messages.index("STOPPING=1\nSTATUS=stopping") > messages.index("STATUS=round 1, worker 0 of 1 training")
    try:
        os.killpg(record["pgid"], 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive, "the command's process group outlived the stop"
