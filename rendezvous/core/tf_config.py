"""The membership a round freezes, and the TF_CONFIG / environment each member gets."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Sequence

from .digest import sha256_hex
from .failure import ERROR_FILE_VARIABLE
from .gpus import SOCKET_VARIABLES, VISIBLE, device_environment
from .peer import Peer
from .progress import VARIABLE as PROGRESS_VARIABLE
from .record import record

#: systemd's notify protocol, meant for the daemon only: the command it starts does not
#: inherit them (a command that wrote READY=1 would speak for the daemon).
NOTIFY_VARIABLES = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")

#: Every variable the command gets on top of the environment it inherits, and what it holds:
#: the one list of them (`join --help` and the reference are made from it; a test checks it
#: against what `command_environment` sets).
COMMAND_VARIABLES: Mapping[str, str] = {
    "TF_CONFIG": 'the cluster and this worker\'s task: `{"cluster": {"worker": [HOST:TF_PORT, ...]}, '
                 '"task": {"type": "worker", "index": RANK}}`, the same ordered list on every node',
    "RENDEZVOUS_RANK": "this worker's index in the list, 0 to WORLD_SIZE - 1 (worker 0 is the chief)",
    "RENDEZVOUS_WORLD_SIZE": "the number of workers of this round",
    "RENDEZVOUS_JOB": "the job's name (`--job`)",
    "RENDEZVOUS_ROUND": "the round: 1, then one more after each restart",
    "RENDEZVOUS_RESTART_COUNT": "the restarts so far (the round less 1)",
    "RENDEZVOUS_NODE_ID": "this node's random id, as `rendezvous status` and the logs show it",
    "RENDEZVOUS_COORDINATOR": "`ADDRESS:PORT` of the coordinating daemon (rendezvous' own gRPC port, not TensorFlow's)",
    "RENDEZVOUS_CLUSTER_DIGEST": "a digest of the member list, the same on every node of the round",
    PROGRESS_VARIABLE: "a file the command may append progress lines to (JSON objects; `rendezvous.script` "
                       "does it for a Keras model)",
    ERROR_FILE_VARIABLE: "a file the command may write the exception it dies of to (JSON; `rendezvous.script` "
                         "does it), shown by every node when the command fails",
    VISIBLE: "with `--gpus`: the GPUs of this node the command uses (not set when it is inherited)",
    SOCKET_VARIABLES[0]: "with `--data-interface` or `--data-address`: the interface of the data network, "
                         "for NCCL (not set when it is inherited)",
    SOCKET_VARIABLES[1]: "the same, for Gloo",
}
#: The variables that depend on an option: every other one is always set.
OPTIONAL_VARIABLES = (VISIBLE, *SOCKET_VARIABLES)


@record
class Membership:
    """The frozen, ordered member list of one round. Index i is TensorFlow worker i.
    `gpus`: how many GPUs every member's command uses (`--gpus`); None: each its own."""

    job: str
    round: int
    members: tuple[Peer, ...]
    gpus: Optional[int] = None

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError("a membership needs at least one member")
        if list(self.members) != sorted(self.members):
            raise ValueError("members must be sorted by address")
        ids = [p.node_id for p in self.members]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate node ids in membership: {ids}")

    @classmethod
    def freeze(cls, job: str, round: int, peers: "frozenset[Peer] | list[Peer] | tuple[Peer, ...]",
               gpus: Optional[int] = None) -> "Membership":
        return cls(job=job, round=round, members=tuple(sorted(peers)), gpus=gpus)

    @property
    def world_size(self) -> int:
        return len(self.members)

    @property
    def coordinator(self) -> Peer:
        return self.members[0]

    def rank_of(self, node_id: str) -> int:
        for rank, peer in enumerate(self.members):
            if peer.node_id == node_id:
                return rank
        raise KeyError(f"node {node_id} is not a member of job {self.job!r} round {self.round}")

    @property
    def digest(self) -> str:
        return cluster_digest(self)


def cluster_digest(membership: Membership) -> str:
    """A digest of everything every worker must agree on: job, round, ordered endpoints
    (each on its data network, if any), and the GPUs of each when --gpus chose a number."""
    agreed: dict[str, Any] = {} if membership.gpus is None else {"gpus": membership.gpus}
    canonical = json.dumps(
        {
            "job": membership.job,
            "round": membership.round,
            "workers": [[p.node_id, p.tf_endpoint] for p in membership.members],
            **agreed,
        },
        separators=(",", ":"),
        sort_keys=True,
    )
    return sha256_hex(canonical.encode())


def build_tf_config(membership: Membership, rank: int) -> dict[str, Any]:
    """TF_CONFIG for worker `rank`: the same ordered cluster list on every worker."""
    if not 0 <= rank < membership.world_size:
        raise ValueError(f"rank {rank} out of range for {membership.world_size} workers")
    return {
        "cluster": {"worker": [p.tf_endpoint for p in membership.members]},
        "task": {"type": "worker", "index": rank},
    }


def launch_environment(membership: Membership, node_id: str) -> Mapping[str, str]:
    """The variables a member's command gets on top of the inherited environment."""
    rank = membership.rank_of(node_id)
    return {
        "TF_CONFIG": json.dumps(build_tf_config(membership, rank), separators=(",", ":")),
        "RENDEZVOUS_RANK": str(rank),
        "RENDEZVOUS_WORLD_SIZE": str(membership.world_size),
        "RENDEZVOUS_JOB": membership.job,
        "RENDEZVOUS_ROUND": str(membership.round),
        "RENDEZVOUS_RESTART_COUNT": str(membership.round - 1),
        "RENDEZVOUS_NODE_ID": node_id,
        "RENDEZVOUS_COORDINATOR": membership.coordinator.endpoint,
        "RENDEZVOUS_CLUSTER_DIGEST": membership.digest,
    }


def command_environment(membership: Membership, node_id: str, inherited: Mapping[str, str],
                        devices: Sequence[str] = (), data_interface: Optional[str] = None,
                        extra: Mapping[str, str] = {}) -> dict[str, str]:
    """Everything a member's command gets on top of the environment it inherits
    (`inherited`, the daemon's): TF_CONFIG and the RENDEZVOUS_* variables, the GPUs of this
    node's `devices` the job agreed on (`CUDA_VISIBLE_DEVICES`), the data network's
    interface for NCCL and Gloo, and `extra` (the progress file). The one place that
    computes it, whichever way the command is started."""
    env = dict(launch_environment(membership, node_id))
    env.update(device_environment(membership.gpus, devices, inherited, data_interface))
    env.update(extra)
    return env
