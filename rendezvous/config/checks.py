"""What is wrong with an option's value, and how its text form is read.

Each check returns what is wrong with a value (or None), without naming the option, so that
the same check can name whichever source the value came from: `--expect`, `RENDEZVOUS_EXPECT`
or `/etc/rendezvous/rendezvous.conf: expect`. TOML and the environment can hand over any type,
so every check takes an `object`.
"""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
from typing import Any, Callable, Optional

from ..core import numbers
from ..core.advert import MAX_EXPECT, validate_job
from ..core.gpus import GpuPolicy
from ..core.preflight import ALLOWABLE, ALWAYS_FATAL
from ..core.round import MIN_LIVENESS_TIMEOUT
from ..core.seeds import parse_seed
from ..core.size import Size
from ..errors import ConfigError
from .timings import TIMING_NAMES, Timings, is_number, timing_key

Check = Callable[[object], Optional[str]]

LOG_FORMATS = ("auto", "plain", "json")
DISCOVERY_MODES = ("mdns", "unicast", "both")
# `join` also takes these: slurm (the step's node list as seeds, no multicast) and auto.
JOIN_DISCOVERY_MODES = (*DISCOVERY_MODES, "slurm", "auto")


def is_whole(value: object) -> bool:
    """An int, not a bool (True is an int in Python)."""
    return isinstance(value, int) and not isinstance(value, bool)


def optional(check: Check) -> Check:
    """`check`, where None (not given) is fine too."""

    def optional_check(value: object) -> Optional[str]:
        return None if value is None else check(value)

    return optional_check


def _whole_in(low: int, high: Optional[int], what: str) -> Check:
    def check(value: object) -> Optional[str]:
        if isinstance(value, int) and is_whole(value) and low <= value and (high is None or value <= high):
            return None
        return f"must be {what}, got {value!r}"

    return check


def _text(what: str, path: bool = False) -> Check:
    """A non-empty string; a path cannot hold a NUL byte either."""

    def check(value: object) -> Optional[str]:
        if isinstance(value, str) and value and not (path and "\0" in value):
            return None
        return f"must be {what}, got {value!r}"

    return check


def _seconds(positive: bool) -> Check:
    def check(value: object) -> Optional[str]:
        if isinstance(value, (int, float)) and is_number(value) and math.isfinite(value) and (
            value > 0 if positive else value >= 0
        ):
            return None
        return f"must be {'a positive number of' if positive else 'zero or more'} seconds, got {value!r}"

    return check


positive_seconds = _seconds(positive=True)
grace_problem = _seconds(positive=False)
timeout_problem = optional(positive_seconds)
port_problem = optional(_whole_in(0, 65535, "from 0 (any free port) to 65535"))
metrics_port_problem = optional(_whole_in(1, 65535, "a port from 1 to 65535"))
verbose_problem = _whole_in(0, 2, "0, 1 or 2")
restarts_problem = _whole_in(0, 1000, "a whole number from 0 (never restart) to 1000")
bytes_problem = _whole_in(1, None, "a positive whole number of bytes")
interface_problem = optional(_text("an interface name such as eth0"))
interpreter_problem = optional(_text("the path of a Python interpreter"))
token_file_problem = optional(_text("the path of a file holding the job's secret", path=True))
sync_dir_problem = optional(_text("a directory path", path=True))
output_dir_problem = optional(_text("a directory path", path=True))
keep_rounds_problem = _whole_in(1, 100_000, "a whole number of rounds from 1 to 100000")


_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def prewarm_problem(value: object) -> Optional[str]:
    if value is None or value in ("auto", "none"):
        return None
    names = value.split(",") if isinstance(value, str) else None
    if names and all(_MODULE_NAME.fullmatch(n.strip()) for n in names):
        return None
    return f"must be auto, none or module names separated by commas (e.g. tensorflow,numpy), got {value!r}"


def expect_problem(value: object) -> Optional[str]:
    if isinstance(parse_size(value), Size):
        return None
    return f"must be N or MIN:MAX with 1 <= MIN <= MAX <= {MAX_EXPECT}, got {value!r}"


def job_problem(value: object) -> Optional[str]:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        validate_job(value)
    except ValueError:
        return (
            "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit, "
            f"got {value!r}"
        )
    return None


def command_problem(value: object) -> Optional[str]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(a, str) for a in value):
        return f"must be a list of strings, got {value!r}"
    if not value or not value[0]:
        return "must not be empty"
    return None


def address_problem(value: object) -> Optional[str]:
    if value is None:
        return None
    try:
        if not isinstance(value, str):  # ip_address() takes integers too
            raise ValueError(value)
        ipaddress.ip_address(value)
    except ValueError:
        return f"must be a numeric IP address, got {value!r}"
    return None


def gpus_problem(value: object) -> Optional[str]:
    """--gpus: all, min, none or a whole number (a number in the config file too)."""
    try:
        if not isinstance(value, str) and not is_whole(value):
            raise ValueError(f"must be all, min, none or a number of GPUs, got {value!r}")
        GpuPolicy.parse(str(value))
    except ValueError as exc:
        return str(exc)
    return None


def peers_problem(value: object) -> Optional[str]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(t, str) for t in value):
        return f"must be a list of HOST[:PORT], got {value!r}"
    for text in value:
        try:
            parse_seed(text)
        except ValueError as exc:
            return f"must be HOST[:PORT] (a name or address, and a port from 1 to 65535): {exc}"
    return None


def discovery_problem(value: object) -> Optional[str]:
    if value is None or value in DISCOVERY_MODES:
        return None
    return f"must be one of {', '.join(DISCOVERY_MODES)}, got {value!r}"


def join_discovery_problem(value: object) -> Optional[str]:
    if value is None or value in JOIN_DISCOVERY_MODES:
        return None
    return f"must be one of {', '.join(JOIN_DISCOVERY_MODES)}, got {value!r}"


def hosts_problem(value: object) -> Optional[str]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(t, str) for t in value):
        return f"must be a list of host names or addresses, got {value!r}"
    for text in value:
        try:
            host = parse_seed(text)
        except ValueError as exc:
            return f"must be host names or addresses: {exc}"
        if host.host != text:
            return f"must be host names or addresses, without a port or brackets: {text!r}"
    return None


def flag_problem(value: object) -> Optional[str]:
    return None if isinstance(value, bool) else f"must be true or false, got {value!r}"


def log_format_problem(value: object) -> Optional[str]:
    if value in LOG_FORMATS:
        return None
    return f"must be one of {', '.join(LOG_FORMATS)}, got {value!r}"


def liveness_problem(value: object) -> Optional[str]:
    problem = positive_seconds(value)
    if problem is None and isinstance(value, (int, float)) and value < MIN_LIVENESS_TIMEOUT:
        return f"must be at least {MIN_LIVENESS_TIMEOUT:g} s (heartbeats go out every fifth of it), got {value!r}"
    return problem


def codes_problem(value: object) -> Optional[str]:
    if isinstance(value, (tuple, list, frozenset)) and all(
        isinstance(c, int) and is_whole(c) and 0 <= c <= 255 for c in value
    ):
        return None
    shown = ",".join(map(str, sorted(value))) if isinstance(value, frozenset) else repr(value)
    return f"must be exit codes from 0 to 255, separated by commas, got {shown}"


def paths_problem(value: object) -> Optional[str]:
    if isinstance(value, (tuple, list)) and all(isinstance(p, str) and p for p in value):
        return None
    return f"must be file paths, got {value!r}"


def mismatches_problem(value: object) -> Optional[str]:
    if isinstance(value, (tuple, list)) and all(k in ALLOWABLE for k in value):
        return None
    never = ", ".join(sorted(k.value for k in ALWAYS_FATAL))
    return f"must name kinds from {', '.join(ALLOWABLE)} ({never} differences are always refused), got {value!r}"


def timings_problem(value: object) -> Optional[str]:
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
        if isinstance(value, int) and is_whole(value):
            return Size.fixed(value)
        return Size.parse(value) if isinstance(value, str) else value
    except ValueError:
        return value


def parse_codes(text: str) -> Optional[frozenset[int]]:
    """`2,126,127` -> the codes; an empty text is no code at all; None if not codes."""
    codes = [parse_whole(w) for w in text.split(",") if w.strip()]
    return frozenset(c for c in codes if c is not None) if None not in codes else None


def parse_list(text: str) -> tuple[str, ...]:
    """`gpu-model,python` -> its items; spaces around them and empty ones are dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def parse_timings(pairs: object) -> Timings:
    """`keepalive=1,suspect-after=0.5` (or a mapping of the same) -> Timings; ValueError
    naming what is wrong."""
    items: list[tuple[object, object]] = []
    if isinstance(pairs, str):
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
    values: dict[str, Any] = {}  # Timings checks each one
    for key, value in items:
        name = str(key).replace("-", "_")
        if name not in TIMING_NAMES:
            known = ", ".join(map(timing_key, TIMING_NAMES))
            raise ValueError(f"names an unknown timing {key!r} (known: {known})")
        values[name] = float(value) if isinstance(value, int) and is_whole(value) else value
    try:
        return Timings(**values)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


def reason_problem(value: object) -> Optional[str]:
    """`rendezvous stop --reason`: one line of printable text, short enough for a log line."""
    if not isinstance(value, str):
        return f"must be text, got {value!r}"
    if len(value) > 200:
        return f"must be at most 200 characters, got {len(value)}"
    if not value.isprintable():
        return f"must be one line of printable text, got {value!r}"
    return None
