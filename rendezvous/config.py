"""Every option of `rendezvous join`, validated once, in frozen objects.

Each check returns what is wrong with a value, so the same check can name whichever source
the value came from: `--expect`, `RENDEZVOUS_EXPECT` or `/etc/rendezvous/rendezvous.conf: expect`.
"""

from __future__ import annotations

import ipaddress
import math
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

from .core.advert import MAX_EXPECT, validate_job
from .errors import ConfigError

DEFAULT_JOB = "default"
LOG_FORMATS = ("auto", "plain", "json")


def default_trainer_command() -> tuple[str, ...]:
    """The bundled MultiWorkerMirroredStrategy trainer, run by the current Python."""
    return (sys.executable, "-m", "trainer")


# TOML and the environment can hand over any type: bools are ints in Python, so refuse them.
def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expect_problem(value: object) -> Optional[str]:
    if _is_whole(value) and 1 <= value <= MAX_EXPECT:  # type: ignore[operator]
        return None
    return f"must be a whole number from 1 to {MAX_EXPECT}, got {value!r}"


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
    if _is_whole(value) and 0 <= value <= 65535:  # type: ignore[operator]
        return None
    return f"must be from 0 (any free port) to 65535, got {value!r}"


def _timeout_problem(value: object) -> Optional[str]:
    if value is None or (_is_number(value) and value > 0 and math.isfinite(value)):  # type: ignore[operator]
        return None
    return f"must be a positive number of seconds, got {value!r}"


def _grace_problem(value: object) -> Optional[str]:
    if _is_number(value) and value >= 0 and math.isfinite(value):  # type: ignore[operator]
        return None
    return f"must be zero or more seconds, got {value!r}"


def _positive_problem(value: object) -> Optional[str]:
    if _is_number(value) and value > 0 and math.isfinite(value):  # type: ignore[operator]
        return None
    return f"must be positive, got {value!r}"


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


#: What is wrong with a value of each option, or None. Keys are JoinConfig/LogConfig fields.
PROBLEMS: dict[str, Callable[[object], Optional[str]]] = {
    "expect": _expect_problem,
    "job": _job_problem,
    "command": _command_problem,
    "address": _address_problem,
    "interface": _interface_problem,
    "port": _port_problem,
    "tf_port": _port_problem,
    "timeout": _timeout_problem,
    "stop_grace": _grace_problem,
    "retry_interval": _positive_problem,
    "conflict_linger": _grace_problem,
    "verbose": _verbose_problem,
    "quiet": _flag_problem,
    "log_format": _log_format_problem,
}


def option_name(name: str) -> str:
    """The command-line spelling of a field: tf_port -> --tf-port."""
    return "--" + name.replace("_", "-")


def check_option(name: str, value: object, label: Optional[str] = None) -> None:
    """Raise ConfigError naming `label` (the option by default) and the value if it is bad."""
    problem = PROBLEMS[name](value)
    if problem is not None:
        raise ConfigError(f"{label or option_name(name)} {problem}")


@dataclass(frozen=True)
class JoinConfig:
    expect: int
    job: str = DEFAULT_JOB
    command: tuple[str, ...] = field(default_factory=default_trainer_command)
    address: Optional[str] = None
    interface: Optional[str] = None
    port: int = 0
    tf_port: int = 0
    timeout: Optional[float] = None
    stop_grace: float = 10.0
    # How long to wait before asking the coordinator again after a redirect or a lost stream.
    retry_interval: float = 0.25
    # How long a node that disagrees with a peer stays advertised before it exits.
    conflict_linger: float = 1.5

    def __post_init__(self) -> None:
        labels = {"command": "the command to run", "retry_interval": "retry interval", "conflict_linger": "conflict linger"}
        for name in (
            "expect", "job", "command", "address", "interface", "port", "tf_port",
            "timeout", "stop_grace", "retry_interval", "conflict_linger",
        ):
            check_option(name, getattr(self, name), labels.get(name))


@dataclass(frozen=True)
class LogConfig:
    """How the daemon logs: -v/-q and --log-format."""

    verbose: int = 0
    quiet: bool = False
    log_format: str = "auto"

    def __post_init__(self) -> None:
        for name in ("verbose", "quiet", "log_format"):
            check_option(name, getattr(self, name))
