"""Zero-config rendezvous for multi-node TensorFlow MultiWorkerMirroredStrategy training."""

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

__version__ = "0.2.0"

__all__ = [
    "AddressError",
    "ConfigError",
    "CoordinatorError",
    "LaunchError",
    "MembershipError",
    "NoDaemonError",
    "RendezvousError",
    "RendezvousTimeout",
    "__version__",
]
