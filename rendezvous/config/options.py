"""Every option of every subcommand, declared once and validated once.

`OPTIONS` is the single table of `rendezvous join`: each entry gives an option's name, how its
text is read, its check, default, help and group. The command line (rendezvous.cli.main), the
RENDEZVOUS_* variables and the TOML file (rendezvous.config.sources), and the frozen
`JoinConfig` and `LogConfig` (rendezvous.config.join) are all derived from it: a new option is
one entry here plus its use. `peers` and `status` take entries of the same table (`--job`,
`--peer`, `--address`, ...) with the same checks, and a few of their own (`LOOK_OPTIONS`).

A help text names its default as `{default}`, filled in from the entry's default, so that the
default is written once.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Optional

from ..core.preflight import ALLOWABLE
from ..core.record import record, replace
from ..core.round import MIN_LIVENESS_TIMEOUT, Policy
from ..core.seeds import DEFAULT_PORT
from ..errors import ConfigError
from . import checks
from .checks import Check
from .timings import TIMING_NAMES, Timings, timing_key

DEFAULT_JOB = "default"
SYNC_MAX_BYTES = 20 << 30
OUTPUT_MAX_BYTES = 1 << 30


def default_trainer_command() -> tuple[str, ...]:
    """The bundled MultiWorkerMirroredStrategy trainer, run by the current Python."""
    return (sys.executable, "-m", "trainer")


class Kind(Enum):
    """How an option's value is written in text, and so how it is read."""

    WHOLE = "whole"
    SECONDS = "seconds"
    TEXT = "text"
    FLAG = "flag"
    COUNT = "count"  # -v, -vv; as a variable or key: the number
    COMMAND = "command"
    CODES = "codes"  # exit codes: 2,126,127
    SIZE = "size"  # peers: 3, or 2:4
    TIMINGS = "timings"
    LIST = "list"  # repeatable flag; as a variable: items separated by commas; as a key: a list


@record
class Option:
    name: str  # the JoinConfig / LogConfig field: tf_port
    kind: Kind
    check: Check
    default: object  # a value, or what makes one (Timings)
    help: str  # `{default}` stands for the default
    group: str  # job, network, launch, output or configuration: its place in --help
    metavar: Optional[str] = None
    short: Optional[str] = None
    long: Optional[str] = None  # a flag given once per value reads better singular: --peer

    @property
    def flag(self) -> str:
        """The command-line spelling: tf_port -> --tf-port."""
        return self.long or option_name(self.name)

    @property
    def help_text(self) -> str:
        """The help with its default written in."""
        return self.help.replace("{default}", show_default(self.default))


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def show_default(value: object) -> str:
    """A default as the help shows it: 3.0 as 3, exit codes as 2,126,127."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, frozenset):
        return ",".join(map(str, sorted(value)))
    return str(value)


#: Every option of `rendezvous join`. `command` has no flag: it is what follows `--`.
OPTIONS: tuple[Option, ...] = (
    Option("expect", Kind.SIZE, checks.expect_problem, None, group="job", metavar="N|MIN:MAX",
           help="number of peers in the job, this one included (the same on every peer; "
                "required here, in RENDEZVOUS_EXPECT or in the config file). MIN:MAX makes the "
                "job elastic: a round starts at once with MAX peers, or with at least MIN once "
                "no new peer has come for --settle seconds"),
    Option("job", Kind.TEXT, checks.job_problem, DEFAULT_JOB, group="job", metavar="NAME",
           help="job name; peers of other jobs on the network are ignored (default: {default})"),
    Option("command", Kind.COMMAND, checks.command_problem, default_trainer_command, group="launch",
           metavar="COMMAND", help="the command to run on every peer (default: the bundled trainer)"),
    Option("timeout", Kind.SECONDS, checks.timeout_problem, None, group="job", metavar="SECONDS",
           help="give up if the job has not formed (its member list frozen) after this long; a "
                "round frozen in time goes on to its start, however long a --sync-dir copy takes "
                "(default: wait forever)"),
    Option("settle", Kind.SECONDS, checks.grace_problem, 3.0, group="job", metavar="SECONDS",
           help="with --expect MIN:MAX, how long a round with at least MIN peers waits for "
                "another one before it starts (default: {default})"),
    Option("address", Kind.TEXT, checks.address_problem, None, group="network", metavar="IP",
           help="advertise and listen on this local IP, and use its family only (default: the "
                "address of the interface that carries the default route, and on a dual-stack "
                "host its IPv6 one too, for a job that needs IPv6)"),
    Option("interface", Kind.TEXT, checks.interface_problem, None, group="network", metavar="NAME",
           help="advertise and listen on the address of this interface, e.g. eth0 (its IPv4 "
                "one, and its IPv6 one too for a job that needs IPv6)"),
    Option("data_interface", Kind.TEXT, checks.interface_problem, None, group="network", metavar="NAME",
           help="a separate network for the training traffic, e.g. eth1: the TensorFlow workers "
                "reach this node at that interface's address (TF_CONFIG), and NCCL and Gloo use "
                "it (NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, unless set); discovery and the "
                "rendezvous stay on --address/--interface. Give it on every node or on none "
                "(default: the training traffic uses the rendezvous address)"),
    Option("data_address", Kind.TEXT, checks.address_problem, None, group="network", metavar="IP",
           help="like --data-interface, naming the data network by this node's address on it"),
    Option("port", Kind.WHOLE, checks.port_problem, None, group="network", metavar="PORT",
           help=f"port of this node's rendezvous gRPC server; 0: any free port (default: "
                f"{DEFAULT_PORT}, or any free port when another daemon of this host has it)"),
    Option("peers", Kind.LIST, checks.peers_problem, (), group="network", metavar="HOST[:PORT]", long="--peer",
           help="where multicast does not pass: a node to exchange adverts with (a seed); "
                "repeat it, or give a name that resolves to several addresses. Seeds need not "
                "list every node, only reach them through each other (default port: "
                f"{DEFAULT_PORT})"),
    Option("discovery", Kind.TEXT, checks.join_discovery_problem, None, group="network", metavar="MODE",
           help="how peers are found: mdns (multicast on the local link), unicast (through "
                "--peer seeds), both, slurm (inside a Slurm job step: --expect, --job, the seeds "
                "and --allow-host from the step, no multicast; options given still win) or auto "
                "(default: slurm inside a Slurm job step, else both with --peer, else mdns)"),
    Option("allow_hosts", Kind.LIST, checks.hosts_problem, (), group="network", metavar="HOST", long="--allow-host",
           help="only peers at these hosts' addresses take part: adverts and Joins from any other "
                "address are refused; repeat it, or give a name with several addresses (default: "
                "any host; under Slurm, the step's nodes)"),
    Option("tf_port", Kind.WHOLE, checks.port_problem, 0, group="network", metavar="PORT",
           help="port for this node's TensorFlow worker (default: a free port, checked on "
                "all interfaces as TensorFlow listens on all of them)"),
    Option("metrics_port", Kind.WHOLE, checks.metrics_port_problem, None, group="network", metavar="PORT",
           help="serve Prometheus metrics (phase, round, restarts, members, command uptime and "
                "exit code, training progress, the last failure) at http://ADDRESS:PORT/metrics on "
                "this node's address (default: off)"),
    Option("token_file", Kind.TEXT, checks.token_file_problem, None, group="job", metavar="PATH",
           help="a file (mode 600, owned by you) holding the job's shared secret: only peers with "
                "the same secret join, and every rendezvous message is signed with it (default: "
                "none, and the job is open to anyone on the network)"),
    Option("stop_grace", Kind.SECONDS, checks.grace_problem, 10.0, group="launch", metavar="SECONDS",
           help="when the command is stopped (SIGINT/SIGTERM to rendezvous), time it gets "
                "between SIGTERM and SIGKILL (default: {default})"),
    Option("abort_grace", Kind.SECONDS, checks.grace_problem, 3.0, group="launch", metavar="SECONDS",
           help="when a round is aborted (a command failed, a node was lost or frozen), time "
                "the commands get between SIGTERM and SIGKILL: a broken collective saves nothing "
                "by waiting (default: {default})"),
    Option("prewarm", Kind.TEXT, checks.prewarm_problem, None, group="launch", metavar="MODULES",
           help="start the command's Python early, import these modules (comma-separated) and "
                "wait, so that every round's command, restarts included, starts with them "
                "imported; a spare waits for the next round while one runs. auto (default): "
                "tensorflow, when the command is a Python running a script or a module and it "
                "has TensorFlow; none: start the command the plain way"),
    Option("max_restarts", Kind.WHOLE, checks.restarts_problem, 3, group="launch", metavar="N",
           help="after a failure (a command exits non-zero, a node is lost or frozen), stop the "
                "command on every node and start a new round this many times at most; 0: never "
                "(default: {default})"),
    Option("no_restart_on", Kind.CODES, checks.codes_problem, Policy.no_restart_on, group="launch",
           metavar="CODES",
           help="exit codes a restart cannot fix: a command exiting with one ends the job on every "
                "node with that code (default: {default}; '' for none)"),
    Option("liveness_timeout", Kind.SECONDS, checks.liveness_problem, 5.0, group="launch",
           metavar="SECONDS",
           help="a node not heard from this long while the commands run (frozen, cut off), or a "
                "command stopped this long, fails the round; the coordinator's value rules every "
                f"member of the round (at least {MIN_LIVENESS_TIMEOUT:g}; default: {{default}})"),
    Option("same_file", Kind.LIST, checks.paths_problem, (), group="preflight", metavar="PATH",
           help="a file that must be the same on every node, e.g. the training script: the job "
                "is refused when its SHA-256 differs (repeatable)"),
    Option("allow_mismatch", Kind.LIST, checks.mismatches_problem, (), group="preflight", metavar="KIND",
           help=f"only warn when the nodes differ in this way: {', '.join(ALLOWABLE)} (repeatable). "
                "A different TensorFlow major.minor, or GPU count with --gpus all, is always refused"),
    Option("python", Kind.TEXT, checks.interpreter_problem, None, group="preflight", metavar="PATH",
           help="the interpreter the command runs, whose Python and TensorFlow versions are "
                "compared (default: the command's, when it starts with python or a script run "
                "by one; else the one running rendezvous)"),
    Option("gpus", Kind.TEXT, checks.gpus_problem, "all", group="preflight", metavar="all|min|N|none",
           help="how many GPUs each node's command uses, as CUDA_VISIBLE_DEVICES (the same on "
                "every node): all of them ({default}; nodes with different GPU counts are "
                "refused), min (as many as the node with the fewest has: a mixed fleet), N "
                "(exactly N; a node with fewer is refused) or none (train on the CPU)"),
    Option("sync_dir", Kind.TEXT, checks.sync_dir_problem, None, group="launch", metavar="DIR",
           help="before every launch, make DIR on every node a copy of the newest one (the one "
                "the previous round's chief wrote), and after the job succeeds, of the chief's: "
                "point the command's checkpoints (e.g. the trainer's --backup-dir) at DIR to "
                "resume without shared storage (DIR need not exist yet; its parent must be "
                "writable: the copy is staged beside it)"),
    Option("sync_max_bytes", Kind.WHOLE, checks.bytes_problem, SYNC_MAX_BYTES, group="launch", metavar="BYTES",
           help=f"refuse to sync a --sync-dir holding more than this (default: {{default}}, "
                f"{SYNC_MAX_BYTES >> 30} GiB)"),
    Option("output_dir", Kind.TEXT, checks.output_dir_problem, None, group="launch", metavar="DIR",
           help="also write each round's output of the command (stdout and stderr, as the terminal "
                "shows them) to DIR/<job>/round-<N>.<rank>.log; the log says where (default: off, "
                "the terminal or journal only)"),
    Option("output_max_bytes", Kind.WHOLE, checks.bytes_problem, OUTPUT_MAX_BYTES, group="launch", metavar="BYTES",
           help=f"with --output-dir, the most one round's file keeps, the newest output: past half of it "
                f"the file moves to <file>.1 and starts again (default: {{default}}, {OUTPUT_MAX_BYTES >> 30} GiB)"),
    Option("output_keep_rounds", Kind.WHOLE, checks.keep_rounds_problem, 10, group="launch", metavar="N",
           help="with --output-dir, keep the files of the last N rounds of the job, remove older ones "
                "(default: {default})"),
    Option("verbose", Kind.COUNT, checks.verbose_problem, 0, group="output", short="-v",
           help="more log output: -v debug lines, -vv also zeroconf's and gRPC's (at most -vv: "
                "more is an error)"),
    Option("quiet", Kind.FLAG, checks.flag_problem, False, group="output", short="-q",
           help="only warnings and errors"),
    Option("log_format", Kind.TEXT, checks.log_format_problem, "auto", group="output", metavar="FORMAT",
           help="{default} (default): plain lines, plus a live progress line on a terminal; plain: "
                "plain single lines only; json: one JSON object per line"),
    Option("timings", Kind.TIMINGS, checks.timings_problem, Timings, group="configuration",
           metavar="NAME=SECONDS,...",
           help="advanced: change the daemon's internal waits, e.g. keepalive=2,suspect-after=1 "
                f"(names: {', '.join(map(timing_key, TIMING_NAMES))})"),
)

BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
LOG_OPTIONS = tuple(o.name for o in OPTIONS if o.group == "output")
JOIN_OPTIONS = tuple(o.name for o in OPTIONS if o.group != "output")
# Labels for values that are not given as an option of their own.
_LABELS = {"command": "the command to run"}


def check_option(name: str, value: object, label: Optional[str] = None) -> None:
    """Raise ConfigError naming `label` (the option by default) and the value if it is bad."""
    check_value(BY_NAME[name], value, label or _LABELS.get(name))


def check_value(option: Option, value: object, label: Optional[str] = None) -> None:
    """Raise ConfigError naming `label` (the option's flag by default) if `value` is bad."""
    problem = option.check(value)
    if problem is not None:
        raise ConfigError(f"{label or option.flag} {problem}")


# -- `peers` and `status`: they look, change nothing, and read no variable or file ----------


def _look(name: str, help: str, default: object = None, kind: Kind = Kind.FLAG, check: Check = checks.flag_problem,
          metavar: Optional[str] = None, long: Optional[str] = None) -> Option:
    return Option(name, kind, check, default, help, group="look", metavar=metavar, long=long)


def _also(name: str, help: str, default: object = None, group: str = "look") -> Option:
    """An option of `join` that another subcommand takes too, with what it means there:
    flag, text form and check stay the table's."""
    return replace(BY_NAME[name], help=help, default=default, group=group)


def _look_discovery(help: str, group: str) -> Option:
    """--discovery of a subcommand that looks from outside any job step: mdns, unicast or both."""
    return replace(_also("discovery", help, group=group), check=checks.discovery_problem)


#: What only `peers` and `status` take.
LOOK_OPTIONS: dict[str, Option] = {o.name: o for o in (
    _look("seconds", "how long to listen (default: {default})", 3.0, Kind.SECONDS, checks.positive_seconds,
          metavar="SECONDS"),
    _look("json", "JSON for scripts: a list, one object per daemon; with --job one object", False),
    _look("local", "with --job: only this machine's daemon of the job, as without --job", False),
    _look("watch", "with --job: show it again every second (in place on a terminal) until Ctrl-C", False),
    _look("answer_timeout", "how long to wait for each daemon's answer, and with --job to hear the job's "
                            "nodes (default: {default})", 3.0, Kind.SECONDS, checks.positive_seconds,
          metavar="SECONDS", long="--timeout"),
    _look("reason", "why the job is stopped, for every member's log (beside this host's address "
                    "and user name)", "", Kind.TEXT, checks.reason_problem, metavar="TEXT"),
)}

# `status --job`, `peers` and `stop` find a job's nodes as `join` does: over mDNS, or through seeds.
_SEEDS = "ask this node (a seed) for the job's nodes where multicast does not pass; repeat it, or give " \
         "a name with several addresses"
_DISCOVERY = "how the job's nodes are found: mdns, unicast (through --peer seeds) or both (default: " \
             "both with --peer, else mdns)"
_TOKEN = "the job's token file, to sign the request with: a job with a token answers an unsigned one " \
         "only with 'needs a token'"


def _listen_only(name: str, group: str) -> Option:
    """--address and --interface, for a subcommand that only listens."""
    return _also(name, BY_NAME[name].help.replace("advertise and listen", "listen"), group=group)


#: The options of `peers` and `status`, in the order of their --help.
SUBCOMMAND_OPTIONS: dict[str, tuple[Option, ...]] = {
    "peers": (
        LOOK_OPTIONS["seconds"],
        _also("job", "only the nodes of this job"),
        replace(LOOK_OPTIONS["json"], help="a JSON list, for scripts"),
        _listen_only("address", "network"),
        _listen_only("interface", "network"),
        _also("peers", "ask this node (a seed) instead of listening for multicast: it lists every node it "
                       "knows of; repeat it, or give a name with several addresses", (), group="network"),
        _look_discovery("how nodes are heard: mdns, unicast (through --peer seeds) or both (default: "
                        "unicast with --peer, else mdns)", group="network"),
    ),
    "status": (
        _also("job", "the whole job NAME, asked of its coordinator"),
        LOOK_OPTIONS["local"],
        LOOK_OPTIONS["json"],
        LOOK_OPTIONS["watch"],
        LOOK_OPTIONS["answer_timeout"],
        _also("token_file", _TOKEN),
        _listen_only("address", "network (with --job)"),
        _listen_only("interface", "network (with --job)"),
        _also("peers", _SEEDS + " (with --job)", (), group="network (with --job)"),
        _look_discovery(_DISCOVERY, group="network (with --job)"),
    ),
    "stop": (
        _also("job", "the job to stop (required)"),
        LOOK_OPTIONS["reason"],
        _also("token_file", "the job's token file, to sign the stop with: a job with a token refuses an "
                            "unsigned (or replayed) stop, and runs on"),
        _also("stop_grace", "seconds every member's command gets between SIGTERM and SIGKILL (default: each "
                            "member's own --stop-grace)"),
        _also("timeout", "give up waiting for the job's nodes to be found, take the stop and end after this "
                         "long (default: {default})", 60.0),
        replace(LOOK_OPTIONS["json"], help="one JSON object for scripts: who coordinated, the members, how "
                                           "long they took to end"),
        _listen_only("address", "network"),
        _listen_only("interface", "network"),
        _also("peers", _SEEDS, (), group="network"),
        _look_discovery(_DISCOVERY, group="network"),
    ),
}
