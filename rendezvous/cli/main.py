"""The `rendezvous` command line: arguments -> JoinConfig -> Node; errors -> exit codes.

`join` takes its options from the command line, the environment and a config file
(rendezvous.config.sources); `peers` and `status` only look (rendezvous.cli.show).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import textwrap
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from .. import __version__
from ..config.join import LogConfig
from ..config.options import BY_NAME, LOG_OPTIONS, OPTIONS, SUBCOMMAND_OPTIONS, Kind, Option
from ..config.timings import Timings
from ..core.tf_config import COMMAND_VARIABLES, OPTIONAL_VARIABLES
from ..errors import (
    AddressError,
    CommandNotExecutable,
    ConfigError,
    CoordinatorError,
    JobStopped,
    LaunchError,
    MembershipError,
    NoDaemonError,
    RendezvousError,
    RendezvousTimeout,
    RequestRefused,
)
from ..config.sources import CONFIG_VARIABLE, DEFAULT_CONFIG_FILE, Settings, load_settings, look_options, read_text

if TYPE_CHECKING:
    from ..launch.firstgate import Spare

log = logging.getLogger(__name__)

EXIT_CODES = f"""\
exit status:
  the command's own exit status once it has started (128+N if it died of signal N);
  before that:
  {ConfigError.exit_code}    invalid option
  {RendezvousTimeout.exit_code}    --timeout passed before all peers were there
  {MembershipError.exit_code}    this peer cannot join: the job is already running without it,
       its --expect differs from the coordinator's, the preflight found the nodes differ,
       or the job wants a token this node lacks
  {AddressError.exit_code}    no usable network address / port
  {CoordinatorError.exit_code}    the coordinator aborted the round or was lost after the freeze
  {JobStopped.exit_code}    `rendezvous stop` ended the job (also once the command has started)
  {LaunchError.exit_code}  the command was not found ({CommandNotExecutable.exit_code}: found, but not executable)
  129/130/143  stopped by SIGHUP/SIGINT/SIGTERM while waiting
"""

JOIN_DESCRIPTION = textwrap.fill(
    "Find the other peers of JOB on the local network (mDNS/DNS-SD) or through seeds (--peer, where "
    "multicast does not pass), agree on one ordered member list (worker 0 = lowest address), and start "
    "COMMAND on every peer at the same moment with " + ", ".join(
        v for v in COMMAND_VARIABLES if v not in OPTIONAL_VARIABLES) + " set (and "
    + ", ".join(OPTIONAL_VARIABLES) + " with --gpus and --data-interface). Run the same command on every node.",
    88, break_on_hyphens=False) + f"""


Without COMMAND the bundled MultiWorkerMirroredStrategy trainer runs
(`python -m trainer`); a COMMAND that starts with '-' is passed to it as options,
e.g. `rendezvous join --expect 2 -- --epochs 5`.
"""

# Each group of `join --help`: what it is for, and one example.
GROUPS = {
    "job": "which job this node belongs to\n  e.g. rendezvous join --expect 3 --job resnet --timeout 600",
    "network": "where this node is reached\n  e.g. rendezvous join --expect 3 --interface eth0 --tf-port 2222",
    "launch": "the command and how it is stopped\n  e.g. rendezvous join --expect 3 --stop-grace 30 -- python train.py",
    "preflight": (
        "checks that every node runs the same environment, before the command starts\n"
        "  e.g. rendezvous join --expect 3 --same-file train.py -- python train.py"
    ),
    "output": "what is logged, and how\n  e.g. rendezvous join --expect 3 -v --log-format json",
    "configuration": (
        "options from the environment and a file\n"
        "  Every option can also be a RENDEZVOUS_* variable (RENDEZVOUS_EXPECT,\n"
        "  RENDEZVOUS_TF_PORT, ...; RENDEZVOUS_COMMAND is split like a shell line) or a key\n"
        f"  of a TOML file: --config FILE, else ${CONFIG_VARIABLE}, else {DEFAULT_CONFIG_FILE}\n"
        "  if it exists. The command line wins over the environment, the environment over\n"
        "  the file.\n"
        "  e.g. /etc/rendezvous/rendezvous.conf:  expect = 3\n"
        '                                        command = ["python", "/srv/train.py"]'
    ),
}

STATUS_EXIT_CODES = f"""\
exit status:
  0    every daemon found answered
  {NoDaemonError.exit_code}    no daemon runs here (of JOB), or one did not answer; with --job: no node
       of JOB was heard on the network (or through --peer), or its coordinator did not answer
  {RequestRefused.exit_code}    with --job: the job needs a token (--token-file), or another one
  141  the output's reader went away (| head), as for a program SIGPIPE ends
"""

STOP_EXIT_CODES = f"""\
exit status:
  0    every member of the job ended
  {RendezvousTimeout.exit_code}    --timeout passed before the job was found, took the stop, or every member ended
  {RequestRefused.exit_code}    the job refused the stop: it needs a token (--token-file), or another one
  {NoDaemonError.exit_code}    no node of JOB was heard on the network (or through --peer), or none coordinates it

Each member's `rendezvous join` then exits with {JobStopped.exit_code}, whatever its command's status,
and logs who asked: this host's address, user name and --reason. No restart follows.
"""

STOP_DESCRIPTION = """\
Stop the job NAME on every node it runs on, from any host (member or not): find its
coordinator as `status --job` does (mDNS, or --peer seeds), ask it to end the job, and
wait until every member has ended. Every member stops its command (SIGTERM to its process
group, SIGKILL after --stop-grace) and no restart round follows. A job with a token
(--token-file on its nodes) takes only a stop signed with the same token; an unsigned or
replayed one is refused and the job runs on.
"""

STATUS_DESCRIPTION = """\
Without --job: ask each rendezvous daemon running on this machine for its phase, job,
round, member list with ranks, coordinator, TF_CONFIG and trainer.

With --job NAME: find the job's coordinator on the network (from any host, member or
not) and show the whole job: every member's address, node id, rank, phase, round,
command uptime, exit code and latest training progress (stragglers marked), the job's
round, restart count and why the last round ended.
"""


_TEXT_FORMS = {
    Kind.WHOLE: "a whole number",
    Kind.SECONDS: "a number of seconds",
}


def _text_type(option: Option) -> Callable[[str], object]:
    """argparse's `type` for an option: the same text forms as its RENDEZVOUS_* variable;
    the range is checked later with the value, naming its source."""
    def convert(text: str) -> object:
        try:
            value = read_text(option.kind, text)
        except ValueError as exc:  # argparse would only say "invalid value"
            raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None
        if option.kind in _TEXT_FORMS and isinstance(value, str):
            raise argparse.ArgumentTypeError(f"not {_TEXT_FORMS[option.kind]}: {text!r}")
        return value

    convert.__name__ = option.kind.value
    return convert


def _add_option(group: argparse._ActionsContainer, option: Option) -> None:
    """One option of the table as a flag. Its default is None, meaning "not given": the
    environment or the config file may set it."""
    flags = [option.short, option.flag] if option.short else [option.flag]
    if option.kind is Kind.COUNT:
        group.add_argument(*flags, dest=option.name, action="count", help=option.help_text)
    elif option.kind is Kind.FLAG:
        group.add_argument(*flags, dest=option.name, action="store_true", default=None, help=option.help_text)
    elif option.kind is Kind.LIST:  # repeatable, and each may hold several: a,b
        group.add_argument(*flags, dest=option.name, action="extend", type=_text_type(option),
                           metavar=option.metavar, help=option.help_text)
    else:
        group.add_argument(*flags, dest=option.name, type=_text_type(option), metavar=option.metavar, help=option.help_text)


def _output_options() -> argparse.ArgumentParser:
    """-v, -q and --log-format, shared by every subcommand."""
    parent = argparse.ArgumentParser(add_help=False)
    out = parent.add_argument_group("output")
    for name in LOG_OPTIONS:
        _add_option(out, BY_NAME[name])
    return parent


def _add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    """A subcommand's options from the table, in groups named as their `group`."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for option in options:
        if option.group == "look":
            _add_option(parser, option)
        else:
            if option.group not in groups:
                groups[option.group] = parser.add_argument_group(option.group)
            _add_option(groups[option.group], option)


def _join_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    join = commands.add_parser(
        "join",
        help="rendezvous with the peers of a job, then run a command on all of them at once",
        description=JOIN_DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="rendezvous join --expect N|MIN:MAX [options] [-- COMMAND [ARG ...]]",
    )
    groups = {name: join.add_argument_group(name, about) for name, about in GROUPS.items()}
    for option in OPTIONS:
        if option.kind is not Kind.COMMAND:
            _add_option(groups[option.group], option)
    groups["configuration"].add_argument(
        "--config", metavar="FILE",
        help=f"read options from this TOML file (default: ${CONFIG_VARIABLE}, else "
             f"{DEFAULT_CONFIG_FILE} if it exists)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rendezvous",
        description="Zero-config rendezvous for multi-node TensorFlow training.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    output = _output_options()
    _join_parser(commands)

    peers = commands.add_parser(
        "peers",
        parents=[output],
        help="list the rendezvous nodes on the network, of every job",
        description="Listen on the network for a few seconds (or ask seeds, --peer) and list "
                    "every rendezvous node heard: node id, address, gRPC port, job, --expect and phase.",
    )
    _add_options(peers, SUBCOMMAND_OPTIONS["peers"])

    status = commands.add_parser(
        "status",
        parents=[output],
        help="show what the rendezvous daemons on this machine, or a whole job, are doing",
        description=STATUS_DESCRIPTION,
        epilog=STATUS_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_options(status, SUBCOMMAND_OPTIONS["status"])

    stop = commands.add_parser(
        "stop",
        parents=[output],
        help="stop a running job on every node, from any host",
        description=STOP_DESCRIPTION,
        epilog=STOP_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="rendezvous stop --job NAME [options]",
    )
    _add_options(stop, SUBCOMMAND_OPTIONS["stop"])
    return parser


def split_command(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Everything after the first '--' is the command, untouched by option parsing."""
    argv = list(argv)
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return argv, []


def settings_from_args(args: argparse.Namespace, command: Sequence[str]) -> Settings:
    return load_settings(vars(args), command, os.environ, args.config)


def _report_error(exc: RendezvousError, log_format: str) -> int:
    """Says why, and returns the error's exit code, also when nothing can be said: stderr
    a pipe whose reader is gone (`| head`) must not turn the job's exit code into 1."""
    if log_format == "json":
        log.error("%s", exc)  # one more JSON line for the log shipper (logging bears a broken stream)
    else:
        try:
            # A stop is what someone asked for, not an error of this node.
            print(f"rendezvous: {'' if isinstance(exc, JobStopped) else 'error: '}{exc}", file=sys.stderr)
        except (OSError, ValueError):  # a broken pipe or a closed stream
            pass
    return exc.exit_code


def _join(args: argparse.Namespace, command: Sequence[str], spare: Optional[Spare] = None) -> int:
    try:
        settings = settings_from_args(args, command)
    except ConfigError as exc:
        return _report_error(exc, "plain")
    from ..observe.console import setup_logging  # imported here, like the node: --help stays fast
    from ..observe.notify import SystemdNotifier
    from ..observe.report import Reporters

    console = setup_logging(settings.log)
    if settings.config_file:
        log.debug("options from %s", settings.config_file)
    if settings.from_slurm:
        log.info("from the Slurm job step: %s", "; ".join(settings.from_slurm))
    notifier = SystemdNotifier.from_environ(os.environ, os.getpid())
    reporters = Reporters([console] + ([notifier] if notifier else []))
    try:
        from ..daemon.node import run_node

        return asyncio.run(run_node(settings.join, reporters, settings.sources.get("expect", "--expect"), spare))
    except RendezvousError as exc:
        return _report_error(exc, settings.log.log_format)
    except KeyboardInterrupt:
        return 130
    finally:
        reporters.close()


def _look(args: argparse.Namespace) -> int:
    from ..observe.console import setup_logging
    from .finding import lookup_from
    from .show import list_peers, show_job, show_status
    from .stop import run_stop

    try:
        # The same checks as for join: -vvv is an error, not -vv; so is --job 'bad name!'.
        log_config = LogConfig(**{n: getattr(args, n) for n in LOG_OPTIONS if getattr(args, n) is not None})
        given = look_options(vars(args), args.subcommand)
    except ConfigError as exc:
        return _report_error(exc, "plain")
    setup_logging(log_config)
    job, address, interface, as_json = given["job"], given["address"], given["interface"], given["json"]
    try:
        if args.subcommand == "peers":
            print(list_peers(given["seconds"], address, interface, job, as_json, given["peers"], given["discovery"]))
            return 0
        if args.subcommand == "stop":
            run_stop(given, sys.stdout)
            return 0
        timeout = given["answer_timeout"]
        if job is not None and not given["local"]:
            show_job(job, address, interface, timeout, as_json, given["watch"], interval=Timings().watch_interval,
                     lookup=lookup_from(given, job))
            return 0
        text, errors = show_status(job, timeout, as_json, given["token_file"])
        print(text)
        for error in errors:
            print(f"rendezvous: error: {error}", file=sys.stderr)
        return NoDaemonError.exit_code if errors else 0
    except RendezvousError as exc:
        return _report_error(exc, log_config.log_format)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """stdout's reader went away (`rendezvous status | head -1`): end quietly, with the
    status of a program killed by SIGPIPE, as `cat` would. stdout points at /dev/null from
    here, so that the exit's flush finds nothing to complain of."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 128 + signal.SIGPIPE


def _subcommand_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    chosen: argparse.ArgumentParser = commands.choices[name]
    return chosen


def main(argv: Optional[Sequence[str]] = None, spare: Optional[Spare] = None) -> int:
    """`spare`: the first round's gate, forked as the process started (rendezvous.cli.startup)."""
    options, command = split_command(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args, unknown = parser.parse_known_args(options)
    # Errors about a subcommand's arguments come with that subcommand's usage.
    subparser = _subcommand_parser(parser, args.subcommand)
    if unknown:
        subparser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.subcommand == "join":
        return _join(args, command, spare)
    if command:
        subparser.error(f"{args.subcommand} takes no command after --")
    if args.subcommand == "status" and args.watch and (args.job is None or args.local):
        subparser.error("--watch needs --job NAME (and no --local)")
    return _look(args)


if __name__ == "__main__":
    sys.exit(main())
