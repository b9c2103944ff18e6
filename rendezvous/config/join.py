"""The frozen, typed configs the daemon runs with: `JoinConfig` and `LogConfig`.

One field per option of the table (rendezvous.config.options), in its order, with the
table's default: the field's type is written here, its default and check there (a test
keeps the two in step). Every value is checked on creation, so a config that exists is valid.
"""

from __future__ import annotations

from typing import Any, Optional

from ..core.record import field, fields, record
from ..core.size import Size
from ..errors import ConfigError
from .checks import is_whole, parse_size
from .options import BY_NAME, Kind, check_option
from .timings import Timings


def _default(name: str) -> Any:
    """The table's default of option `name`, as a field's default."""
    default = BY_NAME[name].default
    return field(default_factory=default) if callable(default) else default


def _check_fields(config: object) -> None:
    for name in fields(config):
        if BY_NAME[name].kind is Kind.SIZE:  # JoinConfig(expect=3) is JoinConfig(expect=Size(3, 3))
            object.__setattr__(config, name, parse_size(getattr(config, name)))
        if name == "gpus" and is_whole(getattr(config, name)):  # `gpus = 4` in the file is "4"
            object.__setattr__(config, name, str(getattr(config, name)))
        check_option(name, getattr(config, name))


@record
class JoinConfig:
    """Everything `rendezvous join` needs to know, validated."""

    expect: Size  # the one field without a default
    job: str = _default("job")
    command: tuple[str, ...] = _default("command")
    timeout: Optional[float] = _default("timeout")
    settle: float = _default("settle")
    address: Optional[str] = _default("address")
    interface: Optional[str] = _default("interface")
    data_interface: Optional[str] = _default("data_interface")
    data_address: Optional[str] = _default("data_address")
    port: Optional[int] = _default("port")
    peers: tuple[str, ...] = _default("peers")
    discovery: Optional[str] = _default("discovery")
    allow_hosts: tuple[str, ...] = _default("allow_hosts")
    tf_port: int = _default("tf_port")
    metrics_port: Optional[int] = _default("metrics_port")
    token_file: Optional[str] = _default("token_file")
    stop_grace: float = _default("stop_grace")
    abort_grace: float = _default("abort_grace")
    prewarm: Optional[str] = _default("prewarm")
    max_restarts: int = _default("max_restarts")
    no_restart_on: frozenset[int] = _default("no_restart_on")
    liveness_timeout: float = _default("liveness_timeout")
    same_file: tuple[str, ...] = _default("same_file")
    allow_mismatch: tuple[str, ...] = _default("allow_mismatch")
    python: Optional[str] = _default("python")
    gpus: str = _default("gpus")
    sync_dir: Optional[str] = _default("sync_dir")
    sync_max_bytes: int = _default("sync_max_bytes")
    output_dir: Optional[str] = _default("output_dir")
    output_max_bytes: int = _default("output_max_bytes")
    output_keep_rounds: int = _default("output_keep_rounds")
    timings: Timings = _default("timings")

    def __post_init__(self) -> None:
        _check_fields(self)
        _check_ports(self)


# Pairs of options that each bind a port of this host, and which of the two binds it last
# (the daemon's gRPC server first, then the metrics endpoint, the command at its start).
_PORT_PAIRS = (
    ("port", "tf_port", "the command"),
    ("port", "metrics_port", "the metrics endpoint"),
    ("tf_port", "metrics_port", "the command"),
)


def _check_ports(config: JoinConfig) -> None:
    """No two of the daemon's, the TensorFlow worker's and the metrics endpoint's ports
    may be the same given port (0 or unset: a free one, never the same)."""
    for first, second, last in _PORT_PAIRS:
        port = getattr(config, first)
        if port and port == getattr(config, second):
            raise ConfigError(
                f"{BY_NAME[first].flag} and {BY_NAME[second].flag} are both {port}: {last} could not bind it"
            )


@record
class LogConfig:
    """How the daemon logs: -v/-q and --log-format."""

    verbose: int = _default("verbose")
    quiet: bool = _default("quiet")
    log_format: str = _default("log_format")

    def __post_init__(self) -> None:
        _check_fields(self)


def discovery_mode(config: JoinConfig) -> str:
    """The discovery that runs: mdns, unicast or both. Under Slurm (config.sources made
    `auto` `slurm` inside a step) the seeds alone; `auto` or none: both with seeds, else mdns."""
    if config.discovery == "slurm":
        return "unicast"
    if config.discovery is None or config.discovery == "auto":
        return "both" if config.peers else "mdns"
    return config.discovery
