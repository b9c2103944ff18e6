"""A node's state as plain data, and the ways it is shown: systemd's STATUS= line, the
progress line while waiting, the block `rendezvous status` prints and its JSON.

The node builds a `NodeStatus` whenever something changes (and on every Status call); it
holds durations, never clock readings, so everything here is a pure function of it.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from .advert import Advert, Phase
from .failure import Failure, failure_to_dict
from .peer import Peer
from .gpus import describe_devices
from .preflight import Fingerprint
from .progress import Progress, describe, progress_to_dict
from .record import field, record
from .size import Size
from .tf_config import Membership, build_tf_config


@record
class NodeStatus:
    node: Peer
    job: str
    expect: Size
    phase: Phase = Phase.WAITING
    round: int = 1
    # The live peers of the job this node has discovered, itself included, and those it
    # suspects of being gone (left out of the election and of the count).
    seen: tuple[Peer, ...] = ()
    unreachable: tuple[Peer, ...] = ()
    # Peers not heard from for too long (core.heard), with the seconds since: not seen.
    # A peer is shown in one state: silent before unreachable (its silence says since when,
    # and both leave it out of the count), either before seen (see __post_init__).
    silent: tuple[tuple[Peer, float], ...] = ()
    # The coordinator this node follows while waiting: the one it joins.
    following: Optional[Peer] = None
    membership: Optional[Membership] = None
    trainer_pid: Optional[int] = None
    trainer_uptime: Optional[float] = None  # seconds since the command started
    # --prewarm: the warm interpreter waiting for a round, the next one's while one runs
    warm_pid: Optional[int] = None
    warm_rss: Optional[int] = None  # its resident memory, bytes
    exit_code: Optional[int] = None
    fingerprint: Optional[Fingerprint] = None  # what this node's command runs with
    # The preflight's word on the last round: its refusal, or the differences allowed.
    preflight: tuple[str, ...] = ()
    # By node id, what the peers advertise: TensorFlow version, GPUs (`8x NVIDIA H100`).
    tensorflow: Mapping[str, str] = field(default_factory=dict)
    gpus: Mapping[str, str] = field(default_factory=dict)
    progress: Optional[Progress] = None  # what the command last wrote to its progress file
    rendezvous_seconds: Optional[float] = None  # from the round's start to the release
    # Why nothing is seen, and what to do, once waiting alone has lasted (core.seeds).
    hint: Optional[str] = None
    # The last command failure this node knows of: its own, or the one an abort reported.
    failure: Optional[Failure] = None
    # Why the round ended, while this node stops its command before the next round.
    ending: Optional[str] = None

    def __post_init__(self) -> None:
        # Each peer in one state: silent before unreachable, either before seen.
        silent = {p.node_id: (p, age) for p, age in reversed(self.silent)}  # once each, the first given
        unreachable = {p for p in self.unreachable if p.node_id not in silent}
        gone = set(silent) | {p.node_id for p in unreachable}
        object.__setattr__(self, "silent", tuple(sorted(silent.values())))
        object.__setattr__(self, "unreachable", tuple(sorted(unreachable)))
        object.__setattr__(self, "seen", tuple(sorted({p for p in self.seen if p.node_id not in gone})))

    @property
    def rank(self) -> Optional[int]:
        if self.membership is None:
            return None
        try:
            return self.membership.rank_of(self.node.node_id)
        except KeyError:
            return None

    @property
    def coordinator(self) -> Optional[Peer]:
        """The frozen job's worker 0, or while waiting the coordinator this node follows."""
        if self.membership is not None:
            return self.membership.coordinator
        return self.following

    def as_advert(self, auth: bool = False) -> Advert:
        """What this status claims, in an advert's terms: a peer's advert counts once its
        own Status (over gRPC, signed when the job has a token) says the same."""
        coordinator = self.membership.coordinator.endpoint if self.membership else None
        return Advert(
            peer=self.node, job=self.job, expect=self.expect, phase=self.phase if coordinator else Phase.WAITING,
            round=self.round, coordinator=coordinator, auth=auth,
        )

    @property
    def tf_config(self) -> Optional[dict[str, Any]]:
        rank = self.rank
        if self.membership is None or rank is None:
            return None
        return build_tf_config(self.membership, rank)


def printable(text: str, limit: int = 300) -> str:
    """Text from the network or a file, safe for a terminal: control and other unprintable
    characters escaped, at most `limit` characters."""
    escaped = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[: limit + 1])
    return escaped if len(escaped) <= limit else escaped[:limit] + "..."


def _worker(status: NodeStatus) -> str:
    world = status.membership.world_size if status.membership else status.expect.max
    return f"worker {status.rank} of {world}"


def status_line(status: NodeStatus) -> str:
    """One short line for systemd's STATUS=: `waiting for peers 1/2`, `round 1, worker 1 of
    2 training`, with progress `round 1, worker 0 of 4, epoch 12/60, loss 0.84, 2,310 img/s`;
    from round 2 on, waiting says its round too."""
    line = _doing(status)
    if status.failure is not None:  # what `systemctl status` shows of the cause
        f = status.failure
        line += f"; last failure: {f.address} rank {'?' if f.rank is None else f.rank}: {f.cause[:120]}"
    return line


def _doing(status: NodeStatus) -> str:
    if status.ending:
        return f"round {status.round}, aborting: {status.ending}"
    if status.phase is Phase.WAITING or status.rank is None:
        waiting = f"waiting for peers {status.expect.progress(len(status.seen) or 1)}"
        return waiting if status.round == 1 else f"round {status.round}, {waiting}"
    if status.phase is Phase.FROZEN:
        doing = f"{_worker(status)}: starting"
    elif status.phase is Phase.RUNNING and status.progress and describe(status.progress):
        doing = f"{_worker(status)}, {describe(status.progress)}"
    elif status.phase is Phase.RUNNING:
        doing = f"{_worker(status)} training"
    elif status.exit_code is None:
        doing = "finished"
    else:
        doing = f"finished: {_worker(status)}, exit code {status.exit_code}"
    return f"round {status.round}, {doing}"


#: How many peers a progress line names at most.
PROGRESS_LISTED = 12


def describe_progress(
    job: str,
    expect: Size,
    peers: Sequence[Peer],
    coordinator: Optional[Peer] = None,
    unreachable: Sequence[Peer] = (),
) -> str:
    """`job 'x': 2/3 peers seen: 10.0.0.9 (...) [coordinator], 10.0.0.10 (...)`.

    `peers` are the live ones; `unreachable` ones are listed after them, marked and not
    counted. `coordinator` is the one this node follows, marked wherever it is. At most
    `PROGRESS_LISTED` are named (the coordinator always), the rest counted: `and 290 more
    (287 unreachable)`, so that hundreds of adverts (a flood of forged ones) make no
    line of kilobytes at each change."""

    live, gone = set(peers), set(unreachable)  # hundreds of peers: no list searched per peer

    def name(p: Peer) -> str:
        mark = " [coordinator]" if p == coordinator else " [unreachable]" if p in gone else ""
        return p.describe() + mark

    listed = sorted(peers) + sorted(gone - live)
    named = listed[:PROGRESS_LISTED]
    if coordinator in listed and coordinator not in named:
        named[-1] = coordinator
    line = f"job {job!r}: {expect.progress(len(peers))} peers seen: " + ", ".join(map(name, named))
    rest = [p for p in listed if p not in named]
    if rest:
        down = sum(p not in live for p in rest)
        line += f", and {len(rest)} more" + (f" ({down} unreachable)" if down else "")
    return line


def progress_line(status: NodeStatus) -> str:
    """Who has been seen while waiting: `job 'x': 2/3 peers seen: 10.0.0.9 (...) [coordinator], ...`;
    once the preflight has spoken, what it said: `preflight: 10.0.0.12 has 4 GPUs, the others 8`."""
    if status.preflight:
        return "; ".join(status.preflight)
    line = describe_progress(
        status.job, status.expect, status.seen or (status.node,), status.coordinator,
        (*status.unreachable, *(p for p, _ in status.silent)),
    )
    return f"{line} ({status.hint})" if status.hint else line


def format_duration(seconds: float) -> str:
    """`4.2s`, `2m 05s`, `3h 02m 05s`."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s"


def _phase_text(status: NodeStatus) -> str:
    if status.ending:
        return f"aborting, stopping the command: {status.ending}"
    if status.phase is Phase.WAITING or status.rank is None:
        return f"{status.phase.value}: {len(status.seen) or 1} of {status.expect.describe()} peers seen"
    if status.phase is Phase.FINISHED and status.exit_code is not None:
        return f"finished: {_worker(status)}, exit code {status.exit_code}"
    return f"{status.phase.value}: {_worker(status)}"


def describe_status(status: NodeStatus, daemon_pid: Optional[int] = None) -> str:
    """The block `rendezvous status` prints for one daemon."""
    rows: list[tuple[str, str]] = [
        ("job", f"{status.job}, round {status.round}"),
        ("phase", _phase_text(status)),
    ]
    coordinator = status.coordinator
    if coordinator is None:
        rows.append(("coordinator", "none yet"))
    else:
        note = "" if status.membership else ", the one this node joins"
        rows.append(("coordinator", f"{coordinator.endpoint} ({coordinator.node_id}){note}"))
    if status.membership is None:
        rows.append(("seen", ", ".join(p.describe() for p in status.seen) or status.node.describe()))
        rows.append(("members", "not frozen yet"))
    else:
        table = [("rank", "address", "node", "TensorFlow", "TF version", "GPUs")] + [
            (str(rank), str(p.address), p.node_id, p.tf_endpoint,
             status.tensorflow.get(p.node_id, "-"), status.gpus.get(p.node_id, "-"))
            for rank, p in enumerate(status.membership.members)
        ]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
        lines = [
            line + ("  <- this node" if i and status.membership.members[i - 1] == status.node else "")
            for i, line in enumerate(lines)
        ]
        rows.append(("members", lines[0]))
        rows.extend(("", line) for line in lines[1:])
    if status.silent:
        rows.append(("silent", ", ".join(f"{p.describe()}, heard {format_duration(age)} ago"
                                          for p, age in status.silent)))
    if status.unreachable:
        rows.append(("unreachable", ", ".join(p.describe() for p in status.unreachable)
                     + ": left out of the election until it answers"))
    if status.fingerprint is not None:
        rows.append(("environment", status.fingerprint.describe()))
    if status.membership is not None and status.fingerprint is not None:
        rows.append(("devices", _devices(status)))
    if status.node.data_address is not None:
        interface = status.fingerprint.data_interface if status.fingerprint else ""
        rows.append(("data network", f"{status.node.data_address}" + (f" ({interface})" if interface else "")))
    rows.extend(("preflight", line) for line in status.preflight)
    tf_config = status.tf_config
    rows.append(("TF_CONFIG", json.dumps(tf_config, separators=(",", ":")) if tf_config else "not yet"))
    if status.trainer_pid is None:
        rows.append(("trainer", "not started"))
    else:
        uptime = "" if status.trainer_uptime is None else f", up {format_duration(status.trainer_uptime)}"
        rows.append(("trainer", f"pid {status.trainer_pid}{uptime}"))
    if status.warm_pid is not None:
        memory = "" if status.warm_rss is None else f", {status.warm_rss / 2**20:.0f} MiB resident"
        rows.append(("warm spare", f"pid {status.warm_pid}{memory}"))
    if status.progress is not None and describe(status.progress):
        rows.append(("progress", describe(status.progress)))
    if status.failure is not None:
        rows.append(("last failure", status.failure.headline()))
        rows.extend(("", f"  {line}") for line in status.failure.details())
    width = max(len(label) for label, _ in rows)
    head = f"node {status.node.node_id} at {status.node.endpoint}"
    if daemon_pid is not None:
        head += f" (rendezvous pid {daemon_pid})"
    return "\n".join([head] + [f"  {label.ljust(width)}  {value}".rstrip() for label, value in rows])


def _devices(status: NodeStatus) -> str:
    """`GPUs 0,1,2,3 (--gpus min)`: what this node's command uses in the frozen round."""
    assert status.membership is not None and status.fingerprint is not None
    used = describe_devices(status.membership.gpus, status.fingerprint.gpu_ids)
    return used if status.membership.gpus is None else f"{used} (--gpus {status.fingerprint.gpu_option})"


def _used_devices(status: NodeStatus) -> Optional[list[str]]:
    if status.membership is None or status.fingerprint is None:
        return None
    count = status.membership.gpus
    return list(status.fingerprint.gpu_ids[:count] if count is not None else status.fingerprint.gpu_ids)


def peer_to_dict(peer: Peer) -> dict[str, Any]:
    shown = {"node_id": peer.node_id, "address": str(peer.address), "port": peer.port, "tf_port": peer.tf_port}
    return shown if peer.data_address is None else {**shown, "data_address": str(peer.data_address)}


def status_to_dict(status: NodeStatus) -> dict[str, Any]:
    """The JSON of `rendezvous status --json` for one daemon."""
    members = status.membership.members if status.membership else ()
    coordinator = status.coordinator
    return {
        "node": peer_to_dict(status.node),
        "job": status.job,
        "round": status.round,
        "phase": status.phase.value,
        **status.expect.fields(),
        "rank": status.rank,
        "world_size": len(members) or None,
        "coordinator": peer_to_dict(coordinator) if coordinator else None,
        "members": [
            {"rank": rank, **peer_to_dict(p), "tensorflow": status.tensorflow.get(p.node_id),
             "gpus": status.gpus.get(p.node_id)}
            for rank, p in enumerate(members)
        ],
        "seen": [peer_to_dict(p) for p in status.seen],
        "silent": [{**peer_to_dict(p), "heard_seconds_ago": round(age, 1)} for p, age in status.silent],
        "unreachable": [peer_to_dict(p) for p in status.unreachable],
        "tf_config": status.tf_config,
        "trainer_pid": status.trainer_pid,
        "trainer_uptime_seconds": status.trainer_uptime,
        "warm_spare": {"pid": status.warm_pid, "rss_bytes": status.warm_rss} if status.warm_pid else None,
        "exit_code": status.exit_code,
        "environment": fingerprint_to_dict(status.fingerprint) if status.fingerprint else None,
        "preflight": list(status.preflight),
        "gpu_count": status.membership.gpus if status.membership else None,
        "devices": _used_devices(status),
        "progress": progress_to_dict(status.progress) if status.progress else None,
        "failure": failure_to_dict(status.failure) if status.failure else None,
        "ending": status.ending,
    }


def fingerprint_to_dict(fingerprint: Fingerprint) -> dict[str, Any]:
    return {
        "python": fingerprint.python,
        "tensorflow": fingerprint.tensorflow,
        "gpus": list(fingerprint.gpus),
        "same_files": dict(fingerprint.files),
        "gpu_ids": list(fingerprint.gpu_ids),
        "gpus_option": fingerprint.gpu_option,
        "data_interface": fingerprint.data_interface or None,
    }
