"""The gRPC adapter: the coordinator's servicer and the peer's Join client.

This package is the only code that touches protobuf types; everything it hands out or
takes in is a domain object from `rendezvous.core`.
"""

from .client import (
    Aborted,
    CoordinatorEvent,
    Frozen,
    JoinSession,
    Redirected,
    Rejected,
    Released,
    SessionLost,
    Waiting,
    fetch_status,
)
from .server import CoordinatorService, bind_server, serve

__all__ = [
    "Aborted",
    "CoordinatorEvent",
    "CoordinatorService",
    "Frozen",
    "JoinSession",
    "Redirected",
    "Rejected",
    "Released",
    "SessionLost",
    "Waiting",
    "bind_server",
    "fetch_status",
    "serve",
]
