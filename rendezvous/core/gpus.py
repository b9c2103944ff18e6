"""`--gpus`: how many GPUs each node's command uses, agreed by the job at the freeze.

MultiWorkerMirroredStrategy needs the same number of replicas on every worker, so a job of
machines with different GPU counts must give each command the same number of them:

    all   every GPU of each node (the default): a count difference refuses the job
    min   the smallest GPU count among the members, on every node
    N     exactly N on every node; a node with fewer refuses the job
    none  no GPU at all (CPU training on GPU machines)

The count goes out with the frozen member list (`Membership.gpus`), so that every node
agrees on it, and is decided again at every round (elastic size, restarts). Each node then
names that many of its own GPUs in `CUDA_VISIBLE_DEVICES`: the lowest indices, or the first
entries of a `CUDA_VISIBLE_DEVICES` it already has. Pure: the daemon passes the
environment in.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping, Optional, Sequence

from .numbers import parse_whole
from .record import record

#: Set in the command's environment to the data network's interface, unless already set.
SOCKET_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
VISIBLE = "CUDA_VISIBLE_DEVICES"


class GpuMode(str, Enum):
    ALL = "all"
    MIN = "min"
    COUNT = "count"  # written as the number
    NONE = "none"


@record
class GpuPolicy:
    """What `--gpus` says: a mode, and with COUNT the number."""

    mode: GpuMode = GpuMode.ALL
    count: int = 0

    @classmethod
    def parse(cls, text: str) -> "GpuPolicy":
        """`all`, `min`, `none` or a whole number (0 is `none`); ValueError naming the text."""
        word = text.strip().lower()
        if word in (GpuMode.ALL.value, GpuMode.MIN.value, GpuMode.NONE.value):
            return cls(GpuMode(word))
        count = parse_whole(word, max_digits=4)
        if count is None:
            raise ValueError(f"must be all, min, none or a number of GPUs, got {text!r}")
        return cls(GpuMode.COUNT, count) if count else cls(GpuMode.NONE)

    def describe(self) -> str:
        return str(self.count) if self.mode is GpuMode.COUNT else self.mode.value


@record
class GpuChoice:
    """The job's decision at the freeze: `count` GPUs on every node (None: each node's
    own, untouched), or `refusal` naming the nodes that cannot; `note`, where the
    members' counts differ, says what the job uses, for every node's log."""

    count: Optional[int] = None
    refusal: Optional[str] = None
    note: Optional[str] = None


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def choose_count(policy: GpuPolicy, counts: Sequence[tuple[str, int]]) -> GpuChoice:
    """The GPU count of the job whose members (`name`, GPU count) are `counts`, in member
    order. `all` decides nothing here (the preflight compares the counts)."""
    if policy.mode is GpuMode.ALL or not counts:
        return GpuChoice()
    if policy.mode is GpuMode.NONE:
        return GpuChoice(0)
    if policy.mode is GpuMode.MIN:
        least = min(n for _, n in counts)
        fewest = [name for name, n in counts if n == least]
        if len(fewest) == len(counts):
            return GpuChoice(least)
        return GpuChoice(least, note=f"{', '.join(fewest)} {'has' if len(fewest) == 1 else 'have'} "
                                     f"{_gpus(least)}: every node uses {least} (--gpus min)")
    short = [f"{name} has {_gpus(n)}" for name, n in counts if n < policy.count]
    if short:
        return GpuChoice(refusal=f"{', '.join(short)}; --gpus {policy.count} needs {_gpus(policy.count)} on "
                                 "every node (--gpus min uses as many as the smallest node has)")
    return GpuChoice(policy.count)


def visible_devices(inherited: Optional[str], found: int) -> tuple[str, ...]:
    """The GPUs a command of this node can see, as `CUDA_VISIBLE_DEVICES` names them:
    `0`..`found-1` for the `found` GPUs nvidia-smi lists, or the entries of the
    `CUDA_VISIBLE_DEVICES` this node already has (`inherited`): CUDA stops at the first
    index that is not one of the machine's, and so does this. UUIDs (`GPU-...`, `MIG-...`)
    count as one GPU each."""
    if inherited is None:
        return tuple(str(i) for i in range(found))
    entries = []
    for entry in (e.strip() for e in inherited.split(",")):
        index = parse_whole(entry, max_digits=4)
        if index is None and not entry.upper().startswith(("GPU-", "MIG-")):
            break
        if index is not None and index >= found:
            break
        entries.append(entry)
    return tuple(entries)


def device_environment(count: Optional[int], devices: Sequence[str], inherited: Mapping[str, str],
                       data_interface: Optional[str] = None) -> dict[str, str]:
    """What the command gets for `--gpus` (`count` of this node's `devices`; None leaves
    them alone) and for the data network (its interface for NCCL and Gloo, unless the
    user's environment names one already)."""
    env: dict[str, str] = {}
    if count is not None:
        env[VISIBLE] = ",".join(devices[:count])
    if data_interface:
        env.update({name: data_interface for name in SOCKET_VARIABLES if name not in inherited})
    return env


def describe_devices(count: Optional[int], devices: Sequence[str]) -> str:
    """`GPUs 0,1,2,3`, `no GPU`, or `every GPU (0,1)` when --gpus all leaves them alone."""
    if count is None:
        return f"every GPU ({','.join(devices)})" if devices else "no GPU"
    used = devices[:count]
    return f"GPUs {','.join(used)}" if used else "no GPU"
