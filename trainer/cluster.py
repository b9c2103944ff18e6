"""What TF_CONFIG says about this process, and the trainer's exit statuses: read by both the
command line and the training, without TensorFlow."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from trainer import ConfigError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_CLUSTER = 3


@dataclass(frozen=True)
class ClusterInfo:
    """What TF_CONFIG says about this process, read without TensorFlow."""

    task_type: str | None
    task_index: int
    num_workers: int
    worker_index: int  # global rank: chief first, then workers

    @property
    def is_chief(self) -> bool:
        return self.worker_index == 0


def read_tf_config(environ=os.environ) -> ClusterInfo:
    raw = environ.get("TF_CONFIG", "").strip()
    if not raw:
        return ClusterInfo(None, 0, 1, 0)
    try:
        conf = json.loads(raw)
        cluster = conf["cluster"]
        task = conf["task"]
        task_type = task["type"]
        task_index = int(task["index"])
        chiefs = list(cluster.get("chief", []))
        workers = list(cluster.get("worker", []))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(
            f"TF_CONFIG is not valid: {type(e).__name__}: {e}; expected JSON like "
            '{"cluster": {"worker": ["host:port", ...]}, "task": {"type": "worker", "index": 0}}'
        ) from None
    if len(chiefs) > 1:
        raise ConfigError("TF_CONFIG has more than one chief")
    members = {"chief": chiefs, "worker": workers}
    if task_type not in members:
        raise ConfigError(f"TF_CONFIG task type {task_type!r} is not 'chief' or 'worker'")
    if not 0 <= task_index < len(members[task_type]):
        raise ConfigError(
            f"TF_CONFIG task index {task_index} is outside the {len(members[task_type])} "
            f"{task_type} address(es) in the cluster"
        )
    rank = task_index if task_type == "chief" else len(chiefs) + task_index
    return ClusterInfo(task_type, task_index, len(chiefs) + len(workers), rank)
