"""Reporters: every call reaches every reporter; a failing one never stops the node."""

from __future__ import annotations

import ipaddress
import logging

from rendezvous.core.peer import Peer
from rendezvous.core.status import NodeStatus
from rendezvous.observe.report import Reporter, Reporters

STATUS = NodeStatus(node=Peer("aaaaaaaaaaaa", ipaddress.ip_address("10.0.0.1"), 1, 2), job="j", expect=1)


class Recorder(Reporter):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def ready(self) -> None:
        self.calls.append("ready")

    def update(self, status: NodeStatus) -> None:
        self.calls.append(f"update {status.job}")

    def stopping(self) -> None:
        self.calls.append("stopping")

    def close(self) -> None:
        self.calls.append("close")


class Broken(Reporter):
    def update(self, status: NodeStatus) -> None:
        raise OSError("display gone")


def test_every_call_reaches_every_reporter_even_after_one_fails(caplog):
    first, last = Recorder(), Recorder()
    reporters = Reporters([first, Broken(), last])
    with caplog.at_level(logging.WARNING):
        reporters.ready()
        reporters.update(STATUS)
        reporters.stopping()
        reporters.close()
    assert first.calls == last.calls == ["ready", "update j", "stopping", "close"]
    assert "Broken.update failed" in caplog.text


def test_the_base_reporter_does_nothing():
    reporter = Reporter()
    reporter.ready()
    reporter.update(STATUS)
    reporter.stopping()
    reporter.close()
