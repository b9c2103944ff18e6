"""`status --job` when the coordinator does not answer (cut off, frozen, gone): the job's
members heard through discovery are asked one by one, and what each says of itself is
shown, with why the coordinator was not asked."""

from __future__ import annotations

import asyncio
from typing import Any, Optional, Sequence, Union

from ..core.advert import Advert
from ..core.auth import Keys
from ..core.job import JobView, MemberView, job_table, job_to_dict
from ..core.peer import IPAddress
from ..core.seeds import parse_seeds
from ..core.status import NodeStatus, printable
from .finding import Lookup


def members_view(job: str, statuses: Sequence[NodeStatus], adverts: Sequence[Advert]) -> JobView:
    """The job as its members each say: one row per node heard, its own phase, round and
    command uptime; the round is the newest any of them is in."""
    newest = max([s.round for s in statuses] + [a.round for a in adverts] + [1])
    expect = statuses[0].expect if statuses else adverts[0].expect
    rows = tuple(
        MemberView(peer=s.node, rank=s.rank, phase=s.phase, round=s.round, uptime=s.trainer_uptime,
                   exit_code=s.exit_code, progress=s.progress)
        for s in sorted(statuses, key=lambda s: s.node)
    )
    return JobView(job=job, round=newest, phase="unknown", expect=expect, coordinator=None, members=rows,
                   restarts=newest - 1, coordinating=False)


async def ask_members(
    job: str, adverts: Sequence[Advert], timeout: float, keys: Optional[Keys] = None,
) -> tuple[list[NodeStatus], list[str]]:
    """Every advertised node of `job`, asked at once; what they said, and who did not
    answer (the coordinator among them, most likely)."""
    from ..coordinator import fetch_status  # grpc is imported only when needed

    ours = [a for a in adverts if a.job == job]
    results: list[Union[NodeStatus, BaseException]] = await asyncio.gather(
        *(fetch_status(a.peer.endpoint, timeout, keys) for a in ours), return_exceptions=True)
    answered = [r for r in results if isinstance(r, NodeStatus)]
    silent = [f"{a.peer.describe()}: {printable(str(r))}" for a, r in zip(ours, results) if not isinstance(r, NodeStatus)]
    return answered, silent


def unreachable_note(why: str, silent: Sequence[str]) -> str:
    """`no job status: the daemon at 10.0.0.1:29630 did not answer: DEADLINE_EXCEEDED ...;
    what the job's members say instead:`, then who of them did not answer either."""
    note = f"no job status: {why}; what the job's members say instead:"
    return note + "".join(f"\nno answer from {s}" for s in silent)


def render_members(view: JobView, note: str, as_json: bool, watch: bool) -> str:
    """The members' table below the note, or the JSON with `coordinator_unreachable`."""
    if as_json:
        import json

        shown: dict[str, Any] = {**job_to_dict(view), "coordinator_unreachable": note}
        return json.dumps(shown, indent=None if watch else 2, allow_nan=False)
    return f"{note}\n{job_table(view)}"


async def find_adverts(job: str, address: IPAddress, seconds: float, lookup: Lookup = Lookup()) -> list[Advert]:
    """The job's adverts heard within `seconds` (over mDNS on `address`, or through the
    lookup's seeds), or as soon as as many nodes as the job has were heard."""
    from ..discovery import browse
    from ..discovery.combined import discovery_factory

    def enough(heard: list[Advert]) -> bool:
        ours = [a for a in heard if a.job == job]
        return bool(ours) and len(ours) >= max(a.expect.max for a in ours)

    factory = discovery_factory(lookup.mode, parse_seeds(lookup.seeds))
    return [a for a in await browse(factory, address, seconds, enough) if a.job == job]


