"""How `status --job` and `stop` find a job's nodes from any host: over mDNS, or through
--peer seeds where multicast does not pass (--discovery, as for `join`), and the keys of
the job's token (--token-file) to sign what they ask."""

from __future__ import annotations

from typing import Optional

from ..core.auth import Keys
from ..core.job import coordinator_endpoint
from ..core.peer import IPAddress
from ..core.record import record
from ..core.seeds import parse_seeds
from ..errors import NoDaemonError


@record
class Lookup:
    seeds: tuple[str, ...] = ()  # HOST[:PORT] as given to --peer
    discovery: Optional[str] = None  # mdns, unicast, both; None: both with seeds, else mdns
    keys: Optional[Keys] = None

    @property
    def mode(self) -> str:
        return self.discovery or ("both" if self.seeds else "mdns")

    def where(self, address: IPAddress) -> str:
        """Where the job's nodes were looked for, for a message."""
        via = f"through {', '.join(self.seeds)}" if self.seeds and self.mode != "mdns" else ""
        listened = f"on {address}" if self.mode != "unicast" else ""
        return " and ".join(p for p in (listened, via) if p)


def lookup_from(given: dict, job: Optional[str]) -> Lookup:
    """The lookup the subcommand's options ask for; the token file is read here (ConfigError
    naming it when it cannot be used)."""
    from ..host.token import load_keys

    keys = load_keys(given.get("token_file"), job) if job is not None else None
    return Lookup(tuple(given.get("peers") or ()), given.get("discovery"), keys)


async def find_coordinator(job: str, address: IPAddress, seconds: float, lookup: Lookup = Lookup()) -> str:
    """The endpoint to ask about `job`, from its nodes' adverts; NoDaemonError if none is heard."""
    from ..discovery import browse  # zeroconf and grpc only when needed
    from ..discovery.combined import discovery_factory

    factory = discovery_factory(lookup.mode, parse_seeds(lookup.seeds))
    adverts = await browse(factory, address, seconds, lambda heard: coordinator_endpoint(heard, job) is not None)
    endpoint = coordinator_endpoint(adverts, job)
    if endpoint is None:
        raise NoDaemonError(f"no node of job {job!r} answered {lookup.where(address)} within {seconds:g}s")
    return endpoint
