"""`srun rendezvous join` in a real Slurm cluster (slurmctld and 3 slurmd in network
namespaces), with no rendezvous option: what the job step gives is enough."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patience import HANG, wait_until
from peers import FAULT_COMMAND, RECORDER, alive, assert_consistent, records, wait_for_records, wait_for_starts

pytestmark = pytest.mark.netns

JOIN = [sys.executable, "-m", "rendezvous", "join"]
# The daemon's default --stop-grace: scancel must end every command within it.
STOP_GRACE = 10.0


def script(*steps: list[str]) -> str:
    return "#!/bin/sh\n" + "".join(f"srun {shlex.join(step)}\n" for step in steps)


def exit_code(slurm, job: int) -> str:
    return re.search(r"ExitCode=(\S+)", slurm.run(["scontrol", "show", "job", str(job)]).stdout).group(1)


def test_slurm_expands_host_lists_as_our_parser_does(slurm):
    from rendezvous.core.hostlist import expand

    for text in ("h[1-3]", "h[01-04,07],login", "rack[1-2]n[08-10]", "a,b[8-10],c[008-10]", "x[0-0],y1,y1"):
        assert list(expand(text)) == slurm.hostnames(text), text


def test_a_step_forms_one_job_in_node_order_and_refuses_a_host_outside_it(slurm, tmp_path):
    out, release = tmp_path / "out", tmp_path / "release"
    out.mkdir()
    job = slurm.sbatch(script([*JOIN, "--", sys.executable, str(RECORDER), str(out), "--until", str(release)]), 3,
                       "-o", str(tmp_path / "slurm-%j.out"))
    recs = wait_for_records(out, 3)
    nodes = [h.address for h in slurm.nodes]
    assert_consistent(recs, nodes)
    # node-list order: h1, h2, h3 hold the network's addresses in that order
    assert [w.rsplit(":", 1)[0] for w in recs[0]["tf_config"]["cluster"]["worker"]] == nodes
    assert {r["env"]["RENDEZVOUS_JOB"] for r in recs} == {f"slurm-{job}.0"}
    assert all(r["devices"]["CUDA_VISIBLE_DEVICES"] == "" for r in recs)  # the step has no GPU: --gpus none

    # A machine outside the node list, with the job's name and size, is refused by address.
    outsider = slurm.net.hosts[4]
    refused = outsider.run(
        [*JOIN, "--job", f"slurm-{job}.0", "--expect", "3", "--peer", "h1", "--timeout", "30", "--", "true"],
        capture_output=True, text=True, timeout=HANG, env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / "o")},
    )
    assert refused.returncode != 0, refused.stderr
    assert f"{outsider.address} is not one of the hosts allowed in the job" in refused.stderr, refused.stderr

    release.touch()
    assert slurm.wait_job(job, HANG) == "COMPLETED"
    assert exit_code(slurm, job) == "0:0"
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert "from the Slurm job step: --expect 3" in log and "--peer h1,h2,h3" in log, log
    assert f"left out node" in log and outsider.address in log, log


def test_a_killed_command_gives_a_restart_round_inside_the_allocation(slurm, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    job = slurm.sbatch(script([*JOIN, "--", sys.executable, str(FAULT_COMMAND), str(out), "hang-first-round"]), 3,
                       "-o", str(tmp_path / "slurm-%j.out"))
    first = wait_for_starts(tmp_path, 1, 3)
    os.kill(first[1]["pid"], signal.SIGKILL)
    again = wait_for_starts(tmp_path, 2, 3)
    assert [s["restarts"] for s in again] == [1, 1, 1]
    assert all(s["tf_config"] == again[0]["tf_config"] | {"task": s["tf_config"]["task"]} for s in again)
    assert slurm.wait_job(job, HANG) == "COMPLETED"
    assert exit_code(slurm, job) == "0:0"


def test_scancel_ends_every_node_s_command_within_the_stop_grace(slurm, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    job = slurm.sbatch(script([*JOIN, "--", sys.executable, str(FAULT_COMMAND), str(out), "sleep:600"]), 3,
                       "-o", str(tmp_path / "slurm-%j.out"))
    pids = [s["pid"] for s in wait_for_starts(tmp_path, 1, 3)]
    cancelled = time.monotonic()
    slurm.run(["scancel", str(job)])
    wait_until(lambda: not any(alive(p) for p in pids), "every node's command ends", timeout=STOP_GRACE)
    assert time.monotonic() - cancelled <= STOP_GRACE
    assert slurm.wait_job(job, HANG) == "CANCELLED"
