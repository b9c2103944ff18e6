"""Node in one process, with its collaborators replaced: an in-memory discovery bus, scripted
Join sessions or real gRPC between in-process nodes, and real gated commands.

These reach the paths that only misbehaving peers reach: a digest that differs, a redirect
after the freeze, an aborted round.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

from patience import HANG

from rendezvous.config import JoinConfig, Timings
from rendezvous.coordinator import JoinSession
from rendezvous.core.advert import Advert, Phase
from rendezvous.core.member import Aborted, Completed, Frozen, Redirected, Released, Waiting
from rendezvous.core.peer import Peer
from rendezvous.core.tf_config import Membership
from rendezvous.discovery import Discovery, Gone, Seen
from rendezvous.errors import CoordinatorError
from rendezvous.daemon.node import Node
from rendezvous.core.size import Size

FAST = Timings(keepalive=1.0, retry_interval=0.05, advertise_delay=0.0, conflict_linger=0.0)


class Bus:
    """Discovery for nodes of one process: every advert reaches every other node."""

    def __init__(self) -> None:
        self.nodes: dict[str, "BusDiscovery"] = {}

    def discovery(self, address, advert: Optional[Advert], on_event) -> "BusDiscovery":
        return BusDiscovery(self, advert, on_event)

    def send(self, sender: str, event) -> None:
        for node_id, node in list(self.nodes.items()):
            if node_id != sender:
                asyncio.get_running_loop().call_soon(node.on_event, event)


class BusDiscovery(Discovery):
    def __init__(self, bus: Bus, advert: Advert, on_event) -> None:
        self.bus, self.advert, self.on_event = bus, advert, on_event

    async def start(self) -> None:
        for other in self.bus.nodes.values():
            asyncio.get_running_loop().call_soon(self.on_event, Seen(other.advert))
        self.bus.nodes[self.advert.node_id] = self
        self.bus.send(self.advert.node_id, Seen(self.advert))

    async def update(self, advert: Advert) -> None:
        self.advert = advert
        self.bus.send(advert.node_id, Seen(advert))

    async def close(self) -> None:
        self.bus.nodes.pop(self.advert.node_id, None)
        self.bus.send(self.advert.node_id, Gone(self.advert.node_id))


class ScriptedSession:
    """A coordinator that says what the test wants: `script(me)` lists the events."""

    def __init__(self, events: list) -> None:
        self.events: asyncio.Queue = asyncio.Queue()
        for event in events:
            self.events.put_nowait(event)
        self.sent: list = []

    async def join(self) -> None:
        self.sent.append("join")

    async def ready(self, digest: str, sync=None) -> None:
        self.sent.append(("ready", digest))

    async def heartbeat(self) -> None:
        pass

    async def finished(self, code: int, reason: str = "", sync=None, failure=None) -> None:
        self.sent.append(("finished", code, reason))
        self.failure = failure

    async def receive(self):
        return await self.events.get()

    async def close(self) -> None:
        pass


def scripted(script, sessions: list):
    def connect(endpoint: str, me: Peer, job: str, round: int, expect: int, keepalive: float, fingerprint=None, **transport):
        session = ScriptedSession(script(me))
        sessions.append(session)
        return session

    return connect


def config(tmp_path: Path, host: int, expect: int = 1, **kwargs) -> JoinConfig:
    marker = tmp_path / f"ran-{host}.json"
    command = (sys.executable, "-c", f"import json, os; json.dump(dict(os.environ), open({str(marker)!r}, 'w'))")
    return JoinConfig(expect=expect, job="inproc", address=f"127.0.0.{host}", command=command,
                      **{"timeout": 20.0, "timings": FAST, **kwargs})


@pytest.fixture(autouse=True)
def _runtime_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RENDEZVOUS_RUNTIME_DIR", str(tmp_path / "run"))


def ran(tmp_path: Path, host: int) -> Optional[dict]:
    marker = tmp_path / f"ran-{host}.json"
    return json.loads(marker.read_text()) if marker.exists() else None


async def run_nodes(*nodes: Node) -> list:
    return await asyncio.wait_for(asyncio.gather(*(n.run() for n in nodes), return_exceptions=True), HANG)


async def wait_for_view(node: Node, holds) -> None:
    """Until the node's view holds what `holds` asks."""
    while not holds(node.view):
        node.views.changed.clear()
        await node.views.changed.wait()


def test_two_nodes_in_one_process_run_their_commands_with_one_list(tmp_path):
    bus = Bus()
    nodes = [Node(config(tmp_path, h, expect=2), discovery=bus.discovery) for h in (21, 22)]
    assert asyncio.run(run_nodes(*nodes)) == [0, 0]
    envs = [ran(tmp_path, 21), ran(tmp_path, 22)]
    assert envs[0]["TF_CONFIG"].replace('"index":0', '"index":1') == envs[1]["TF_CONFIG"]
    assert [e["RENDEZVOUS_RANK"] for e in envs] == ["0", "1"]


class LyingSession(JoinSession):
    """Confirms the frozen list with a digest of its own making."""

    async def ready(self, digest: str, sync=None) -> None:
        await super().ready("0" * 64)


def test_a_member_whose_digest_differs_aborts_the_round_and_no_command_runs(tmp_path):
    bus = Bus()
    honest = Node(config(tmp_path, 23, expect=2, max_restarts=1), discovery=bus.discovery)
    liar = Node(config(tmp_path, 24, expect=2, max_restarts=1), discovery=bus.discovery, connect=LyingSession)
    results = asyncio.run(run_nodes(honest, liar))
    for result in results:
        assert isinstance(result, CoordinatorError) and result.exit_code == 6
        assert "failed in round 2 of at most 2" in str(result)
    # the liar may lose its stream to its own failed write before it reads the reason
    assert "computed cluster digest 000000000000" in str(results[0])
    assert ran(tmp_path, 23) is None and ran(tmp_path, 24) is None


def frozen_alone(me: Peer) -> Frozen:
    membership = Membership.freeze("inproc", 1, [me])
    return Frozen(membership, membership.digest)


def test_a_redirect_after_the_freeze_fails_with_exit_6_and_the_armed_command_never_runs(tmp_path):
    sessions: list = []
    connect = scripted(lambda me: [Waiting((me,), 1), frozen_alone(me), Redirected(None, "changed my mind")], sessions)
    node = Node(config(tmp_path, 25, max_restarts=0), discovery=Bus().discovery, connect=connect)
    (result,) = asyncio.run(run_nodes(node))
    assert isinstance(result, CoordinatorError) and result.exit_code == 6
    assert "redirected after the freeze" in str(result)
    assert ("ready", frozen_alone(node.view.me.peer).membership.digest) in sessions[0].sent
    assert ran(tmp_path, 25) is None


@pytest.mark.parametrize("freeze_first", [False, True], ids=["gathering", "frozen"])
def test_an_aborted_round_fails_with_exit_6_and_the_command_never_runs(tmp_path, freeze_first):
    def script(me):
        return [*([frozen_alone(me)] if freeze_first else []), Aborted("member 10.0.0.9 left before the start")]

    node = Node(config(tmp_path, 26, max_restarts=0), discovery=Bus().discovery, connect=scripted(script, []))
    (result,) = asyncio.run(run_nodes(node))
    assert isinstance(result, CoordinatorError) and result.exit_code == 6
    assert "aborted the round: member 10.0.0.9 left before the start" in str(result)
    assert ran(tmp_path, 26) is None


def test_a_release_runs_the_command_and_reports_its_exit_code(tmp_path):
    sessions: list = []
    connect = scripted(lambda me: [frozen_alone(me), Released(0.0, 0.05)], sessions)
    node = Node(config(tmp_path, 27), discovery=Bus().discovery, connect=connect)

    async def complete_after_the_report():
        task = asyncio.create_task(node.run())
        while not sessions or ("finished", 0) not in [s[:2] for s in sessions[0].sent if isinstance(s, tuple)]:
            await asyncio.sleep(0.02)
        sessions[0].events.put_nowait(Completed())
        return await asyncio.wait_for(task, HANG)

    assert asyncio.run(complete_after_the_report()) == 0
    assert ran(tmp_path, 27)["RENDEZVOUS_WORLD_SIZE"] == "1"


def other(address: str, node_id: str, phase: Phase = Phase.WAITING, coordinator: Optional[str] = None) -> Advert:
    import ipaddress

    peer = Peer(node_id=node_id, address=ipaddress.ip_address(address), port=7000, tf_port=9000)
    return Advert(peer=peer, job="inproc", expect=Size.fixed(3), phase=phase, coordinator=coordinator)


def test_status_shows_the_coordinator_this_node_follows_and_leaves_suspects_out(tmp_path):
    """What is shown is what the node does: a frozen job's coordinator, even when a lower
    peer is seen; a suspected peer neither counted nor marked coordinator."""

    async def scenario():
        bus = Bus()
        node = Node(config(tmp_path, 28, expect=3), discovery=bus.discovery, connect=scripted(lambda me: [], []))
        task = asyncio.create_task(node.run())
        while node.node_id not in bus.nodes:  # started
            await asyncio.sleep(0.01)
        lowest = other("127.0.0.2", "aaaaaaaa")
        running = other("127.0.0.30", "cccccccc", Phase.RUNNING, "127.0.0.30:7000")
        discovered = wait_for_view(node, lambda view: len(view.others) == 2)
        bus.send("", Seen(lowest))  # as discovery would
        bus.send("", Seen(running))
        await discovered
        node.views.update(node.view.confirm(lowest).confirm(running))  # as their Status would
        frozen_job = node.status()
        node.views.update(node.view.suspect("aaaaaaaa", until=float("inf")))
        suspected = node.status()
        node.signals.received(signal.SIGTERM)
        await task
        return frozen_job, suspected

    frozen_job, suspected = asyncio.run(scenario())
    assert frozen_job.coordinator.node_id == "cccccccc", "follows the frozen job, not the lowest"
    assert suspected.seen == tuple(sorted([suspected.node, other("127.0.0.30", "cccccccc").peer]))
    assert [p.node_id for p in suspected.unreachable] == ["aaaaaaaa"]
    from rendezvous.core.status import progress_line

    line = progress_line(suspected)
    assert "2/3 peers seen" in line and "127.0.0.2 (aaaaaaaa) [unreachable]" in line
    assert "127.0.0.30 (cccccccc) [coordinator]" in line


class RecordingSession(JoinSession):
    """Keeps every Waiting its coordinator sends."""

    waitings: list = []

    async def receive(self):
        event = await super().receive()
        if isinstance(event, Waiting):
            self.waitings.append((self._me.node_id, event))
        return event


def test_the_coordinator_sends_who_has_joined_at_most_once_per_waiting_every(tmp_path):
    """Four peers join one after another within the window: each gets one list with all of
    them, not one list per join."""
    bus = Bus()
    timings = Timings(keepalive=1.0, retry_interval=0.05, advertise_delay=0.0, waiting_every=1.5)
    nodes = [
        Node(config(tmp_path, h, expect=5, timeout=2.5, timings=timings), discovery=bus.discovery, connect=RecordingSession)
        for h in (31, 32, 33, 34)
    ]
    RecordingSession.waitings = []
    asyncio.run(run_nodes(*nodes))  # they wait for a fifth that never comes
    by_node = {n.node_id: [w for i, w in RecordingSession.waitings if i == n.node_id] for n in nodes}
    for waitings in by_node.values():
        assert len(waitings) == 1, by_node
        assert len(waitings[0].joined) == 4


def watched_pair(hosts, code: str) -> list:
    """Two nodes of one job with a 0.5 s liveness timeout, each running Python `code`."""
    bus = Bus()
    return [
        Node(JoinConfig(expect=2, job="inproc", address=f"127.0.0.{h}", timeout=20.0, timings=FAST,
                        liveness_timeout=0.5, command=(sys.executable, "-c", code)), discovery=bus.discovery)
        for h in hosts
    ]


def test_a_member_that_did_not_run_between_two_looks_does_not_blame_its_coordinator(tmp_path, monkeypatch, caplog):
    """The process stops (SIGSTOP, starved of CPU) right after the member looked at its stream,
    while it handles what it read, not while it waits on the stream, and something pending
    wakes it at once when it runs again: the member was not listening meanwhile, and must
    not count the coordinator lost for that silence. (Both nodes share this process: the
    coordinator, stopped too, finds its own pause.)"""
    from rendezvous.daemon import joiner as joining
    from rendezvous.core.member import MemberPhase, TargetChanged

    step, stopped = joining.machine.step, []

    def stop_once_released(state, event, now):
        if (isinstance(event, TargetChanged) and state.phase is MemberPhase.RELEASED
                and not state.joined_to_self and not stopped):
            stopped.append(now)
            time.sleep(2.0)  # the whole process: 4 liveness timeouts
            # and what came meanwhile (mDNS, here) wakes it at once: it looks before the
            # coordinator, stopped too, has sent anything
            asyncio.get_running_loop().call_soon(nodes[1].views.changed.set)
        return step(state, event, now)

    monkeypatch.setattr(joining.machine, "step", stop_once_released)
    # A daemon that does not run for its round's liveness timeout has its command ended by
    # the command's gate (test_process_tree.py): here only what the member makes of its own
    # pause is looked at, so the gates are told no timeout to watch.
    fire = joining.Launcher.fire
    monkeypatch.setattr(joining.Launcher, "fire", lambda launcher, start_at, liveness=0.0: fire(launcher, start_at, 0.0))
    nodes = watched_pair((28, 29), "import time; time.sleep(3)")
    with caplog.at_level(logging.INFO):
        assert asyncio.run(run_nodes(*nodes)) == [0, 0]
    assert stopped, "the member never got to the stop"
    assert "nothing heard from" not in caplog.text and "round 2" not in caplog.text, caplog.text
    assert "did not run for" in caplog.text  # the coordinator's watchdog


def test_a_member_busy_between_two_looks_neither_blames_its_coordinator_nor_says_it_was_stopped(tmp_path, monkeypatch, caplog):
    """A member that takes long to confirm the frozen list (it scans a big --sync-dir: 4
    liveness timeouts here) while the process runs: it heartbeats meanwhile, so the
    coordinator keeps it (it dropped it as frozen, and the round, before), the
    coordinator's heartbeats wait in the stream, and the member says neither that the
    coordinator went silent nor that it did not run itself."""
    from rendezvous.daemon import joiner as joining

    scan = joining.MemberActions._scan

    async def slow_scan(self):
        if not self.state.joined_to_self:
            await asyncio.sleep(2.0)
        return await scan(self)

    monkeypatch.setattr(joining.MemberActions, "_scan", slow_scan)
    nodes = watched_pair((30, 31), "pass")
    with caplog.at_level(logging.INFO):
        assert asyncio.run(run_nodes(*nodes)) == [0, 0]
    assert "nothing heard from" not in caplog.text and "did not run for" not in caplog.text, caplog.text
    assert "round 2" not in caplog.text, caplog.text


def test_the_endpoint_builder_is_passed_in_and_the_server_stops_with_the_configured_grace(tmp_path):
    """A node builds its endpoint with the builder it was given; at shutdown its gRPC server
    gets Timings.server_stop_grace for the calls under way."""
    from rendezvous.daemon.resources import bind_resources

    grace = 0.123
    built, stops = [], []

    def bind(*args, **kwargs):
        endpoint, views = bind_resources(*args, **kwargs)
        stop = endpoint.server.stop

        async def recorded_stop(grace):
            stops.append(grace)
            await stop(grace)

        endpoint.server.stop = recorded_stop
        built.append(endpoint)
        return endpoint, views

    sessions: list = []
    connect = scripted(lambda me: [frozen_alone(me), Released(0.0, 0.05), Completed()], sessions)
    timings = Timings(keepalive=1.0, retry_interval=0.05, advertise_delay=0.0, server_stop_grace=grace)
    node = Node(config(tmp_path, 35, timings=timings), discovery=Bus().discovery, connect=connect, bind=bind)
    assert asyncio.run(run_nodes(node)) == [0]
    assert len(built) == 1 and stops == [grace]


def test_a_failed_command_sends_its_cause_and_every_reported_cause_is_logged(tmp_path, caplog):
    from rendezvous.core.failure import Failure
    from rendezvous.core.record import replace
    from rendezvous.errors import JobFailed

    sessions: list = []
    connect = scripted(lambda me: [frozen_alone(me), Released(0.0, 0.05)], sessions)
    failing = ("sh", "-c", 'echo "$RENDEZVOUS_ERROR_FILE" > ' + str(tmp_path / "where") + '; echo boom >&2; exit 3')
    settings = replace(config(tmp_path, 29, max_restarts=0), command=failing)
    node = Node(settings, discovery=Bus().discovery, connect=connect)
    other = Failure(node_id="0ther0ther00", address="10.0.0.7", rank=4, exit_code=1,
                    tail=("Traceback (most recent call last):", "KeyError: 'shard'"))

    async def abort_after_the_report():
        task = asyncio.create_task(node.run())
        while not sessions or ("finished", 3, "") not in sessions[0].sent:
            await asyncio.sleep(0.02)
        assert node.status().failure == sessions[0].failure
        sessions[0].events.put_nowait(Aborted("the other one failed", 1, final=True, failure=other))
        with pytest.raises(JobFailed):
            await asyncio.wait_for(task, HANG)

    with caplog.at_level(logging.INFO):
        asyncio.run(abort_after_the_report())
    sent = sessions[0].failure
    assert (sent.node_id, sent.rank, sent.exit_code, sent.tail) == (node.node_id, 0, 3, ("boom",))
    messages = [r.getMessage() for r in caplog.records]
    assert f"command failed: node {node.node_id} (127.0.0.29), rank 0, exited with code 3: boom" in messages
    assert "command failed: node 0ther0ther00 (10.0.0.7), rank 4, exited with code 1: KeyError: 'shard'" in messages
    assert "    Traceback (most recent call last):" in messages
    where = Path((tmp_path / "where").read_text().strip())
    assert where.name == "error.json" and not where.parent.exists()  # removed with the round


def test_a_stop_signal_while_an_aborted_round_stops_its_command_ends_the_node_as_the_command_ended(tmp_path, caplog):
    """The round ends first, then the node's own SIGTERM comes (the coordinator's daemon was
    stopped a moment before this one): no round follows and `join` exits as its command did."""
    sessions: list = []
    connect = scripted(lambda me: [frozen_alone(me), Released(0.0, 0.05)], sessions)
    started = tmp_path / "started"
    stubborn = ("sh", "-c", f"trap '' TERM; touch {started}; sleep 60")
    from rendezvous.core.record import replace
    settings = replace(config(tmp_path, 30, max_restarts=3, abort_grace=0.5), command=stubborn)
    node = Node(settings, discovery=Bus().discovery, connect=connect)

    async def stop_while_the_abort_stops_the_command():
        task = asyncio.create_task(node.run())
        while not started.exists():
            await asyncio.sleep(0.02)
        sessions[0].events.put_nowait(Aborted("127.0.0.9 (9): its daemon was stopped (SIGTERM)"))
        while node.status().ending is None:
            await asyncio.sleep(0.01)
        node.signals.received(signal.SIGTERM)
        return await asyncio.wait_for(task, HANG)

    with caplog.at_level(logging.INFO):
        assert asyncio.run(stop_while_the_abort_stops_the_command()) == 128 + signal.SIGKILL
    messages = [r.getMessage() for r in caplog.records]
    assert "the command ignored SIGTERM for 0.5s: SIGKILL" in messages
    assert any(m.startswith("round 1 ended: ") and m.endswith("; stopping as asked") for m in messages)
    assert not any("round 2 starts" in m for m in messages) and len(sessions) == 1
