"""Configuration: one option table, its checks, the timings, and where values come from.

Every option of every subcommand is declared once (`options.OPTIONS`); that declaration
feeds argparse, the `RENDEZVOUS_*` environment variables, the TOML config file's keys and
the typed `JoinConfig` the daemon runs with. Timings live in `Timings`, so tests shrink
them instead of patching module constants.

May import: `rendezvous.core`, `rendezvous.errors`. Nothing here opens a socket.
"""

from .join import JoinConfig, LogConfig, discovery_mode
from .options import DEFAULT_JOB, OPTIONS, Option, default_trainer_command
from .timings import Timings

__all__ = [
    "DEFAULT_JOB",
    "OPTIONS",
    "JoinConfig",
    "LogConfig",
    "Option",
    "Timings",
    "default_trainer_command",
    "discovery_mode",
]
