"""`rendezvous peers` and `rendezvous status`: look at what runs, change nothing.

`status` asks the daemons on this machine; `status --job NAME` asks the job's coordinator,
found through the job's adverts, wherever it runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import IO, Optional, Sequence, Union

from ..config.timings import Timings
from ..host import runtime
from ..host.address import choose_address
from ..core.job import JobView, job_table, job_to_dict
from ..core.listing import advert_to_dict, peer_table
from ..core.peer import IPAddress
from ..core.seeds import parse_seeds
from ..core.status import NodeStatus, describe_status, printable, status_to_dict
from ..core.auth import Keys
from ..errors import ConfigError, NoDaemonError
from . import members
from .finding import Lookup, find_coordinator

log = logging.getLogger(__name__)

# Cursor home, erase below: `status --watch` redraws its table in place.
CLEAR_SCREEN = "\033[H\033[J"


def list_peers(seconds: float, address: Optional[str], interface: Optional[str],
               job: Optional[str], as_json: bool, seeds: Sequence[str] = (), discovery: Optional[str] = None) -> str:
    """Browse for `seconds` (over mDNS, or asking `seeds`, or as `discovery` says) and
    return the table (or JSON) of every node heard."""
    from ..discovery import browse  # zeroconf and grpc are imported only when needed
    from ..discovery.combined import discovery_factory

    choice = choose_address(address, interface)
    log.debug("browsing on %s (%s) for %gs", choice.address, choice.reason, seconds)
    factory = discovery_factory(discovery or ("unicast" if seeds else "mdns"), parse_seeds(seeds))
    adverts = asyncio.run(browse(factory, choice.address, seconds))
    if job is not None:
        adverts = [a for a in adverts if a.job == job]
    if as_json:
        return json.dumps([advert_to_dict(a) for a in adverts], indent=2, allow_nan=False)
    if not adverts:
        what = f"of job {job!r} " if job is not None else ""
        via = f"through {', '.join(seeds)}" if seeds else f"on {choice.address}"
        return f"no rendezvous node {what}answered {via} within {seconds:g}s"
    return peer_table(adverts)


async def _ask_all(registrations: list[runtime.Registration], timeout: float,
                   token_file: Optional[str] = None) -> list[Union[NodeStatus, BaseException]]:
    from ..coordinator import fetch_status  # grpc is imported only when needed

    return await asyncio.gather(*(fetch_status(r.endpoint, timeout, _local_keys(r, token_file)) for r in registrations),
                                return_exceptions=True)


def _local_keys(registration: runtime.Registration, token_file: Optional[str]) -> Optional[Keys]:
    """The keys to ask a daemon of this machine with: of --token-file, else of the daemon's
    own token file where this user may read it (its owner). None: ask unsigned, and a job
    with a token says only that it needs one."""
    from ..host.token import load_keys

    path = token_file or registration.token_file or None
    try:
        return load_keys(path, registration.job)
    except ConfigError as exc:
        log.debug("asking pid %d unsigned: %s", registration.pid, exc)
        return None


def find_daemons(job: Optional[str]) -> list[runtime.Registration]:
    """The daemons running on this machine, in this network namespace; NoDaemonError if none."""
    directories = runtime.candidate_directories(os.environ, os.getuid())
    netns = runtime.current_netns()
    # One reading: a bad note or a refused directory is warned about once.
    remaining = runtime.remove_stale(directories, netns, runtime.pid_alive)
    running = runtime.live_registrations(remaining, netns, runtime.pid_alive)
    chosen = [r for r in running if job is None or r.job == job]
    if chosen:
        return chosen
    if running:
        jobs = ", ".join(sorted({repr(r.job) for r in running}))
        raise NoDaemonError(f"no rendezvous daemon of job {job!r} runs on this machine; running: {jobs}")
    raise _none_runs(directories)


def _none_runs(directories: Sequence[object], stale: int = 0) -> NoDaemonError:
    where = ", ".join(str(d) for d in directories)
    notes = "a note there named an endpoint" if stale == 1 else f"{stale} notes there named endpoints"
    outlived = f"; {notes} where no daemon of theirs listens (removed)" if stale else ""
    return NoDaemonError(
        f"no rendezvous daemon runs on this machine (none registered in {where}{outlived}); "
        "start one with `rendezvous join`, or `systemctl start rendezvous`"
    )


def _outlived(registration: runtime.Registration, result: object, timeout: float) -> bool:
    """Whether the note outlived its daemon: nothing listens at its endpoint, or another
    node does (a daemon writes its note once it listens, and removes it before it stops)."""
    from ..coordinator.client import Unreachable

    if isinstance(result, NodeStatus):
        return result.node.node_id != registration.node_id
    return isinstance(result, Unreachable) and runtime.nothing_listens(registration.endpoint, timeout)


def show_status(job: Optional[str], timeout: float, as_json: bool,
                token_file: Optional[str] = None) -> tuple[str, list[str]]:
    """The status of every local daemon (or of JOB's) as text or JSON, and the errors of
    those that did not answer; a note that outlived its daemon is removed, not shown.
    NoDaemonError if none runs, or none answered."""
    daemons = find_daemons(job)
    results = asyncio.run(_ask_all(daemons, timeout, token_file))
    shown: list[tuple[runtime.Registration, NodeStatus]] = []
    errors: list[str] = []
    stale = 0
    for registration, result in zip(daemons, results):
        if _outlived(registration, result, timeout):
            log.debug("removing the note of node %s (pid %d): %s", registration.node_id, registration.pid,
                      result if isinstance(result, BaseException) else "another node answers at its endpoint")
            runtime.discard(runtime.candidate_directories(os.environ, os.getuid()), registration)
            stale += 1
        elif isinstance(result, NodeStatus):
            shown.append((registration, result))
        elif isinstance(result, Exception):  # one daemon's answer never hides the others
            errors.append(f"{printable(str(result))} (pid {registration.pid}, job {registration.job!r})")
        else:
            raise result
    if not shown:
        if not errors:
            raise _none_runs(runtime.candidate_directories(os.environ, os.getuid()), stale)
        raise NoDaemonError("; ".join(errors))
    if as_json:
        text = json.dumps([{"daemon_pid": r.pid, **status_to_dict(s)} for r, s in shown], indent=2, allow_nan=False)
    else:
        text = "\n\n".join(describe_status(s, daemon_pid=r.pid) for r, s in shown)
    return text, errors


async def _find_coordinator(job: str, address: IPAddress, seconds: float, lookup: Lookup = Lookup()) -> str:
    """The endpoint to ask about `job`, from its nodes' adverts; NoDaemonError if none is heard."""
    return await find_coordinator(job, address, seconds, lookup)


async def fetch_job(job: str, address: IPAddress, timeout: float, endpoint: Optional[str] = None,
                    lookup: Lookup = Lookup()) -> tuple[JobView, str]:
    """The job as its coordinator sees it, and the coordinator's endpoint (to ask again).
    A node that does not coordinate names the one that does: that one is asked instead."""
    from ..coordinator import fetch_job_status

    endpoint = endpoint or await _find_coordinator(job, address, timeout, lookup)
    view = await fetch_job_status(endpoint, timeout, lookup.keys, job)
    if not view.coordinating and view.coordinator is not None and view.coordinator.endpoint != endpoint:
        endpoint = view.coordinator.endpoint
        view = await fetch_job_status(endpoint, timeout, lookup.keys, job)
    return view, endpoint


def render_job(view: JobView, as_json: bool, watch: bool = False) -> str:
    """The table, or JSON (one line per view when watching, for `jq` and log files)."""
    if not as_json:
        return job_table(view)
    return json.dumps(job_to_dict(view), indent=None if watch else 2, allow_nan=False)


def show_job(job: str, address: Optional[str], interface: Optional[str], timeout: float, as_json: bool,
             watch: bool, out: IO[str] = sys.stdout, interval: float = Timings.watch_interval,
             *, lookup: Lookup = Lookup()) -> None:
    """Print the job's table (or JSON) once, or every `interval` seconds until interrupted
    with `watch`: redrawn in place on a terminal, repeated below otherwise. `lookup`: how the
    job's nodes are found (seeds, --discovery) and its token's keys."""
    choice = choose_address(address, interface)
    asyncio.run(_show_job(job, choice.address, timeout, as_json, watch, out, interval, lookup))


async def _show_job(job: str, address: IPAddress, timeout: float, as_json: bool, watch: bool, out: IO[str],
                    interval: float = Timings.watch_interval, lookup: Lookup = Lookup()) -> None:
    text, endpoint = await _job_or_members(job, address, timeout, as_json, watch, lookup=lookup)
    in_place = watch and out.isatty()
    while True:
        if in_place:
            out.write(CLEAR_SCREEN + text + "\n")
        else:
            out.write(text + ("\n\n" if watch and not as_json else "\n"))
        out.flush()
        if not watch:
            return
        await asyncio.sleep(interval)
        try:
            text, endpoint = await _job_or_members(job, address, timeout, as_json, watch, endpoint, lookup)
        except NoDaemonError:  # the coordinator changed (a new round) or is gone: look again
            text, endpoint = await _job_or_members(job, address, timeout, as_json, watch, lookup=lookup)


async def _job_or_members(job: str, address: IPAddress, timeout: float, as_json: bool, watch: bool,
                          endpoint: Optional[str] = None, lookup: Lookup = Lookup()) -> tuple[str, Optional[str]]:
    """The job as its coordinator shows it, and the endpoint to ask next time; when the
    coordinator does not answer, as its members show it (cli.members), and no endpoint."""
    endpoint = endpoint or await _find_coordinator(job, address, timeout, lookup)
    try:
        view, endpoint = await fetch_job(job, address, timeout, endpoint, lookup)
        return render_job(view, as_json, watch), endpoint
    except NoDaemonError as exc:
        failed = exc
    adverts = await members.find_adverts(job, address, timeout, lookup)
    statuses, silent = await members.ask_members(job, adverts, timeout, lookup.keys)
    if not statuses:
        raise failed
    note = members.unreachable_note(str(failed), silent)
    return members.render_members(members.members_view(job, statuses, adverts), note, as_json, watch), None
