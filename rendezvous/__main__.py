"""The `rendezvous` command (and `python -m rendezvous`), in a process of its own."""

import gc
import os
import sys

GRPC_SETTINGS = {"GRPC_VERBOSITY": "ERROR", "GRPC_POLL_STRATEGY": "poll"}


def main() -> int:
    # asyncio imports ssl, for TLS that nothing in rendezvous speaks through Python (gRPC
    # brings its own), and ssl loads OpenSSL: with hashing deferred too (rendezvous.core.
    # digest), a waiting daemon without a token maps neither libssl nor libcrypto: 4.6 MiB
    # of resident memory and about 20 ms of every start. Only the command's own process goes
    # without ssl, until --metrics-port needs it (rendezvous.observe.metrics): code that imports the
    # package as a library keeps its ssl.
    sys.modules.setdefault("ssl", None)
    # The command line split as cli.split_command does, before cli (and all it imports) is.
    argv = sys.argv[1:]
    options = argv[:argv.index("--")] if "--" in argv else argv
    command = argv[len(options) + 1:]
    joins = "join" in options and not {"-h", "--help"} & set(options)
    # Importing what a daemon runs creates some 26,000 objects that live as long as the
    # process: modules, classes, functions. The cyclic collector, triggered every 700 new
    # ones, would traverse them about 60 times meanwhile (7% of a daemon's CPU to its
    # command's start) and find almost nothing to free. So it is off while they are
    # imported; then they are frozen, never traversed again, and it runs as usual.
    gc.disable()
    try:
        if joins and command:
            # Its first round's gate, forked now: a copy of this small, single-threaded
            # process, not an interpreter started later (rendezvous.launch.firstgate).
            from .launch.firstgate import fork_spare

            fork_spare()
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
        from .cli import deferred

        # Imported by protobuf and zeroconf, not used by the daemon (rendezvous.cli.deferred).
        deferred.defer("google.protobuf.internal.python_message")
        deferred.defer("ifaddr")
        from .cli import main as cli

        if joins:
            from .daemon import node  # noqa: F401  imported by `join` anyway
        import grpc  # noqa: F401  initialises its core, which reads the settings

        for name in grpc_settings:
            del os.environ[name]
    finally:
        gc.freeze()
        gc.enable()
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
