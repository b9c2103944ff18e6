"""The `rendezvous` command (and `python -m rendezvous`), in a process of its own: the
start-up measures (rendezvous.cli.startup), then the command line (rendezvous.cli.main)."""

import sys

from .cli import startup


def main() -> int:
    spare = startup.prepare(sys.argv[1:])
    from .cli import main as cli

    return cli.main(spare=spare)


if __name__ == "__main__":
    sys.exit(main())
