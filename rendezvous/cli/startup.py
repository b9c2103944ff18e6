"""What the `rendezvous` command's process does before it parses its command line: the
start-up measures, in one place.

A daemon's start is mostly imports (about 130 ms of CPU: asyncio, gRPC, protobuf,
zeroconf), and a job of N nodes waits for the slowest start. Each measure below saves a part
of that; each is the first thing to break when someone adds an import, so each names the
test that notices. Gains measured side by side with `bench/startup_bench.py` (each measure
left out in turn; medians over two runs of a one-node job, docs/benchmarks.md):

| measure | where | saves (CPU, peak RSS) | guarded by |
|---|---|---|---|
| ssl set to None in the command's process | `_no_ssl` | 6 ms, 4.5 MiB | tests/unit/core/test_core_digest.py, tests/integration/loopback/test_join_loopback.py |
| the collector off while importing, then frozen | `prepare` | 33-40 ms | tests/unit/cli/test_entry_point.py |
| the command line split here, before cli is imported | `split` | the spare gate forks from a small process | tests/unit/cli/test_entry_point.py (the first round runs in that gate) |
| stand-ins for modules the daemon never uses | `_defer`, cli/deferred.py | 10-14 ms, 1.8 MiB | tests/unit/cli/test_deferred.py, tests/unit/cli/test_entry_point.py |
| CPython's own SHA-256 for the frozen list's digest | core/digest.py | 1-11 ms, 3.5 MiB | tests/unit/core/test_core_digest.py |
| record classes instead of dataclasses | core/record.py | 50 ms, 1.3 MiB | tests/unit/core/test_core_record.py |

A measure that saves less than 10 ms of a daemon's start and less than 1 MiB of its memory
is not worth what it costs to keep: measure again before adding one.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, Collection, Optional, Sequence

if TYPE_CHECKING:
    from ..launch.firstgate import Spare

GRPC_SETTINGS = {"GRPC_VERBOSITY": "ERROR", "GRPC_POLL_STRATEGY": "poll"}


def split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command line split as rendezvous.cli.main.split_command does, before cli (and all
    it imports) is: the options, and the command after the first '--'."""
    options = list(argv[:list(argv).index("--")]) if "--" in argv else list(argv)
    return options, list(argv[len(options) + 1:])


def _no_ssl() -> None:
    # asyncio imports ssl, for TLS that nothing in rendezvous speaks through Python (gRPC
    # brings its own), and ssl loads OpenSSL: with hashing deferred too (rendezvous.core.
    # digest), a waiting daemon without a token maps neither libssl nor libcrypto. Only the
    # command's own process goes without ssl, until --metrics-port needs it
    # (rendezvous.observe.metrics): code that imports the package as a library keeps its ssl.
    sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]


def _defer() -> None:
    from . import deferred

    # Imported by protobuf and zeroconf, not used by the daemon (rendezvous.cli.deferred).
    deferred.defer("google.protobuf.internal.python_message")
    deferred.defer("ifaddr")


def prepare(argv: Sequence[str], leave_out: Collection[str] = ()) -> Optional[Spare]:
    """Everything before `rendezvous.cli.main.main` runs; the first round's gate, when `join`
    has a command and this system can fork it. `leave_out` names measures to skip ("ssl",
    "gc", "defer"), for bench/startup_bench.py alone."""
    spare = None
    if "ssl" not in leave_out:
        _no_ssl()
    options, command = split(argv)
    joins = "join" in options and not {"-h", "--help"} & set(options)
    # Importing what a daemon runs creates some 26,000 objects that live as long as the
    # process: modules, classes, functions. The cyclic collector, triggered every 700 new
    # ones, would traverse them many times meanwhile and find almost nothing to free. So it
    # is off while they are imported; then they are frozen, never traversed again, and it
    # runs as usual.
    collect = "gc" not in leave_out
    if collect:
        gc.disable()
    try:
        if joins and command:
            # Its first round's gate, forked now: a copy of this small, single-threaded
            # process, not an interpreter started later (rendezvous.launch.firstgate).
            from ..launch.firstgate import fork_spare

            spare = fork_spare()
        # gRPC's C core reads these from the environment once, as it initialises. They are
        # set for the daemon's core unless the user set them, and taken away again once read,
        # so the command inherits the environment as it was:
        # - GRPC_VERBOSITY: the core logs to stderr on its own, below our logging; a GOAWAY
        #   from a peer ("Got goaway ... ping_timeout") is an INFO line of it, and what it
        #   means reaches our log as the stream's end. Only its errors are printed.
        # - GRPC_POLL_STRATEGY: the default poller (epoll1) keeps the handle of every socket
        #   it ever watched at once, for reuse, for good: small allocations among each
        #   connection's buffers that keep their pages resident. 3,000 connections held by
        #   an attacker left some 15 MB behind once closed (rendezvous.coordinator.limits).
        #   poll(2) frees a handle with its socket, and a daemon watches a few dozen.
        grpc_settings = {name: value for name, value in GRPC_SETTINGS.items() if name not in os.environ}
        os.environ.update(grpc_settings)
        if "defer" not in leave_out:
            _defer()
        from . import main  # noqa: F401

        if joins:
            from ..daemon import node  # noqa: F401  imported by `join` anyway
        import grpc  # noqa: F401  initialises its core, which reads the settings

        for name in grpc_settings:
            del os.environ[name]
    finally:
        if collect:
            gc.freeze()
            gc.enable()
    return spare
