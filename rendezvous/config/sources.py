"""Where the options of `rendezvous join` come from: the command line, RENDEZVOUS_* environment
variables, a TOML config file and, inside a Slurm job step, the step (config.slurm). The
command line wins over the environment, the environment over the file, the file over Slurm,
Slurm over the defaults.

Every value keeps its source, so that a bad one is reported as `--expect`, `RENDEZVOUS_EXPECT`
or `/etc/rendezvous/rendezvous.conf: expect`, whichever it came from. Everything here is pure
but `read_config_file`.
"""

from __future__ import annotations

import os
import stat
from typing import Any, Callable, Mapping, Optional, Sequence

from .checks import (
    parse_codes,
    parse_command,
    parse_flag,
    parse_list,
    parse_seconds,
    parse_size,
    parse_timings,
    parse_whole,
)
from . import slurm
from .join import JoinConfig, LogConfig
from .options import BY_NAME, LOG_OPTIONS, OPTIONS, SUBCOMMAND_OPTIONS, Kind, check_option, check_value, default_trainer_command
from ..core.record import field, record
from ..core.seeds import parse_seed
from ..errors import ConfigError

DEFAULT_CONFIG_FILE = "/etc/rendezvous/rendezvous.conf"
CONFIG_VARIABLE = "RENDEZVOUS_CONFIG"
VARIABLE_PREFIX = "RENDEZVOUS_"
# A config file is a few lines: anything larger (or not a regular file) is a mistake.
MAX_CONFIG_BYTES = 1 << 20


def variable_name(name: str) -> str:
    """The environment variable of an option: tf_port -> RENDEZVOUS_TF_PORT."""
    return VARIABLE_PREFIX + name.upper()


def file_key(name: str) -> str:
    """The config file key of an option as documented: tf_port -> tf-port (tf_port works too)."""
    return name.replace("_", "-")


@record
class Value:
    value: object
    source: str  # how an error names it: "--expect", "RENDEZVOUS_EXPECT", "FILE: expect"


@record
class Settings:
    join: JoinConfig
    log: LogConfig
    config_file: Optional[str] = None  # the file that was read, if any
    from_slurm: tuple[str, ...] = ()  # the values taken from a Slurm job step, as the log says them
    sources: Mapping[str, str] = field(default_factory=dict)  # option -> where its value came from (Value.source)


def resolve_command(command: Sequence[str]) -> tuple[str, ...]:
    """No command runs the bundled trainer; one that starts with '-' passes it options."""
    if not command or command[0].startswith("-"):
        return (*default_trainer_command(), *command)
    return tuple(command)


# -- each source -> {option: Value} ------------------------------------------------------


def from_cli(args: Mapping[str, object], command: Sequence[str]) -> dict[str, Value]:
    """Options given on the command line (None = not given) and the command after '--'."""
    values = {o.name: Value(_frozen(args[o.name]), o.flag) for o in OPTIONS if args.get(o.name) is not None}
    if command:
        values["command"] = Value(tuple(command), "the command after --")
    return values


def look_options(args: Mapping[str, object], subcommand: str) -> dict[str, Any]:
    """The options of `peers` or `status`, which come from the command line only: each as
    given (checked as `join` checks it) or its default. Seeds are written out in full."""
    values: dict[str, Any] = {}
    for option in SUBCOMMAND_OPTIONS[subcommand]:
        given = args.get(option.name)
        if given is None:
            values[option.name] = option.default
            continue
        value = _frozen(given)
        check_value(option, value)
        if option.name == "peers" and isinstance(value, tuple):
            value = tuple(str(parse_seed(t)) for t in value)
        values[option.name] = value
    return values


def _frozen(value: object) -> object:
    """A repeated flag's list, as the tuple the config holds."""
    return tuple(value) if isinstance(value, list) else value


# How each kind of option is read from text; TEXT is taken as it is.
_READERS: dict[Kind, Callable[[str], object]] = {
    Kind.WHOLE: parse_whole,
    Kind.COUNT: parse_whole,
    Kind.SECONDS: parse_seconds,
    Kind.FLAG: parse_flag,
    Kind.COMMAND: parse_command,
    Kind.TIMINGS: parse_timings,
    Kind.CODES: parse_codes,
    Kind.LIST: parse_list,
    Kind.SIZE: parse_size,
}


def read_text(kind: Kind, text: str) -> object:
    """An option's value from its text form (a variable, or a flag's argument). Text that
    does not parse is returned as it is: the option's check then names it."""
    read = _READERS.get(kind)
    value = text if read is None else read(text)
    return text if value is None else value


def _read(kind: Kind, text: object, source: str) -> object:
    try:
        return read_text(kind, text) if isinstance(text, str) else text
    except ValueError as exc:
        raise ConfigError(f"{source} {exc}, got {text!r}") from None


def from_environ(environ: Mapping[str, str]) -> dict[str, Value]:
    """RENDEZVOUS_EXPECT, RENDEZVOUS_JOB, ...; an empty variable counts as unset."""
    values: dict[str, Value] = {}
    for option in OPTIONS:
        variable = variable_name(option.name)
        text = environ.get(variable)
        if text:
            values[option.name] = Value(_read(option.kind, text, variable), variable)
    return values


def parse_config_file(text: str, path: str) -> dict[str, Value]:
    """The options of a TOML config file: top-level keys named like the long options."""
    from ._compat import tomllib  # only when there is a file: a daemon without one never needs it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not a valid TOML file: {exc}") from None
    values: dict[str, Value] = {}
    keys: dict[str, str] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in BY_NAME:
            known = ", ".join(file_key(o.name) for o in OPTIONS)
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
        if name in keys:
            raise ConfigError(f"{path}: {key!r} is given twice, also as {keys[name]!r}")
        keys[name] = key
        source = f"{path}: {key}"
        kind = BY_NAME[name].kind
        if kind is Kind.SECONDS and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif kind is Kind.SIZE:
            value = parse_size(value)
        elif kind is Kind.CODES and isinstance(value, list):
            value = frozenset(value) if all(isinstance(c, int) for c in value) else value
        elif kind is Kind.LIST:
            value = _frozen(value) if isinstance(value, list) else _read(kind, value, source)
        elif kind in (Kind.COMMAND, Kind.TIMINGS, Kind.CODES):
            value = _read(kind, value, source)  # a string, or a list / table as it is
            if kind is Kind.TIMINGS and isinstance(value, dict):
                value = _read_timings_table(value, source)
        values[name] = Value(value, source)
    return values


def _read_timings_table(table: dict[str, object], source: str) -> object:
    try:
        return parse_timings(table)
    except ValueError as exc:
        raise ConfigError(f"{source} {exc}") from None


# -- merging ---------------------------------------------------------------------------


def config_file_path(cli_path: Optional[str], environ: Mapping[str, str]) -> tuple[str, bool]:
    """Which file to read, and whether it must exist: one named by --config or
    RENDEZVOUS_CONFIG must; the default one is read only when it is there."""
    if cli_path:
        return cli_path, True
    if environ.get(CONFIG_VARIABLE):
        return environ[CONFIG_VARIABLE], True
    return DEFAULT_CONFIG_FILE, False


def merge(*layers: Mapping[str, Value]) -> dict[str, Value]:
    """Later layers win."""
    merged: dict[str, Value] = {}
    for layer in layers:
        merged.update(layer)
    return merged


def with_slurm(values: Mapping[str, Value], environ: Mapping[str, str]) -> tuple[dict[str, Value], tuple[str, ...]]:
    """The values with those of the Slurm job step beneath them, when --discovery is slurm,
    or auto (or not given) inside a step; and how the log names what came from Slurm."""
    given = values.get("discovery")
    mode = given.value if given is not None else None
    if mode not in (None, "auto", "slurm") or (mode != "slurm" and not slurm.in_step(environ)):
        return dict(values), ()
    port = values.get("port")
    step = slurm.read_step(environ)
    layer = {name: Value(value, source) for name, (value, source) in slurm.step_values(
        step, port.value if port is not None and isinstance(port.value, int) else None).items()}
    merged = merge(layer, values)
    where = "SLURM_JOB_ID and SLURM_STEP_ID" + (f" ({given.source} {mode})" if given is not None else "")
    merged["discovery"] = Value("slurm", where)
    taken = tuple(slurm.describe(name, merged[name].value) for name in layer if merged[name] is layer[name])
    return merged, taken


def build_settings(values: Mapping[str, Value], config_file: Optional[str] = None,
                   from_slurm: tuple[str, ...] = ()) -> Settings:
    """Check every value against its source, then build the frozen configs."""
    for name, value in values.items():
        check_option(name, value.value, value.source)
    if "expect" not in values:
        raise ConfigError(
            "--expect is required: the number of peers in the job. Give --expect N, set "
            f"RENDEZVOUS_EXPECT, or write `expect = N` in the config file ({DEFAULT_CONFIG_FILE} "
            "or --config FILE)"
        )
    given: dict[str, Any] = {name: value.value for name, value in values.items()}  # each one checked above
    command = resolve_command(given.pop("command", ()))
    log = LogConfig(**{n: given.pop(n) for n in LOG_OPTIONS if n in given})
    join = JoinConfig(command=command, **given)
    return Settings(join=join, log=log, config_file=config_file, from_slurm=from_slurm,
                    sources={n: v.source for n, v in values.items()})


def read_config_file(path: str, required: bool) -> Optional[dict[str, Value]]:
    """The options in `path`; None when it is not required and not there."""
    try:
        raw = _read_regular_file(path, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        if not required:
            return None
        raise ConfigError(f"config file {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_config_file(text, path)


def _read_regular_file(path: str, limit: int) -> bytes:
    """At most `limit` bytes of a regular file. Opened without blocking, so that a FIFO
    named by mistake is an error instead of a hang, and /dev/zero is not read forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(0, "not a regular file")
        raw = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise OSError(0, f"larger than {limit} bytes")
    return raw


def load_settings(
    cli_args: Mapping[str, object],
    command: Sequence[str],
    environ: Mapping[str, str],
    config_path: Optional[str] = None,
) -> Settings:
    """The options of `join` from all three sources."""
    path, required = config_file_path(config_path, environ)
    in_file = read_config_file(path, required)
    values = merge(in_file or {}, from_environ(environ), from_cli(cli_args, command))
    values, from_slurm = with_slurm(values, environ)
    return build_settings(values, path if in_file is not None else None, from_slurm)
