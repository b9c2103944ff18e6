"""Options from Slurm: inside a job step (`srun rendezvous join -- ...` in an sbatch script,
one task per node), what `join` would otherwise be told comes from the variables Slurm
sets for the step.

    --expect      the step's node count (SLURM_STEP_NUM_NODES)
    --job         slurm-<job id>.<step id>: every task of the step, no other step
    --peer        every node of the step's node list (SLURM_STEP_NODELIST, Slurm's compressed
                  host list, core.hostlist), at --port if given: seeds, no multicast
    --allow-host  the same nodes: a host outside the step is refused
    --gpus        none when Slurm gave the step no GPU (no CUDA_VISIBLE_DEVICES and no
                  SLURM_*GPUS* variable): the node's GPUs then belong to other jobs

These are the lowest layer: an option given on the command line, in RENDEZVOUS_* or in the
config file wins. Pure: the environment comes in as a mapping.
"""

from __future__ import annotations

from typing import Mapping, Optional

from ..core.hostlist import expand
from ..core.record import record
from ..core.size import Size
from ..errors import ConfigError

STEP_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_ID")
NODELIST = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")
NODE_COUNT = ("SLURM_STEP_NUM_NODES", "SLURM_JOB_NUM_NODES")
TASK_COUNT = "SLURM_STEP_NUM_TASKS"
# What Slurm sets when a step has GPUs (gres/gpu, --gpus, --gpus-per-node, ...).
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
                 "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK")
PREFIX = "slurm-"


@record
class SlurmStep:
    job_id: str
    step_id: str
    nodelist: str  # as Slurm wrote it
    nodes: tuple[str, ...]  # expanded, in Slurm's order
    has_gpus: bool

    @property
    def job(self) -> str:
        return f"{PREFIX}{self.job_id}.{self.step_id}"


def in_step(environ: Mapping[str, str]) -> bool:
    """Whether this process runs inside a Slurm job step."""
    return all(environ.get(v) for v in STEP_VARIABLES)


def _first(environ: Mapping[str, str], names: tuple[str, ...]) -> tuple[str, str]:
    for name in names:
        if environ.get(name):
            return name, environ[name]
    raise ConfigError(f"--discovery slurm: {' or '.join(names)} is not set: is this a Slurm job step?")


def read_step(environ: Mapping[str, str]) -> SlurmStep:
    """The step this process runs in; ConfigError naming the variable that is missing or bad."""
    if not in_step(environ):
        raise ConfigError(
            "--discovery slurm: not inside a Slurm job step (SLURM_JOB_ID and SLURM_STEP_ID are not "
            "both set): run it as `srun rendezvous join ...` in an sbatch script or an allocation"
        )
    list_name, text = _first(environ, NODELIST)
    try:
        nodes = expand(text)
    except ValueError as exc:
        raise ConfigError(f"{list_name}: {exc}") from None
    count_name, count = _first(environ, NODE_COUNT)
    if count.strip() != str(len(nodes)):
        raise ConfigError(f"{count_name} is {count!r} but {list_name} {text!r} names {len(nodes)} nodes")
    tasks = environ.get(TASK_COUNT)
    if tasks and tasks.strip() != count.strip():
        raise ConfigError(
            f"the Slurm step runs {tasks} tasks ({TASK_COUNT}) on {count} nodes: rendezvous join runs once "
            "per node and starts that node's command; give srun --ntasks-per-node=1"
        )
    has_gpus = any(environ.get(v) for v in GPU_VARIABLES)
    return SlurmStep(environ["SLURM_JOB_ID"], environ["SLURM_STEP_ID"], text, nodes, has_gpus)


def step_values(step: SlurmStep, port: Optional[int]) -> dict[str, tuple[object, str]]:
    """What the step says, each option as (value, where it came from)."""
    where = f"Slurm ({NODELIST[0]}={step.nodelist})"
    seeds = tuple(f"{host}:{port}" if port else host for host in step.nodes)
    values: dict[str, tuple[object, str]] = {
        "expect": (Size(len(step.nodes), len(step.nodes)), f"Slurm ({NODE_COUNT[0]}={len(step.nodes)})"),
        "job": (step.job, f"Slurm (SLURM_JOB_ID={step.job_id}, SLURM_STEP_ID={step.step_id})"),
        "peers": (seeds, where),
        "allow_hosts": (tuple(dict.fromkeys(step.nodes)), where),
    }
    if not step.has_gpus:
        values["gpus"] = ("none", "Slurm (the step has no GPU: no CUDA_VISIBLE_DEVICES, no SLURM_*GPUS*)")
    return values


def describe(name: str, value: object) -> str:
    """One value taken from Slurm, as the log says it."""
    flag = {"peers": "--peer", "allow_hosts": "--allow-host"}.get(name, "--" + name.replace("_", "-"))
    if isinstance(value, tuple):
        return f"{flag} {','.join(map(str, value))}"
    return f"{flag} {value}"
