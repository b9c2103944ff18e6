"""Where the options of `rendezvous join` come from: the command line, RENDEZVOUS_* environment
variables and a TOML config file. The command line wins over the environment, the environment
over the file, the file over the defaults.

Every value keeps its source, so that a bad one is reported as `--expect`, `RENDEZVOUS_EXPECT`
or `/etc/rendezvous/rendezvous.conf: expect`, whichever it came from. Everything here is pure
but `read_config_file`.
"""

from __future__ import annotations

import re
import shlex
from ._compat import tomllib
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from .config import JoinConfig, LogConfig, check_option, default_trainer_command, option_name
from .errors import ConfigError

DEFAULT_CONFIG_FILE = "/etc/rendezvous/rendezvous.conf"
CONFIG_VARIABLE = "RENDEZVOUS_CONFIG"
VARIABLE_PREFIX = "RENDEZVOUS_"

JOIN_OPTIONS = ("expect", "job", "command", "address", "interface", "port", "tf_port", "timeout", "stop_grace")
LOG_OPTIONS = ("verbose", "quiet", "log_format")
OPTIONS = JOIN_OPTIONS + LOG_OPTIONS

_WHOLE = frozenset({"expect", "port", "tf_port", "verbose"})
_SECONDS = frozenset({"timeout", "stop_grace"})
# Text forms of numbers, in variables and on the command line: ASCII only, no '_' (int() and
# float() would take '1_0' as 10, and other scripts' digits), no exponent, no inf or nan.
_WHOLE_TEXT = re.compile(r"[0-9]+")
_SECONDS_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def variable_name(name: str) -> str:
    """The environment variable of an option: tf_port -> RENDEZVOUS_TF_PORT."""
    return VARIABLE_PREFIX + name.upper()


def file_key(name: str) -> str:
    """The config file key of an option as documented: tf_port -> tf-port (tf_port works too)."""
    return name.replace("_", "-")


@dataclass(frozen=True)
class Value:
    value: object
    source: str  # how an error names it: "--expect", "RENDEZVOUS_EXPECT", "FILE: expect"


@dataclass(frozen=True)
class Settings:
    join: JoinConfig
    log: LogConfig
    config_file: Optional[str] = None  # the file that was read, if any


def resolve_command(command: Sequence[str]) -> tuple[str, ...]:
    """No command runs the bundled trainer; one that starts with '-' passes it options."""
    if not command or command[0].startswith("-"):
        return (*default_trainer_command(), *command)
    return tuple(command)


# -- each source -> {option: Value} ------------------------------------------------------


def from_cli(args: Mapping[str, object], command: Sequence[str]) -> dict[str, Value]:
    """Options given on the command line (None = not given) and the command after '--'."""
    values = {name: Value(args[name], option_name(name)) for name in OPTIONS if args.get(name) is not None}
    if command:
        values["command"] = Value(tuple(command), "the command after --")
    return values


def parse_whole(text: str) -> Optional[int]:
    """`42` -> 42; None unless the text is ASCII digits (around them, spaces)."""
    word = text.strip()
    return int(word) if _WHOLE_TEXT.fullmatch(word) else None


def parse_seconds(text: str) -> Optional[float]:
    """`2.5`, `-1`, `.5` -> a float; None unless the text is a plain decimal number."""
    word = text.strip()
    return float(word) if _SECONDS_TEXT.fullmatch(word) else None


def _whole(text: str) -> object:
    value = parse_whole(text)
    return text if value is None else value  # left as text: the option's check then names it


def _seconds(text: str) -> object:
    value = parse_seconds(text)
    return text if value is None else value


def _flag(text: str) -> object:
    word = text.strip().lower()
    return True if word in _TRUE else False if word in _FALSE else text


def _split(text: str, source: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ConfigError(f"{source} cannot be split like a shell command line ({exc}), got {text!r}") from None


def from_environ(environ: Mapping[str, str]) -> dict[str, Value]:
    """RENDEZVOUS_EXPECT, RENDEZVOUS_JOB, ...; an empty variable counts as unset."""
    values: dict[str, Value] = {}
    for name in OPTIONS:
        variable = variable_name(name)
        text = environ.get(variable)
        if not text:
            continue
        if name in _WHOLE:
            value: object = _whole(text)
        elif name in _SECONDS:
            value = _seconds(text)
        elif name == "quiet":
            value = _flag(text)
        elif name == "command":
            value = _split(text, variable)
        else:
            value = text
        values[name] = Value(value, variable)
    return values


def parse_config_file(text: str, path: str) -> dict[str, Value]:
    """The options of a TOML config file: top-level keys named like the long options."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not a valid TOML file: {exc}") from None
    values: dict[str, Value] = {}
    keys: dict[str, str] = {}
    for key, value in data.items():
        name = key.replace("-", "_")
        if name not in OPTIONS:
            known = ", ".join(file_key(n) for n in OPTIONS)
            raise ConfigError(f"{path}: unknown key {key!r} (known keys: {known})")
        if name in keys:
            raise ConfigError(f"{path}: {key!r} is given twice, also as {keys[name]!r}")
        keys[name] = key
        source = f"{path}: {key}"
        if name in _SECONDS and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif name == "command" and isinstance(value, str):
            value = _split(value, source)
        values[name] = Value(value, source)
    return values


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


def build_settings(values: Mapping[str, Value], config_file: Optional[str] = None) -> Settings:
    """Check every value against its source, then build the frozen configs."""
    for name, value in values.items():
        check_option(name, value.value, value.source)
    if "expect" not in values:
        raise ConfigError(
            "--expect is required: the number of peers in the job. Give --expect N, set "
            f"RENDEZVOUS_EXPECT, or write `expect = N` in the config file ({DEFAULT_CONFIG_FILE} "
            "or --config FILE)"
        )
    given = {name: value.value for name, value in values.items()}
    command = resolve_command(given.pop("command", ()))  # type: ignore[arg-type]
    join = JoinConfig(command=command, **{n: v for n, v in given.items() if n in JOIN_OPTIONS})  # type: ignore[arg-type]
    log = LogConfig(**{n: v for n, v in given.items() if n in LOG_OPTIONS})  # type: ignore[arg-type]
    return Settings(join=join, log=log, config_file=config_file)


def read_config_file(path: str, required: bool) -> Optional[dict[str, Value]]:
    """The options in `path`; None when it is not required and not there."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
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
    return build_settings(values, path if in_file is not None else None)
