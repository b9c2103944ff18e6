"""The whole job as its coordinator sees it, as plain data: `rendezvous status --job`.

The coordinator already hears every member on its Join stream; `Board` keeps what it
learns beside the round (core.round): when the commands started, each member's exit code
and latest progress, since when it lags the others, and why the last round ended.
`job_view` turns both into the `JobView` the Status service hands out; `job_table` and
`job_to_dict` show it. Nothing here reads a clock: `now` is passed in.

A straggler is a member whose step count or images/s stays more than `lag` (20%) below
the members' median for `after` seconds.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from .advert import Advert, Phase
from .failure import Failure, failure_to_dict
from .peer import Peer, elect_coordinator
from .progress import Progress, describe, progress_to_dict
from .record import field, record, replace
from .round import Round, RoundPhase
from .size import Size
from .status import format_duration, peer_to_dict

STRAGGLER_LAG = 0.2


@record
class MemberRecord:
    progress: Optional[Progress] = None
    exit_code: Optional[int] = None
    finished_at: Optional[float] = None
    lagging_since: Optional[float] = None
    straggler: bool = False


@record
class Board:
    """What the coordinator learnt about round `round` beyond the round's own state."""

    round: int = 1
    released_at: Optional[float] = None
    members: Mapping[str, MemberRecord] = field(default_factory=dict)
    last_abort: Optional[str] = None  # kept across rounds: why the previous one ended
    last_failure: Optional[Failure] = None  # the failed command that caused that end, if one did

    def record(self, node_id: str) -> MemberRecord:
        return self.members.get(node_id, MemberRecord())

    def _with(self, node_id: str, **changes: Any) -> "Board":
        return replace(self, members={**self.members, node_id: replace(self.record(node_id), **changes)})


def for_round(board: Board, number: int) -> Board:
    """The board of round `number`: a new round starts empty, but for the last abort."""
    return board if number == board.round else Board(round=number, last_abort=board.last_abort,
                                                      last_failure=board.last_failure)


def released(board: Board, now: float) -> Board:
    return replace(board, released_at=now)


def progressed(board: Board, node_id: str, progress: Progress) -> Board:
    return board._with(node_id, progress=progress)


def finished(board: Board, node_id: str, exit_code: int, now: float) -> Board:
    return board._with(node_id, exit_code=exit_code, finished_at=now)


def aborted(board: Board, reason: str, failure: Optional[Failure] = None) -> Board:
    return replace(board, last_abort=reason, last_failure=failure)


def _lagging(values: Mapping[str, float], lag: float) -> set[str]:
    """Who is more than `lag` below the median, when at least two members tell."""
    if len(values) < 2:
        return set()
    median = _median(values.values())
    return {node for node, value in values.items() if value < (1 - lag) * median}


def _median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def check_stragglers(board: Board, now: float, after: float, lag: float = STRAGGLER_LAG) -> tuple[Board, list[str]]:
    """Update who lags since when; the new board and the members newly marked stragglers.
    Only members whose commands run count; a member catching up is cleared."""
    running = {n: r.progress for n, r in board.members.items() if r.progress is not None and r.exit_code is None}
    steps = {n: float(p.step) for n, p in running.items() if p.step is not None}
    speeds = {n: p.images_per_s for n, p in running.items() if p.images_per_s is not None}
    lagging = _lagging(steps, lag) | _lagging(speeds, lag)
    members, marked = dict(board.members), []
    for node_id, record in board.members.items():
        if node_id not in lagging:
            members[node_id] = replace(record, lagging_since=None, straggler=False)
            continue
        since = record.lagging_since if record.lagging_since is not None else now
        straggler = now - since >= after
        if straggler and not record.straggler:
            marked.append(node_id)
        members[node_id] = replace(record, lagging_since=since, straggler=straggler)
    return replace(board, members=members), marked


# -- the view handed out --------------------------------------------------------------------


@record
class MemberView:
    peer: Peer
    rank: Optional[int]
    phase: Phase
    round: int
    uptime: Optional[float] = None  # seconds the command has run
    exit_code: Optional[int] = None
    progress: Optional[Progress] = None
    straggler: bool = False


@record
class JobView:
    job: str
    round: int
    phase: str  # the round's phase (RoundPhase's value)
    expect: Size
    coordinator: Optional[Peer]
    members: tuple[MemberView, ...] = ()
    restarts: int = 0
    last_abort: Optional[str] = None
    coordinating: bool = True  # False: the node asked only knows who coordinates
    last_failure: Optional[Failure] = None


def _member_phase(state: Round, board: Board, node_id: str) -> Phase:
    if state.membership is None:
        return Phase.WAITING
    if board.record(node_id).exit_code is not None or node_id in state.succeeded:
        return Phase.FINISHED
    if state.phase is RoundPhase.FROZEN or board.released_at is None:
        return Phase.FROZEN
    return Phase.RUNNING if state.phase is RoundPhase.RELEASED else Phase.FINISHED


def _uptime(board: Board, node_id: str, now: float) -> Optional[float]:
    if board.released_at is None:
        return None
    end = board.record(node_id).finished_at
    return max(0.0, (end if end is not None else now) - board.released_at)


def job_view(state: Round, board: Board, coordinator: Peer, now: float) -> JobView:
    """The job as the coordinator holding `state` and `board` sees it at `now`."""
    members = state.membership.members if state.membership else state.joined
    board = for_round(board, state.number)
    rows = tuple(
        MemberView(
            peer=peer,
            rank=rank if state.membership else None,
            phase=_member_phase(state, board, peer.node_id),
            round=state.number,
            uptime=_uptime(board, peer.node_id, now),
            exit_code=board.record(peer.node_id).exit_code,
            progress=board.record(peer.node_id).progress,
            straggler=board.record(peer.node_id).straggler,
        )
        for rank, peer in enumerate(members)
    )
    return JobView(
        job=state.job, round=state.number, phase=state.phase.value, expect=state.expect,
        coordinator=coordinator, members=rows, restarts=state.number - 1, last_abort=board.last_abort,
        last_failure=board.last_failure,
    )


def coordinator_endpoint(adverts: Iterable[Advert], job: str) -> Optional[str]:
    """Where to ask about `job`, from what discovery heard: the coordinator the newest
    round's running members name, else the lowest address of that round's nodes (the one
    the election picks)."""
    ours = [a for a in adverts if a.job == job]
    if not ours:
        return None
    newest = max(a.round for a in ours)
    current = [a for a in ours if a.round == newest]
    named = sorted(a.coordinator for a in current if a.coordinator)
    if named:
        return max(set(named), key=named.count)
    return elect_coordinator(a.peer for a in current).endpoint


# -- showing it ------------------------------------------------------------------------------

COLUMNS = ("RANK", "ADDRESS", "NODE", "PHASE", "ROUND", "UPTIME", "EXIT", "PROGRESS")


def _row(member: MemberView) -> tuple[str, ...]:
    progress = describe(member.progress) if member.progress else ""
    return (
        "-" if member.rank is None else str(member.rank),
        str(member.peer.address),
        member.peer.node_id,
        member.phase.value,
        str(member.round),
        "-" if member.uptime is None else format_duration(member.uptime),
        "-" if member.exit_code is None else str(member.exit_code),
        progress + (" [straggler]" if member.straggler else ""),
    )


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def job_table(view: JobView) -> str:
    """A head line about the job, then one row per member."""
    coordinator = view.coordinator.endpoint if view.coordinator else "unknown"
    head = (
        f"job {view.job}: round {view.round} ({view.phase}), {len(view.members)} of {view.expect.describe()} "
        f"members, {view.restarts} restart{'s' if view.restarts != 1 else ''}, coordinator {coordinator}"
    )
    lines = [head]
    if view.last_abort:
        lines.append(f"last round ended: {view.last_abort}")
    if view.last_failure is not None:
        lines.append(f"last failure: {view.last_failure.headline()}")
        lines += [f"    {line}" for line in view.last_failure.details()]
    if view.members:
        lines += _table([COLUMNS] + [_row(m) for m in view.members])
    else:
        lines.append("no member has joined yet")
    return "\n".join(lines)


def job_to_dict(view: JobView) -> dict[str, Any]:
    """The JSON of `rendezvous status --job NAME --json` (never NaN: unknowns are null)."""
    return {
        "job": view.job,
        "round": view.round,
        "phase": view.phase,
        **view.expect.fields(),
        "restarts": view.restarts,
        "last_abort_reason": view.last_abort,
        "last_failure": failure_to_dict(view.last_failure) if view.last_failure else None,
        "coordinator": peer_to_dict(view.coordinator) if view.coordinator else None,
        "members": [
            {
                **peer_to_dict(m.peer),
                "rank": m.rank,
                "phase": m.phase.value,
                "round": m.round,
                "command_uptime_seconds": m.uptime,
                "exit_code": m.exit_code,
                "progress": progress_to_dict(m.progress) if m.progress else None,
                "straggler": m.straggler,
            }
            for m in view.members
        ],
    }
