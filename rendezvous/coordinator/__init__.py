"""The gRPC adapter: the coordinator's servicer and the peer's Join client.

This package is the only code that touches protobuf types; everything it hands out or
takes in is a domain object from `rendezvous.core`.
"""

from .client import (
    JoinSession,
    SessionLost,
    StatusUntrusted,
    StopAnswer,
    TokenNeeded,
    Untrusted,
    exchange,
    fetch_job_status,
    fetch_status,
    open_channel,
    stop_job,
)
from .server import CoordinatorService, bind_server, serve

__all__ = [
    "CoordinatorService",
    "JoinSession",
    "SessionLost",
    "StatusUntrusted",
    "StopAnswer",
    "TokenNeeded",
    "Untrusted",
    "bind_server",
    "exchange",
    "fetch_job_status",
    "fetch_status",
    "open_channel",
    "serve",
    "stop_job",
]
