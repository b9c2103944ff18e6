"""The `rendezvous` command (and `python -m rendezvous`), in a process of its own."""

import sys


def main() -> int:
    # asyncio imports ssl, for TLS that nothing in rendezvous speaks through Python (gRPC
    # brings its own), and ssl loads OpenSSL: with hashing deferred too (rendezvous.core.
    # digest), a waiting daemon without a token maps neither libssl nor libcrypto: 4.6 MiB
    # of resident memory and about 20 ms of every start. Only the command's own process goes
    # without ssl, until --metrics-port needs it (rendezvous.metrics): code that imports the
    # package as a library keeps its ssl.
    sys.modules.setdefault("ssl", None)
    from .cli import main as run

    return run()


if __name__ == "__main__":
    sys.exit(main())
