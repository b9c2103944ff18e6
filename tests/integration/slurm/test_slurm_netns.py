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
from hypothesis import given, settings
from hypothesis import strategies as st

from patience import HANG, wait_until
from rendezvous.core.hostlist import expand
from peers import FAULT_COMMAND, RECORDER, alive, assert_consistent, records, wait_for_records, wait_for_starts

pytestmark = pytest.mark.netns

JOIN = [sys.executable, "-m", "rendezvous", "join"]
# The daemon's default --stop-grace: scancel must end every command within it.
STOP_GRACE = 10.0


def script(*steps: list[str]) -> str:
    return "#!/bin/sh\n" + "".join(f"srun {shlex.join(step)}\n" for step in steps)


def exit_code(slurm, job: int) -> str:
    return re.search(r"ExitCode=(\S+)", slurm.run(["scontrol", "show", "job", str(job)]).stdout).group(1)


def _ranges(draw) -> str:
    items = []
    for _ in range(draw(st.integers(1, 3))):
        width = draw(st.integers(1, 3))
        low = draw(st.integers(0, 10 ** width - 1))
        high = draw(st.integers(low, low + 5))
        items.append(f"{low:0{width}d}" + ("" if high == low else f"-{high}"))
    return "[" + ",".join(items) + "]"


@st.composite
def host_lists(draw) -> str:
    entries = []
    for _ in range(draw(st.integers(1, 3))):
        entry = draw(st.sampled_from(["h", "node", "gpu-", "a.b"])) + _ranges(draw)
        if draw(st.booleans()):
            entry += draw(st.sampled_from(["n", "x"])) + _ranges(draw)
        entries.append(draw(st.sampled_from([entry, "login1"])))
    return ",".join(entries)


def test_slurm_expands_host_lists_as_our_parser_does(slurm):
    for text in ("h[1-3]", "h[01-04,07],login", "rack[1-2]n[08-10]", "a,b[8-10],c[008-10]", "x[0-0],y1,y1"):
        assert list(expand(text)) == slurm.hostnames(text), text


@settings(max_examples=40, deadline=None)
@given(text=host_lists())
def test_any_generated_host_list_expands_as_scontrol_shows_it(slurm, text):
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
    log = (tmp_path / f"slurm-{job}.out").read_text()
    # every daemon ends as a program SIGTERM ended (128+15); the batch script died of signal 15
    assert all(f"task {t}: Exited with exit code 143" in log for t in range(3)), log[-3000:]
    assert exit_code(slurm, job) == "0:15"


EPOCHS = 6


def trainers(marker: str) -> list[int]:
    """The pids of the bundled trainer's processes whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"trainer" in argv and marker.encode() in b" ".join(argv):
            found.append(int(entry))
    return found


@pytest.mark.training
@pytest.mark.timeout(480)
def test_the_bundled_trainer_trains_through_a_killed_worker_to_identical_weights(slurm, tmp_path):
    """One training run: sbatch -N 3, `srun rendezvous join -- TRAINER OPTIONS`; one worker's
    trainer killed with SIGKILL during training; a restart round inside the allocation
    resumes from the shared backup and every worker ends with the same weights."""
    backup, results = tmp_path / "backup", tmp_path / "results"
    results.mkdir()
    trainer = f"--threads 1 --epochs {EPOCHS} --steps-per-epoch 30 --backup-dir {backup}"
    step = ["sh", "-c", f'exec {shlex.join(JOIN)} -- {trainer} --result-file {results}/"$SLURMD_NODENAME".json']
    job = slurm.sbatch(script(step), 3, "-o", str(tmp_path / "slurm-%j.out"))
    output = tmp_path / f"slurm-{job}.out"

    def trained(epoch: int) -> bool:
        return output.exists() and len(re.findall(rf"epoch {epoch}/{EPOCHS} ", output.read_text())) >= 3

    wait_until(lambda: trained(2) or slurm.state(job) not in ("PENDING", "RUNNING"),
               lambda: output.read_text()[-3000:], timeout=240)
    victims = trainers(str(backup))
    assert len(victims) == 3, output.read_text()[-3000:]
    os.kill(victims[1], signal.SIGKILL)

    assert slurm.wait_job(job, 360) == "COMPLETED", output.read_text()[-5000:]
    assert exit_code(slurm, job) == "0:0"
    log = output.read_text()
    assert len(re.findall(r"round 2 frozen", log)) == 3, log[-5000:]
    summaries = [json.loads((results / f"{name}.json").read_text()) for name in slurm.names]
    assert [s["worker_index"] for s in summaries] == [0, 1, 2]
    assert len({s["weights_sha256"] for s in summaries}) == 1, summaries
    assert all(s["initial_epoch"] > 1 for s in summaries), summaries


def test_a_command_that_keeps_failing_ends_the_step_with_its_code_after_max_restarts(slurm, tmp_path):
    """Rank 1 fails in every round: --max-restarts 1 gives one restart round inside the
    allocation, then every task ends with the command's code at once, without srun -K;
    --output-dir keeps each round's output per rank beside Slurm's -o file."""
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    step = [*JOIN, "--max-restarts", "1", "--output-dir", str(logs), "--",
            sys.executable, str(FAULT_COMMAND), str(out), "fail-rank-1-after-all:3"]
    job = slurm.sbatch(script(step), 3, "-o", str(tmp_path / "slurm-%j.out"))
    assert slurm.wait_job(job, HANG) == "FAILED"
    assert exit_code(slurm, job) == "3:0"
    assert len(wait_for_starts(tmp_path, 2, 3)) == 3 and not list(out.glob("*-3.json"))
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert len(re.findall(r"no restart follows", log)) >= 3, log[-4000:]
    kept = sorted(p.name for p in (logs / f"slurm-{job}.0").iterdir())
    assert kept == [f"round-{r}.{k}.log" for r in (1, 2) for k in range(3)], kept


def test_srun_k_ends_the_other_tasks_when_one_daemon_cannot_start(slurm, tmp_path):
    """A daemon that fails before the job forms (here a bad option on the second node) exits
    2; the other two would wait for it. `srun -K` has Slurm end them at once."""
    one_bad = f'if [ "$SLURM_NODEID" = 1 ]; then set -- --liveness-timeout=0; fi; exec {shlex.join(JOIN)} "$@" -- true'
    job = slurm.sbatch("#!/bin/sh\n" + f"srun -K sh -c {shlex.quote(one_bad)}\n", 3, "-o", str(tmp_path / "slurm-%j.out"))
    assert slurm.wait_job(job, HANG) == "FAILED"  # without -K the two others wait on, with no --timeout
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert "--liveness-timeout" in log and "task 1: Exited with exit code 2" in log, log[-3000:]
    # SIGTERM ends the others: by its default action if it comes before the daemon set its own
    assert all(re.search(rf"task {t}: (Terminated|Exited with exit code 143)", log) for t in (0, 2)), log[-3000:]
    assert exit_code(slurm, job) == "143:0"  # the job's code is the highest: the others' SIGTERM
