"""The `rendezvous` command line: arguments -> JoinConfig -> Node; errors -> exit codes."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Optional, Sequence

from . import __version__
from .config import DEFAULT_JOB, JoinConfig
from .settings import (
    CONFIG_VARIABLE,
    DEFAULT_CONFIG_FILE,
    Settings,
    build_settings,
    from_cli,
    load_settings,
    resolve_command,  # noqa: F401  (part of the CLI module's surface)
)
from .errors import (
    AddressError,
    ConfigError,
    CoordinatorError,
    LaunchError,
    MembershipError,
    RendezvousError,
    RendezvousTimeout,
)

log = logging.getLogger(__name__)

EXIT_CODES = f"""\
exit status:
  the command's own exit status once it has started (128+N if it died of signal N);
  before that:
  {ConfigError.exit_code}    invalid option
  {RendezvousTimeout.exit_code}    --timeout passed before all peers were there
  {MembershipError.exit_code}    this peer cannot join: the job is already running without it,
       or peers disagree on --expect
  {AddressError.exit_code}    no usable network address / port
  {CoordinatorError.exit_code}    the coordinator aborted the round or was lost after the freeze
  {LaunchError.exit_code}  the command could not be started
  130/143  stopped by SIGINT/SIGTERM while waiting
"""

JOIN_DESCRIPTION = """\
Find the other peers of JOB on the local network (mDNS/DNS-SD), agree on one ordered
member list (worker 0 = lowest address), and start COMMAND on every peer at the same
moment with TF_CONFIG, RENDEZVOUS_RANK, RENDEZVOUS_WORLD_SIZE, RENDEZVOUS_JOB and
RENDEZVOUS_COORDINATOR set. Run the same command on every node.

Without COMMAND the bundled MultiWorkerMirroredStrategy trainer runs
(`python -m trainer`); a COMMAND that starts with '-' is passed to it as options,
e.g. `rendezvous join --expect 2 -- --epochs 5`.

Every option can also come from the environment (RENDEZVOUS_EXPECT, RENDEZVOUS_JOB,
RENDEZVOUS_TF_PORT, ..., RENDEZVOUS_COMMAND split like a shell line) and from a TOML
config file (--config FILE, or RENDEZVOUS_CONFIG, or {default} if it exists) with keys
named like the options: expect = 3, job = "resnet", tf-port = 2222,
command = ["python", "train.py"]. The command line wins over the environment, the
environment over the file.
""".format(default=DEFAULT_CONFIG_FILE)


def _positive_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rendezvous",
        description="Zero-config rendezvous for multi-node TensorFlow training.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)

    join = commands.add_parser(
        "join",
        help="rendezvous with the peers of a job, then run a command on all of them at once",
        description=JOIN_DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="rendezvous join --expect N [options] [-- COMMAND [ARG ...]]",
    )
    # Defaults are None, meaning "not given": the environment or the config file may set it.
    join.add_argument("--expect", type=int, metavar="N",
                      help="number of peers in the job, this one included (the same on every peer; "
                           "required here, in RENDEZVOUS_EXPECT or in the config file)")
    join.add_argument("--job", metavar="NAME",
                      help=f"job name; peers of other jobs on the network are ignored (default: {DEFAULT_JOB})")
    join.add_argument("--config", metavar="FILE",
                      help=f"read options from this TOML file (default: ${CONFIG_VARIABLE}, else "
                           f"{DEFAULT_CONFIG_FILE} if it exists)")
    where = join.add_argument_group("network")
    where.add_argument("--address", metavar="IP",
                       help="advertise and listen on this local IP (default: the address of the "
                            "interface that carries the default route)")
    where.add_argument("--interface", metavar="NAME",
                       help="advertise the address of this interface, e.g. eth0")
    where.add_argument("--port", type=int, metavar="PORT",
                       help="port of this node's rendezvous gRPC server (default: any free port)")
    where.add_argument("--tf-port", type=int, metavar="PORT",
                       help="port for this node's TensorFlow worker (default: a free port, "
                            "checked on all interfaces as TensorFlow listens on all of them)")
    timing = join.add_argument_group("timing")
    timing.add_argument("--timeout", type=_positive_float, metavar="SECONDS",
                        help="give up if the command has not started after this long "
                             "(default: wait forever)")
    timing.add_argument("--stop-grace", type=_positive_float, metavar="SECONDS",
                        help="on SIGINT/SIGTERM, time the command gets between SIGTERM and "
                             "SIGKILL (default: 10)")
    out = join.add_argument_group("output")
    out.add_argument("-v", "--verbose", action="count", help="more log output (-vv: also zeroconf and gRPC)")
    out.add_argument("-q", "--quiet", action="store_true", default=None, help="only warnings and errors")
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Everything after the first '--' is the command, untouched by option parsing."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return argv, []


def config_from_args(args: argparse.Namespace, command: Sequence[str]) -> JoinConfig:
    """The JoinConfig of the command line alone (no environment, no config file)."""
    return build_settings(from_cli(vars(args), command)).join


def settings_from_args(args: argparse.Namespace, command: Sequence[str]) -> Settings:
    return load_settings(vars(args), command, os.environ, args.config)


def setup_logging(verbose: int, quiet: bool) -> None:
    level = logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d rendezvous %(levelname)s %(message)s", "%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if verbose < 2:
        for noisy in ("zeroconf", "grpc", "asyncio"):
            logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def main(argv: Optional[Sequence[str]] = None) -> int:
    options, command = split_command(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(options)
    try:
        settings = settings_from_args(args, command)
    except ConfigError as exc:
        print(f"rendezvous: error: {exc}", file=sys.stderr)
        return exc.exit_code
    setup_logging(settings.log.verbose, settings.log.quiet)
    if settings.config_file:
        log.debug("options from %s", settings.config_file)
    try:
        from .node import run_node  # imported here so that --help stays fast

        return asyncio.run(run_node(settings.join))
    except RendezvousError as exc:
        print(f"rendezvous: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
