"""How a node tells the world what it is doing: one small interface, several consumers.

The node calls `ready()` once it is advertised and its gRPC server listens, `update()` with
a fresh `NodeStatus` whenever something changes (peers seen, frozen, running, finished),
`stopping()` when its shutdown begins and `close()` at the very end. Consumers: systemd's
notify socket (`rendezvous.observe.notify`) and the terminal or log (`rendezvous.observe.console`).
"""

from __future__ import annotations

import logging
from typing import Iterable

from ..core.status import NodeStatus

log = logging.getLogger(__name__)


class Reporter:
    """Does nothing; consumers override what they need. Called on the node's event loop."""

    def ready(self) -> None:
        """The node is advertised and its gRPC server listens."""

    def update(self, status: NodeStatus) -> None:
        """Something changed; the same status may come more than once."""

    def stopping(self) -> None:
        """The node's shutdown has begun."""

    def close(self) -> None:
        """The node is done: release sockets and tasks."""


class Reporters(Reporter):
    """Hands every call to each reporter. A failing reporter is logged, never fatal: the
    training must not stop because a status line could not be shown."""

    def __init__(self, reporters: Iterable[Reporter]) -> None:
        self.reporters = list(reporters)

    def _each(self, method: str, *args: object) -> None:
        for reporter in self.reporters:
            try:
                getattr(reporter, method)(*args)
            except Exception:
                log.warning("%s.%s failed", type(reporter).__name__, method, exc_info=True)

    def ready(self) -> None:
        self._each("ready")

    def update(self, status: NodeStatus) -> None:
        self._each("update", status)

    def stopping(self) -> None:
        self._each("stopping")

    def close(self) -> None:
        self._each("close")
