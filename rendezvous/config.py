"""Every option of `rendezvous join`, validated once, in one frozen object."""

from __future__ import annotations

import ipaddress
import math
import sys
from dataclasses import dataclass, field
from typing import Optional

from .core.advert import MAX_EXPECT, validate_job
from .errors import ConfigError

DEFAULT_JOB = "default"


def default_trainer_command() -> tuple[str, ...]:
    """The bundled MultiWorkerMirroredStrategy trainer, run by the current Python."""
    return (sys.executable, "-m", "trainer")


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
        if not isinstance(self.expect, int) or not 1 <= self.expect <= MAX_EXPECT:
            raise ConfigError(f"--expect must be a whole number from 1 to {MAX_EXPECT}, got {self.expect!r}")
        try:
            validate_job(self.job)
        except ValueError as exc:
            raise ConfigError(f"--job: {exc}") from None
        if not self.command:
            raise ConfigError("the command to run is empty")
        if self.address is not None:
            try:
                ipaddress.ip_address(self.address)
            except ValueError:
                raise ConfigError(f"--address must be a numeric IP address, got {self.address!r}") from None
        for name, port in (("--port", self.port), ("--tf-port", self.tf_port)):
            if not 0 <= port <= 65535:
                raise ConfigError(f"{name} must be from 0 (any free port) to 65535, got {port}")
        if self.timeout is not None and not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise ConfigError(f"--timeout must be a positive number of seconds, got {self.timeout!r}")
        if not (self.stop_grace >= 0 and math.isfinite(self.stop_grace)):
            raise ConfigError(f"--stop-grace must be zero or more seconds, got {self.stop_grace!r}")
        if not self.retry_interval > 0:
            raise ConfigError(f"retry interval must be positive, got {self.retry_interval!r}")
