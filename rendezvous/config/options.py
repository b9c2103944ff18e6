"""Every option of `rendezvous join`, declared once and validated once.

`OPTIONS` is the single table: each entry gives an option's name, how its text is read,
its check, default, help and group. The command line (rendezvous.cli.main), the RENDEZVOUS_*
variables and the TOML file (rendezvous.config.sources), and the frozen `JoinConfig` and
`LogConfig` are all derived from it: a new option is one entry here plus its use.

Each check returns what is wrong with a value, so the same check can name whichever source
the value came from: `--expect`, `RENDEZVOUS_EXPECT` or `/etc/rendezvous/rendezvous.conf: expect`.
"""

from __future__ import annotations

import ipaddress
import math
import shlex
import sys
from enum import Enum
from typing import Callable, Optional

from ..core import numbers
from ..core.advert import MAX_EXPECT, validate_job
from ..core.preflight import ALLOWABLE, ALWAYS_FATAL
from ..core.record import field, fields, record
from ..core.round import MIN_LIVENESS_TIMEOUT, Policy
from ..core.seeds import DEFAULT_PORT, parse_seed
from ..core.size import Size
from ..errors import ConfigError

DEFAULT_JOB = "default"
LOG_FORMATS = ("auto", "plain", "json")


def default_trainer_command() -> tuple[str, ...]:
    """The bundled MultiWorkerMirroredStrategy trainer, run by the current Python."""
    return (sys.executable, "-m", "trainer")


# -- timings --------------------------------------------------------------------------------


@record
class Timings:
    """How long the daemon waits for things, in seconds. Users rarely change these; tests
    shrink them instead of waiting."""

    # HTTP/2 keepalive on every Join stream, both ways: a frozen or cut-off peer ends its
    # streams within twice this.
    keepalive: float = 5.0
    # Failing to reach the coordinator this long leaves it out of the election, until it
    # announces itself anew or answers a Status call; one is made this often.
    suspect_after: float = 3.0
    # How long a DNS-SD service may take to resolve.
    resolve_timeout: float = 3.0
    # Peers that would be elected are asked their Status one at a time, lowest first; one
    # that has not answered after this long lets the next be asked too (core.asking).
    confirm_hedge: float = 0.25
    # Re-announcing at once after the release would make N nodes delay each other.
    advertise_delay: float = 0.5
    # The release sets the start time ahead by the time the frozen list took to go to every
    # member and come back as Ready (core.round.start_margin), at least start_margin_min
    # and at most start_margin plus start_margin_per_peer per member: time for it to reach
    # every member. (8 daemons started at once on 2 cores: the frozen list's trip took
    # 12-19 ms, the release 5-9 ms; a member that gets it late starts at once, late by as
    # much.)
    start_margin_min: float = 0.005
    start_margin: float = 0.02
    start_margin_per_peer: float = 0.002
    # Before asking the coordinator again after a redirect or a lost stream.
    retry_interval: float = 0.25
    # How long a node that disagrees with a peer stays advertised before it exits, so that
    # the peer sees it too and fails with the same message instead of waiting.
    conflict_linger: float = 1.5
    # How long the mDNS goodbye may take at exit.
    goodbye_timeout: float = 1.0
    # How long the coordinator keeps a stream open after its last message (an abort, the
    # end of the job, a redirect), for the peer to read it and close its side first.
    end_grace: float = 2.0
    # How often the command's progress file is read, and how often at most its progress
    # goes to the coordinator.
    progress_poll: float = 0.5
    progress_send: float = 1.0
    # A member lagging the others' median progress this long is marked a straggler.
    straggler_after: float = 60.0
    # How long a new Join stream may take to send its join (and prove the token): a
    # connection that says nothing is closed instead of held.
    handshake: float = 5.0
    # Unicast discovery: how often a node exchanges adverts with its seeds and a few peers ...
    gossip_interval: float = 1.0
    # ... and how long an advert whose node announces nothing newer is kept.
    advert_ttl: float = 10.0
    # The coordinator tells its peers who has joined at most this often.
    waiting_every: float = 0.1
    # Alone this long, a node says that multicast may be blocked and how to give seeds.
    lonely_hint: float = 10.0
    # A node that waits without having seen its whole job asks the network again after
    # this, then twice as seldom each time, up to 16 times this (0: never).
    ask_again: float = 2.0
    # What follows from a change of the view (telling the coordinator service, the progress,
    # the confirmer) is done at once for the first few changes after a quiet window of this
    # length, then at most once per window while changes keep coming.
    view_settle: float = 0.02
    # A settling round is looked at again this long after its settle time has passed.
    settle_slack: float = 0.01
    # One warning line per kind of bad request and source address this often, at most.
    warning_interval: float = 30.0
    # How long the command's interpreter and nvidia-smi may take to answer at startup.
    probe_timeout: float = 20.0
    # How long the gRPC server lets calls under way finish at shutdown.
    server_stop_grace: float = 0.5
    # `status --watch` asks again this often.
    watch_interval: float = 1.0
    # How long a metrics scrape waits for the node's status.
    metrics_read_timeout: float = 5.0

    def __post_init__(self) -> None:
        for name in fields(self):
            value = getattr(self, name)
            if not (_is_number(value) and value >= 0 and math.isfinite(value)):
                raise ConfigError(f"sets {timing_key(name)} to {value!r}: it must be zero or more seconds")

    def longest_start_margin(self, world_size: int) -> float:
        """The most seconds between the release and the common start (core.round.start_margin)."""
        return self.start_margin + self.start_margin_per_peer * world_size


TIMING_NAMES = fields(Timings)


def timing_key(name: str) -> str:
    return name.replace("_", "-")


# -- checks: what is wrong with a value, or None -----------------------------------------------


# TOML and the environment can hand over any type: bools are ints in Python, so refuse them.
def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expect_problem(value: object) -> Optional[str]:
    if isinstance(parse_size(value), Size):
        return None
    return f"must be N or MIN:MAX with 1 <= MIN <= MAX <= {MAX_EXPECT}, got {value!r}"


def _job_problem(value: object) -> Optional[str]:
    try:
        validate_job(value)  # type: ignore[arg-type]
    except ValueError:
        return (
            "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit, "
            f"got {value!r}"
        )
    return None


def _command_problem(value: object) -> Optional[str]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(a, str) for a in value):
        return f"must be a list of strings, got {value!r}"
    if not value or not value[0]:
        return "must not be empty"
    return None


def _address_problem(value: object) -> Optional[str]:
    if value is None:
        return None
    try:
        if not isinstance(value, str):  # ip_address() takes integers too
            raise ValueError(value)
        ipaddress.ip_address(value)
    except ValueError:
        return f"must be a numeric IP address, got {value!r}"
    return None


def _interface_problem(value: object) -> Optional[str]:
    if value is None or (isinstance(value, str) and value):
        return None
    return f"must be an interface name such as eth0, got {value!r}"


def _port_problem(value: object) -> Optional[str]:
    if value is None or (_is_whole(value) and 0 <= value <= 65535):  # type: ignore[operator]
        return None
    return f"must be from 0 (any free port) to 65535, got {value!r}"


def _metrics_port_problem(value: object) -> Optional[str]:
    if value is None or (_is_whole(value) and 1 <= value <= 65535):  # type: ignore[operator]
        return None
    return f"must be a port from 1 to 65535, got {value!r}"


def _peers_problem(value: object) -> Optional[str]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(t, str) for t in value):
        return f"must be a list of HOST[:PORT], got {value!r}"
    for text in value:
        try:
            parse_seed(text)
        except ValueError as exc:
            return f"must be HOST[:PORT] (a name or address, and a port from 1 to 65535): {exc}"
    return None


DISCOVERY_MODES = ("mdns", "unicast", "both")


def _discovery_problem(value: object) -> Optional[str]:
    if value is None or value in DISCOVERY_MODES:
        return None
    return f"must be one of {', '.join(DISCOVERY_MODES)}, got {value!r}"


def _timeout_problem(value: object) -> Optional[str]:
    if value is None or (_is_number(value) and value > 0 and math.isfinite(value)):  # type: ignore[operator]
        return None
    return f"must be a positive number of seconds, got {value!r}"


def _grace_problem(value: object) -> Optional[str]:
    if _is_number(value) and value >= 0 and math.isfinite(value):  # type: ignore[operator]
        return None
    return f"must be zero or more seconds, got {value!r}"


def _token_file_problem(value: object) -> Optional[str]:
    if value is None or (isinstance(value, str) and value and "\0" not in value):
        return None
    return f"must be the path of a file holding the job's secret, got {value!r}"


def _verbose_problem(value: object) -> Optional[str]:
    if _is_whole(value) and 0 <= value <= 2:  # type: ignore[operator]
        return None
    return f"must be 0, 1 or 2, got {value!r}"


def _flag_problem(value: object) -> Optional[str]:
    return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


def _log_format_problem(value: object) -> Optional[str]:
    if value in LOG_FORMATS:
        return None
    return f"must be one of {', '.join(LOG_FORMATS)}, got {value!r}"


def _restarts_problem(value: object) -> Optional[str]:
    if _is_whole(value) and 0 <= value <= 1000:  # type: ignore[operator]
        return None
    return f"must be a whole number from 0 (never restart) to 1000, got {value!r}"


def _positive_seconds_problem(value: object) -> Optional[str]:
    if _is_number(value) and value > 0 and math.isfinite(value):  # type: ignore[operator]
        return None
    return f"must be a positive number of seconds, got {value!r}"


def _liveness_problem(value: object) -> Optional[str]:
    problem = _positive_seconds_problem(value)
    if problem is None and value < MIN_LIVENESS_TIMEOUT:  # type: ignore[operator]
        return f"must be at least {MIN_LIVENESS_TIMEOUT:g} s (heartbeats go out every fifth of it), got {value!r}"
    return problem


def _codes_problem(value: object) -> Optional[str]:
    if isinstance(value, (tuple, list, frozenset)) and all(_is_whole(c) and 0 <= c <= 255 for c in value):
        return None
    shown = ",".join(map(str, sorted(value))) if isinstance(value, frozenset) else repr(value)
    return f"must be exit codes from 0 to 255, separated by commas, got {shown}"


def _paths_problem(value: object) -> Optional[str]:
    if isinstance(value, (tuple, list)) and all(isinstance(p, str) and p for p in value):
        return None
    return f"must be file paths, got {value!r}"


def _mismatches_problem(value: object) -> Optional[str]:
    if isinstance(value, (tuple, list)) and all(k in ALLOWABLE for k in value):
        return None
    never = " and ".join(sorted(k.value for k in ALWAYS_FATAL))
    return f"must name kinds from {', '.join(ALLOWABLE)} ({never} differences are always refused), got {value!r}"


def _interpreter_problem(value: object) -> Optional[str]:
    if value is None or (isinstance(value, str) and value):
        return None
    return f"must be the path of a Python interpreter, got {value!r}"


def _sync_dir_problem(value: object) -> Optional[str]:
    if value is None or (isinstance(value, str) and value and "\0" not in value):
        return None
    return f"must be a directory path, got {value!r}"


def _bytes_problem(value: object) -> Optional[str]:
    if _is_whole(value) and value > 0:  # type: ignore[operator]
        return None
    return f"must be a positive whole number of bytes, got {value!r}"


def _timings_problem(value: object) -> Optional[str]:
    return None if isinstance(value, Timings) else f"must be NAME=SECONDS pairs, got {value!r}"


# -- reading text (command line, variables) ----------------------------------------------------

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def parse_whole(text: str) -> Optional[int]:
    """`42` -> 42 (spaces around it are fine); None unless it is plain ASCII digits."""
    return numbers.parse_whole(text.strip())


def parse_seconds(text: str) -> Optional[float]:
    """`2.5`, `-1`, `.5` -> a float (spaces around it are fine); None unless it is a plain
    decimal number."""
    return numbers.parse_seconds(text.strip())


def parse_flag(text: str) -> Optional[bool]:
    word = text.strip().lower()
    return True if word in _TRUE else False if word in _FALSE else None


def parse_command(text: str) -> tuple[str, ...]:
    """A command line split like a shell would; ValueError if it cannot be."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ValueError(f"cannot be split like a shell command line ({exc})") from None


def parse_size(value: object) -> object:
    """`3` (or 3) -> 3:3, `2:4` -> 2:4; anything else is returned as it is."""
    try:
        if _is_whole(value):
            return Size.fixed(value)  # type: ignore[arg-type]
        return Size.parse(value) if isinstance(value, str) else value
    except ValueError:
        return value


def parse_codes(text: str) -> Optional[frozenset[int]]:
    """`2,126,127` -> the codes; an empty text is no code at all; None if not codes."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    codes = [parse_whole(w) for w in words]
    return None if None in codes else frozenset(codes)  # type: ignore[arg-type]


def parse_list(text: str) -> tuple[str, ...]:
    """`gpu-model,python` -> its items; spaces around them and empty ones are dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def parse_timings(pairs: object) -> Timings:
    """`keepalive=1,suspect-after=0.5` (or a mapping of the same) -> Timings; ValueError
    naming what is wrong."""
    if isinstance(pairs, str):
        items = []
        for pair in filter(None, (p.strip() for p in pairs.split(","))):
            name, sep, text = pair.partition("=")
            seconds = parse_seconds(text) if sep else None
            if seconds is None:
                raise ValueError(f"must be NAME=SECONDS pairs, and {pair!r} is not one")
            items.append((name.strip(), seconds))
    elif isinstance(pairs, dict):
        items = list(pairs.items())
    else:
        raise ValueError(f"must be NAME=SECONDS pairs, got {pairs!r}")
    values: dict[str, object] = {}
    for key, value in items:
        name = str(key).replace("-", "_")
        if name not in TIMING_NAMES:
            known = ", ".join(map(timing_key, TIMING_NAMES))
            raise ValueError(f"names an unknown timing {key!r} (known: {known})")
        values[name] = float(value) if _is_whole(value) else value
    try:
        return Timings(**values)  # type: ignore[arg-type]
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


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
    check: Callable[[object], Optional[str]]
    default: object
    help: str
    group: str  # job, network, launch, output or configuration: its place in --help
    metavar: Optional[str] = None
    short: Optional[str] = None
    long: Optional[str] = None  # a flag given once per value reads better singular: --peer

    @property
    def flag(self) -> str:
        """The command-line spelling: tf_port -> --tf-port."""
        return self.long or option_name(self.name)


def option_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def _default_timings() -> Timings:
    return Timings()


#: Every option of `rendezvous join`. `command` has no flag: it is what follows `--`.
OPTIONS: tuple[Option, ...] = (
    Option("expect", Kind.SIZE, _expect_problem, None, group="job", metavar="N|MIN:MAX",
           help="number of peers in the job, this one included (the same on every peer; "
                "required here, in RENDEZVOUS_EXPECT or in the config file). MIN:MAX makes the "
                "job elastic: a round starts at once with MAX peers, or with at least MIN once "
                "no new peer has come for --settle seconds"),
    Option("job", Kind.TEXT, _job_problem, DEFAULT_JOB, group="job", metavar="NAME",
           help=f"job name; peers of other jobs on the network are ignored (default: {DEFAULT_JOB})"),
    Option("command", Kind.COMMAND, _command_problem, None, group="launch", metavar="COMMAND",
           help="the command to run on every peer (default: the bundled trainer)"),
    Option("timeout", Kind.SECONDS, _timeout_problem, None, group="job", metavar="SECONDS",
           help="give up if the job has not formed (its member list frozen) after this long; a "
                "round frozen in time goes on to its start, however long a --sync-dir copy takes "
                "(default: wait forever)"),
    Option("settle", Kind.SECONDS, _grace_problem, 3.0, group="job", metavar="SECONDS",
           help="with --expect MIN:MAX, how long a round with at least MIN peers waits for "
                "another one before it starts (default: 3)"),
    Option("address", Kind.TEXT, _address_problem, None, group="network", metavar="IP",
           help="advertise and listen on this local IP, and use its family only (default: the "
                "address of the interface that carries the default route, and on a dual-stack "
                "host its IPv6 one too, for a job that needs IPv6)"),
    Option("interface", Kind.TEXT, _interface_problem, None, group="network", metavar="NAME",
           help="advertise and listen on the address of this interface, e.g. eth0 (its IPv4 "
                "one, and its IPv6 one too for a job that needs IPv6)"),
    Option("port", Kind.WHOLE, _port_problem, None, group="network", metavar="PORT",
           help=f"port of this node's rendezvous gRPC server; 0: any free port (default: "
                f"{DEFAULT_PORT}, or any free port when another daemon of this host has it)"),
    Option("peers", Kind.LIST, _peers_problem, (), group="network", metavar="HOST[:PORT]", long="--peer",
           help="where multicast does not pass: a node to exchange adverts with (a seed); "
                "repeat it, or give a name that resolves to several addresses. Seeds need not "
                "list every node, only reach them through each other (default port: "
                f"{DEFAULT_PORT})"),
    Option("discovery", Kind.TEXT, _discovery_problem, None, group="network", metavar="MODE",
           help="how peers are found: mdns (multicast on the local link), unicast (through "
                "--peer seeds) or both (default: both with --peer, else mdns)"),
    Option("tf_port", Kind.WHOLE, _port_problem, 0, group="network", metavar="PORT",
           help="port for this node's TensorFlow worker (default: a free port, checked on "
                "all interfaces as TensorFlow listens on all of them)"),
    Option("metrics_port", Kind.WHOLE, _metrics_port_problem, None, group="network", metavar="PORT",
           help="serve Prometheus metrics (phase, round, restarts, members, command uptime and "
                "exit code, training progress) at http://ADDRESS:PORT/metrics on this node's "
                "address (default: off)"),
    Option("token_file", Kind.TEXT, _token_file_problem, None, group="job", metavar="PATH",
           help="a file (mode 600, owned by you) holding the job's shared secret: only peers with "
                "the same secret join, and every rendezvous message is signed with it (default: "
                "none, and the job is open to anyone on the network)"),
    Option("stop_grace", Kind.SECONDS, _grace_problem, 10.0, group="launch", metavar="SECONDS",
           help="when the command is stopped (SIGINT/SIGTERM to rendezvous), time it gets "
                "between SIGTERM and SIGKILL (default: 10)"),
    Option("abort_grace", Kind.SECONDS, _grace_problem, 3.0, group="launch", metavar="SECONDS",
           help="when a round is aborted (a command failed, a node was lost or frozen), time "
                "the commands get between SIGTERM and SIGKILL: a broken collective saves nothing "
                "by waiting (default: 3)"),
    Option("max_restarts", Kind.WHOLE, _restarts_problem, 3, group="launch", metavar="N",
           help="after a failure (a command exits non-zero, a node is lost or frozen), stop the "
                "command on every node and start a new round this many times at most; 0: never "
                "(default: 3)"),
    Option("no_restart_on", Kind.CODES, _codes_problem, Policy.no_restart_on, group="launch",
           metavar="CODES",
           help="exit codes a restart cannot fix: a command exiting with one ends the job on every "
                "node with that code (default: 2,126,127; '' for none)"),
    Option("liveness_timeout", Kind.SECONDS, _liveness_problem, 5.0, group="launch",
           metavar="SECONDS",
           help="a node not heard from this long while the commands run (frozen, cut off), or a "
                "command stopped this long, fails the round; the coordinator's value rules every "
                "member of the round (at least 0.1; default: 5)"),
    Option("same_file", Kind.LIST, _paths_problem, (), group="preflight", metavar="PATH",
           help="a file that must be the same on every node, e.g. the training script: the job "
                "is refused when its SHA-256 differs (repeatable)"),
    Option("allow_mismatch", Kind.LIST, _mismatches_problem, (), group="preflight", metavar="KIND",
           help=f"only warn when the nodes differ in this way: {', '.join(ALLOWABLE)} (repeatable). "
                "A different TensorFlow major.minor or GPU count is always refused"),
    Option("python", Kind.TEXT, _interpreter_problem, None, group="preflight", metavar="PATH",
           help="the interpreter the command runs, whose Python and TensorFlow versions are "
                "compared (default: the command's, when it starts with python or a script run "
                "by one; else the one running rendezvous)"),
    Option("sync_dir", Kind.TEXT, _sync_dir_problem, None, group="launch", metavar="DIR",
           help="before every launch, make DIR on every node a copy of the newest one (the one "
                "the previous round's chief wrote), and after the job succeeds, of the chief's: "
                "point the command's checkpoints (e.g. the trainer's --backup-dir) at DIR to "
                "resume without shared storage (DIR need not exist yet; its parent must be "
                "writable: the copy is staged beside it)"),
    Option("sync_max_bytes", Kind.WHOLE, _bytes_problem, 20 << 30, group="launch", metavar="BYTES",
           help="refuse to sync a --sync-dir holding more than this (default: 21474836480, 20 GiB)"),
    Option("verbose", Kind.COUNT, _verbose_problem, 0, group="output", short="-v",
           help="more log output: -v debug lines, -vv also zeroconf's and gRPC's (at most -vv: "
                "more is an error)"),
    Option("quiet", Kind.FLAG, _flag_problem, False, group="output", short="-q",
           help="only warnings and errors"),
    Option("log_format", Kind.TEXT, _log_format_problem, "auto", group="output", metavar="FORMAT",
           help="auto (default): plain lines, plus a live progress line on a terminal; plain: "
                "plain single lines only; json: one JSON object per line"),
    Option("timings", Kind.TIMINGS, _timings_problem, _default_timings, group="configuration",
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
    problem = BY_NAME[name].check(value)
    if problem is not None:
        raise ConfigError(f"{label or _LABELS.get(name) or BY_NAME[name].flag} {problem}")


def discovery_mode(config: "JoinConfig") -> str:  # type: ignore[name-defined]
    """--discovery, or what it means when not given: both with seeds, else mdns."""
    return config.discovery or ("both" if config.peers else "mdns")


def _check_ports(port: object, tf_port: object) -> None:
    """The TensorFlow worker cannot bind the port the daemon serves on."""
    if port and port == tf_port:
        raise ConfigError(f"--port and --tf-port are both {port}: the command could not bind it")


def _frozen_config(name: str, names: tuple[str, ...], doc: str) -> type:
    """A frozen record with one field per option in `names`, each checked on creation."""
    annotations: dict[str, object] = {}
    namespace: dict[str, object] = {"__annotations__": annotations, "__doc__": doc, "__module__": __name__}
    for option in (BY_NAME[n] for n in names):
        default = option.default
        annotations[option.name] = "Size" if option.name == "expect" else "object"
        if option.name == "command":
            namespace[option.name] = field(default_factory=default_trainer_command)
        elif callable(default):
            namespace[option.name] = field(default_factory=default)
        elif option.name != "expect":  # required: no default
            namespace[option.name] = default

    def __post_init__(self) -> None:
        for n in names:
            if BY_NAME[n].kind is Kind.SIZE:  # JoinConfig(expect=3) is JoinConfig(expect=Size(3, 3))
                object.__setattr__(self, n, parse_size(getattr(self, n)))
            check_option(n, getattr(self, n))
        if "tf_port" in names:
            _check_ports(self.port, self.tf_port)

    namespace["__post_init__"] = __post_init__
    return record(type(name, (), namespace))


# `expect` first: the one field without a default.
JoinConfig = _frozen_config(
    "JoinConfig", JOIN_OPTIONS, "Everything `rendezvous join` needs to know, validated."
)
LogConfig = _frozen_config("LogConfig", LOG_OPTIONS, "How the daemon logs: -v/-q and --log-format.")
