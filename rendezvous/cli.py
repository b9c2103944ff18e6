"""The `rendezvous` command line: arguments -> JoinConfig -> Node; errors -> exit codes.

`join` takes its options from the command line, the environment and a config file
(rendezvous.settings); `peers` and `status` only look (rendezvous.show).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Optional, Sequence

from . import __version__
from .config import DEFAULT_JOB, LOG_FORMATS, JoinConfig, LogConfig, check_option
from .errors import (
    AddressError,
    ConfigError,
    CoordinatorError,
    LaunchError,
    MembershipError,
    NoDaemonError,
    RendezvousError,
    RendezvousTimeout,
)
from .settings import (
    CONFIG_VARIABLE,
    DEFAULT_CONFIG_FILE,
    Settings,
    build_settings,
    from_cli,
    load_settings,
    parse_seconds,
    parse_whole,
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
  129/130/143  stopped by SIGHUP/SIGINT/SIGTERM while waiting
"""

JOIN_DESCRIPTION = f"""\
Find the other peers of JOB on the local network (mDNS/DNS-SD), agree on one ordered
member list (worker 0 = lowest address), and start COMMAND on every peer at the same
moment with TF_CONFIG, RENDEZVOUS_RANK, RENDEZVOUS_WORLD_SIZE, RENDEZVOUS_JOB and
RENDEZVOUS_COORDINATOR set. Run the same command on every node.

Without COMMAND the bundled MultiWorkerMirroredStrategy trainer runs
(`python -m trainer`); a COMMAND that starts with '-' is passed to it as options,
e.g. `rendezvous join --expect 2 -- --epochs 5`.

Every option can also come from an environment variable (RENDEZVOUS_EXPECT,
RENDEZVOUS_JOB, RENDEZVOUS_TF_PORT, ..., RENDEZVOUS_COMMAND split like a shell line)
and from a TOML config file: --config FILE, else ${CONFIG_VARIABLE}, else
{DEFAULT_CONFIG_FILE} if it exists. Its keys are the option names:
  expect = 3
  job = "resnet"
  tf-port = 2222
  command = ["python", "/srv/train.py"]
The command line wins over the environment, the environment over the file.
"""

STATUS_EXIT_CODES = f"""\
exit status:
  0    every daemon found answered
  {NoDaemonError.exit_code}    no daemon runs here (of JOB), or one did not answer
"""


# The same text forms as in RENDEZVOUS_* variables; the range is checked with the value.
def _seconds(text: str) -> float:
    value = parse_seconds(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}")
    return value


def _whole(text: str) -> int:
    value = parse_whole(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    return value


def _output_options() -> argparse.ArgumentParser:
    """-v, -q and --log-format, shared by every subcommand. None = not given."""
    parent = argparse.ArgumentParser(add_help=False)
    out = parent.add_argument_group("output")
    out.add_argument("-v", "--verbose", action="count",
                     help="more log output: -v debug lines, -vv also zeroconf's and gRPC's "
                          "(at most -vv: more is an error)")
    out.add_argument("-q", "--quiet", action="store_true", default=None, help="only warnings and errors")
    out.add_argument("--log-format", choices=LOG_FORMATS,
                     help="auto (default): plain lines, plus a live progress line on a terminal; "
                          "plain: plain single lines only; json: one JSON object per line")
    return parent


def _add_address_options(group: argparse._ArgumentGroup, verb: str) -> None:
    group.add_argument("--address", metavar="IP",
                       help=f"{verb} on this local IP (default: the address of the "
                            "interface that carries the default route)")
    group.add_argument("--interface", metavar="NAME",
                       help=f"{verb} on the address of this interface, e.g. eth0")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rendezvous",
        description="Zero-config rendezvous for multi-node TensorFlow training.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    output = _output_options()

    join = commands.add_parser(
        "join",
        parents=[output],
        help="rendezvous with the peers of a job, then run a command on all of them at once",
        description=JOIN_DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="rendezvous join --expect N [options] [-- COMMAND [ARG ...]]",
    )
    # Defaults are None, meaning "not given": the environment or the config file may set it.
    join.add_argument("--expect", type=_whole, metavar="N",
                      help="number of peers in the job, this one included (the same on every peer; "
                           "required here, in RENDEZVOUS_EXPECT or in the config file)")
    join.add_argument("--job", metavar="NAME",
                      help=f"job name; peers of other jobs on the network are ignored (default: {DEFAULT_JOB})")
    join.add_argument("--config", metavar="FILE",
                      help=f"read options from this TOML file (default: ${CONFIG_VARIABLE}, else "
                           f"{DEFAULT_CONFIG_FILE} if it exists)")
    where = join.add_argument_group("network")
    _add_address_options(where, "advertise and listen")
    where.add_argument("--port", type=_whole, metavar="PORT",
                       help="port of this node's rendezvous gRPC server (default: any free port)")
    where.add_argument("--tf-port", type=_whole, metavar="PORT",
                       help="port for this node's TensorFlow worker (default: a free port, "
                            "checked on all interfaces as TensorFlow listens on all of them)")
    timing = join.add_argument_group("timing")
    timing.add_argument("--timeout", type=_seconds, metavar="SECONDS",
                        help="give up if the command has not started after this long "
                             "(default: wait forever)")
    timing.add_argument("--stop-grace", type=_seconds, metavar="SECONDS",
                        help="on SIGINT/SIGTERM, time the command gets between SIGTERM and "
                             "SIGKILL (default: 10)")

    peers = commands.add_parser(
        "peers",
        parents=[output],
        help="list the rendezvous nodes on the network, of every job",
        description="Listen on the network for a few seconds and list every rendezvous node "
                    "heard: node id, address, gRPC port, job, --expect and phase.",
    )
    peers.add_argument("--seconds", type=_seconds, default=3.0, metavar="SECONDS",
                       help="how long to listen (default: 3)")
    peers.add_argument("--job", metavar="NAME", help="only the nodes of this job")
    peers.add_argument("--json", action="store_true", help="a JSON list, for scripts")
    _add_address_options(peers.add_argument_group("network"), "listen")

    status = commands.add_parser(
        "status",
        parents=[output],
        help="show what the rendezvous daemons on this machine are doing",
        description="Ask each rendezvous daemon running on this machine for its phase, job, "
                    "round, member list with ranks, coordinator, TF_CONFIG and trainer.",
        epilog=STATUS_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("--job", metavar="NAME", help="only the daemon of this job")
    status.add_argument("--json", action="store_true", help="a JSON list, one object per daemon, for scripts")
    status.add_argument("--timeout", type=_seconds, default=3.0, metavar="SECONDS",
                        help="how long to wait for each daemon's answer (default: 3)")
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


def _report_error(exc: RendezvousError, log_format: str) -> int:
    if log_format == "json":
        log.error("%s", exc)  # one more JSON line for the log shipper
    else:
        print(f"rendezvous: error: {exc}", file=sys.stderr)
    return exc.exit_code


def _join(args: argparse.Namespace, command: Sequence[str]) -> int:
    try:
        settings = settings_from_args(args, command)
    except ConfigError as exc:
        return _report_error(exc, "plain")
    from .console import setup_logging  # imported here, like the node: --help stays fast
    from .notify import SystemdNotifier
    from .report import Reporters

    console = setup_logging(settings.log)
    if settings.config_file:
        log.debug("options from %s", settings.config_file)
    notifier = SystemdNotifier.from_environ(os.environ, os.getpid())
    reporters = Reporters([console] + ([notifier] if notifier else []))
    try:
        from .node import run_node

        return asyncio.run(run_node(settings.join, reporters))
    except RendezvousError as exc:
        return _report_error(exc, settings.log.log_format)
    except KeyboardInterrupt:
        return 130
    finally:
        reporters.close()


def _look(args: argparse.Namespace) -> int:
    from .console import setup_logging
    from .show import list_peers, show_status

    try:
        # The same checks as for join: -vvv is an error, not -vv.
        log_config = LogConfig(verbose=args.verbose or 0, quiet=bool(args.quiet), log_format=args.log_format or "auto")
        check_option("timeout", args.seconds if args.subcommand == "peers" else args.timeout,
                     "--seconds" if args.subcommand == "peers" else "--timeout")
    except ConfigError as exc:
        return _report_error(exc, "plain")
    setup_logging(log_config)
    try:
        if args.subcommand == "peers":
            print(list_peers(args.seconds, args.address, args.interface, args.job, args.json))
            return 0
        text, errors = show_status(args.job, args.timeout, args.json)
        print(text)
        for error in errors:
            print(f"rendezvous: error: {error}", file=sys.stderr)
        return NoDaemonError.exit_code if errors else 0
    except RendezvousError as exc:
        return _report_error(exc, log_config.log_format)
    except KeyboardInterrupt:
        return 130


def _subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return commands.choices[name]


def main(argv: Optional[Sequence[str]] = None) -> int:
    options, command = split_command(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(options)
    # Errors about a subcommand's arguments come with that subcommand's usage.
    subparser = _subcommand_parser(parser, args.subcommand)
    if unknown:
        subparser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.subcommand == "join":
        return _join(args, command)
    if command:
        subparser.error(f"{args.subcommand} takes no command after --")
    return _look(args)


if __name__ == "__main__":
    sys.exit(main())
