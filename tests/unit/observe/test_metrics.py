"""What a Prometheus scrape shows of a node's status (the HTTP side: test_job_status_netns)."""

from __future__ import annotations

import ipaddress

import pytest

from rendezvous.core.advert import Phase
from rendezvous.core.peer import Peer
from rendezvous.core.progress import Progress
from rendezvous.core.status import NodeStatus
from rendezvous.observe.metrics import samples
from rendezvous.core.size import Size

A = Peer("aaaaaaaaaaaa", ipaddress.ip_address("10.0.0.9"), 41234, 2222)


def shown(status: NodeStatus) -> dict:
    return {(s.name, s.labels): s.value for s in samples(status)}


def test_a_waiting_node():
    values = shown(NodeStatus(node=A, job="j", expect=Size.fixed(3), round=2))
    assert values[("rendezvous_phase", (("phase", "waiting"),))] == 1.0
    assert values[("rendezvous_phase", (("phase", "running"),))] == 0.0
    assert values[("rendezvous_round", ())] == 2 and values[("rendezvous_restarts", ())] == 1
    assert values[("rendezvous_members_seen", ())] == 1 and values[("rendezvous_members_expected", ())] == 3
    assert not any(name.startswith(("rendezvous_command", "rendezvous_training")) for name, _ in values)


def test_a_training_node():
    progress = Progress(epoch=4, step=40, loss=0.5, images_per_s=99.0, metrics=(("accuracy", 0.75),))
    status = NodeStatus(node=A, job="j", expect=Size.fixed(1), phase=Phase.RUNNING, seen=(A,), trainer_pid=5,
                        trainer_uptime=12.5, progress=progress, rendezvous_seconds=0.25)
    values = shown(status)
    assert values[("rendezvous_phase", (("phase", "running"),))] == 1.0
    assert values[("rendezvous_command_uptime_seconds", ())] == 12.5
    assert values[("rendezvous_rendezvous_duration_seconds", ())] == 0.25
    assert values[("rendezvous_training_epoch", ())] == 4 and values[("rendezvous_training_loss", ())] == 0.5
    assert values[("rendezvous_training_metric", (("metric", "accuracy"),))] == 0.75
    assert ("rendezvous_command_exit_code", ()) not in values


def test_a_scrape_waits_for_the_nodes_loop_as_long_as_it_is_told():
    """A loop too busy to answer fails the scrape after the read timeout it was given
    (Timings.metrics_read_timeout), rather than a constant."""
    import asyncio
    import concurrent.futures
    import threading

    from rendezvous.observe.metrics import _Collector

    busy = threading.Event()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever)
    thread.start()

    def status() -> NodeStatus:
        busy.wait()
        return NodeStatus(node=A, job="j", expect=Size.fixed(1))

    try:
        collector = _Collector(status, loop, read_timeout=0.05)
        with pytest.raises(concurrent.futures.TimeoutError):
            collector._fresh()
        busy.set()
        assert collector._fresh().job == "j"
    finally:
        busy.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_the_last_failure_with_its_node_rank_and_cause():
    from rendezvous.core.failure import Failure

    failure = Failure(node_id="bbbbbbbb", address="10.0.0.10", rank=2, exit_code=1,
                      tail=("RuntimeError: shard 7 is corrupt",))
    values = shown(NodeStatus(node=A, job="j", expect=Size.fixed(3), failure=failure))
    labels = (("failed_node", "bbbbbbbb"), ("failed_address", "10.0.0.10"), ("rank", "2"),
              ("cause", "RuntimeError: shard 7 is corrupt"))
    assert values[("rendezvous_last_failure_exit_code", labels)] == 1.0
    healthy = shown(NodeStatus(node=A, job="j", expect=Size.fixed(3)))
    assert not any(name.startswith("rendezvous_last_failure") for name, _ in healthy)
