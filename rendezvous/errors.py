"""The error hierarchy. The CLI maps each class to its exit code."""

from __future__ import annotations


class RendezvousError(Exception):
    """Base class of every error rendezvous raises on purpose."""

    exit_code = 1


class ConfigError(RendezvousError):
    """An option or config value is invalid."""

    exit_code = 2


class RendezvousTimeout(RendezvousError):
    """The rendezvous did not complete within --timeout."""

    exit_code = 3


class MembershipError(RendezvousError):
    """This peer cannot be part of the job (job already frozen, conflicting --expect, clash)."""

    exit_code = 4


class AddressError(RendezvousError):
    """No usable network address, or the one asked for is not on this machine."""

    exit_code = 5


class CoordinatorError(RendezvousError):
    """The coordinator aborted the round or could not be reached after the freeze."""

    exit_code = 6


class JobFailed(CoordinatorError):
    """The job's last round failed and no restart follows. Exits with the failed command's
    exit code, or 6 when no command failed (a node was lost)."""

    def __init__(self, message: str, exit_code: int = CoordinatorError.exit_code) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class LaunchError(RendezvousError):
    """The command could not be started: it was not found (127, as a shell exits)."""

    exit_code = 127


class CommandNotExecutable(LaunchError):
    """The command was found but cannot be run: not executable, or a directory (126, as a
    shell exits)."""

    exit_code = 126


class NoDaemonError(RendezvousError):
    """`rendezvous status` found no running daemon here, or none that answered."""

    exit_code = 7


class SyncError(RendezvousError):
    """`--sync-dir` could not make the directory identical to the source's: the round
    fails (and restarts) with this reason; the directory is left as it was."""

    exit_code = 6


class JobStopped(RendezvousError):
    """`rendezvous stop` ended the job: every node's `join` exits with 8, whatever its
    command's exit status, and no restart follows."""

    exit_code = 8


class RequestRefused(RendezvousError):
    """`rendezvous stop` or `status --job`: the job refused the request, because it needs a
    token (--token-file) the request was not signed with, or signed with another one."""

    exit_code = 4
