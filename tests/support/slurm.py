"""A real Slurm cluster on one machine: slurmctld and one slurmd per network namespace.

Usage::

    with Network(4) as net, SlurmCluster(net, tmp_path) as slurm:
        job = slurm.sbatch(["srun", "hostname"], nodes=3)
        slurm.wait_job(job)

Host 0 of the network holds the controller and is where sbatch, srun, scancel and scontrol
run (outside the node list); hosts 1..n_nodes are the compute nodes `h1`, `h2`, ...; any
further host is another machine of the network, outside the cluster. Every namespace
resolves the names (`ctl`, `h1`, ...) through its own /etc/hosts. Munge runs with a key and
a socket of its own, so nothing of the machine's own Slurm or munge is used.

Debian's slurm-wlm and munge are installed with apt-get when missing (as root; a test
calls `require_slurm`, which skips with the reason when that cannot be done). What the
recipe needs on these kernels: each slurmd under `unshare --uts` with its own hostname;
`CgroupPlugin=cgroup/v1` and `CgroupAutomount=no`, since `ip netns exec` remounts /sys;
`ProctrackType=proctrack/linuxproc` and `TaskPlugin=task/none`; munge's socket directory
mode 755; `batch_sched_delay=0`, so that jobs submitted back to back do not queue for seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Optional, Sequence

from netns import Host, Network

PACKAGES = ("slurm-wlm", "munge")
NEEDED = ("slurmctld", "slurmd", "munged", "sbatch")
SBIN = ("/usr/sbin", "/usr/bin")
# Waits for something to happen, each bounded to fail a broken setup rather than hang:
# generous for a loaded machine; the loops end as soon as the condition holds.
_START = 60.0


def _which(name: str) -> Optional[str]:
    found = shutil.which(name)
    if found:
        return found
    for directory in SBIN:
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    return None


def install_slurm() -> Optional[str]:
    """Install slurm-wlm and munge with apt-get when missing; why not, or None when present."""
    if all(_which(n) for n in NEEDED):
        return None
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return f"Slurm is not installed and cannot be installed here (needs root and apt-get): {', '.join(PACKAGES)}"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *PACKAGES]):
        done = subprocess.run(argv, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            return f"{' '.join(argv)} failed: {done.stderr.strip()[-500:]}"
    missing = [n for n in NEEDED if not _which(n)]
    return f"installed {', '.join(PACKAGES)} but {', '.join(missing)} is missing" if missing else None


class SlurmCluster:
    def __init__(self, net: Network, workdir: Path, n_nodes: int = 3) -> None:
        if len(net.hosts) < n_nodes + 1:
            raise ValueError(f"a cluster of {n_nodes} nodes needs {n_nodes + 1} hosts, the network has {len(net.hosts)}")
        self.net = net
        self.dir = Path(workdir)
        self.controller: Host = net.hosts[0]
        self.nodes: list[Host] = net.hosts[1:n_nodes + 1]
        self.names = [f"h{i}" for i in range(1, n_nodes + 1)]
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._munged: Optional[subprocess.Popen] = None
        self._daemons: list[subprocess.Popen] = []

    def __enter__(self) -> "SlurmCluster":
        try:
            self.up()
        except BaseException:
            self.down()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # -- setup -----------------------------------------------------------------------------

    def up(self) -> "SlurmCluster":
        for sub in ("munge", "state", "log", "spool"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for name in self.names:
            (self.dir / "spool" / name).mkdir(exist_ok=True)
        os.chmod(self.dir, 0o755)
        os.chmod(self.dir / "munge", 0o755)  # munge refuses a socket directory others may write
        self._write_hosts()
        self._start_munge()
        self._write_config()
        log = open(self.dir / "log" / "slurmctld.out", "w")
        script = f"hostname ctl && exec {_need('slurmctld')} -D -i -f {self.conf}"  # the controller checks its name
        self._daemons.append(self.controller.popen(["unshare", "--uts", "sh", "-c", script], env=self.env, stdout=log,
                                                   stderr=subprocess.STDOUT))
        for name, host in zip(self.names, self.nodes):
            out = open(self.dir / "log" / f"slurmd-{name}.out", "w")
            script = f"hostname {name} && exec {_need('slurmd')} -D -N {name} -f {self.conf}"
            self._daemons.append(host.popen(["unshare", "--uts", "sh", "-c", script], env=self.env, stdout=out,
                                            stderr=subprocess.STDOUT))
        self.wait_idle()
        return self

    def _write_hosts(self) -> None:
        lines = [f"{self.controller.address} ctl"] + [f"{h.address} {n}" for n, h in zip(self.names, self.nodes)]
        for host in self.net.hosts:
            host.write_hosts(lines)

    def _start_munge(self) -> None:
        munge = self.dir / "munge"
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self.socket = munge / "munge.socket"
        self._munged = subprocess.Popen(
            [_need("munged"), "-F", "--force", f"--socket={self.socket}", f"--key-file={key}",
             f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + _START
        while not self.socket.exists():
            if self._munged.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {(munge / 'munged.log').read_text(errors='replace')[-800:]}")
            time.sleep(0.05)

    def _write_config(self) -> None:
        d = self.dir
        nodes = "\n".join(f"NodeName={n} NodeAddr={h.address} NodeHostname={n} CPUs={os.cpu_count() or 1} State=UNKNOWN"
                          for n, h in zip(self.names, self.nodes))
        self.conf.write_text(f"""\
ClusterName=rdvt
SlurmctldHost=ctl({self.controller.address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}/%n
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'spool'}/slurmd-%n.pid
SlurmctldLogFile={d / 'log' / 'slurmctld.log'}
SlurmdLogFile={d / 'log'}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=30
{nodes}
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")

    def wait_idle(self) -> None:
        """Until sinfo shows every node idle."""
        deadline = time.monotonic() + _START
        seen = ""
        while time.monotonic() < deadline:
            done = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False)
            seen = done.stdout
            states = dict(line.split() for line in seen.splitlines() if len(line.split()) == 2)
            if len(states) == len(self.names) and all(s == "idle" for s in states.values()):
                return
            for failed in self._daemons:
                if failed.poll() is not None:
                    raise RuntimeError(f"a Slurm daemon exited ({failed.args}): {self.logs()}")
            time.sleep(0.1)
        raise RuntimeError(f"the nodes did not become idle: sinfo said {seen!r}; {self.logs()}")

    # -- using it --------------------------------------------------------------------------

    def run(self, argv: Sequence[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        """A Slurm client command on the controller's host."""
        return self.controller.run([_need(argv[0]), *argv[1:]], env=kwargs.pop("env", self.env), check=check,
                                   capture_output=True, text=True, **kwargs)

    def sbatch(self, script: str, nodes: int, *options: str) -> int:
        """Submit a batch script (its text) to `nodes` nodes; the job id."""
        path = self.dir / f"job-{time.monotonic_ns()}.sh"
        path.write_text(script)
        done = self.run(["sbatch", "--parsable", "-N", str(nodes), "-D", str(self.dir), *options, str(path)])
        return int(done.stdout.strip().split(";")[0])

    def state(self, job: int) -> str:
        done = self.run(["scontrol", "show", "job", str(job)], check=False)
        found = re.search(r"JobState=(\S+)", done.stdout)
        return found.group(1) if found else "GONE"

    def wait_job(self, job: int, timeout: float) -> str:
        """Until the job has ended (or `timeout` passed, then an error naming its state)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(job)
            if state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED"):
                return state
            time.sleep(0.2)
        raise AssertionError(f"job {job} still {self.state(job)} after {timeout:g}s; {self.logs()}")

    def hostnames(self, hostlist: str) -> list[str]:
        """`scontrol show hostnames`: Slurm's own expansion of a host list."""
        return self.run(["scontrol", "show", "hostnames", hostlist]).stdout.split()

    def logs(self) -> str:
        parts = []
        for path in sorted((self.dir / "log").glob("*")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(parts)

    def down(self) -> None:
        for proc in self._daemons:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._daemons:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._munged is not None and self._munged.poll() is None:
            self._munged.terminate()
            self._munged.wait()


def _need(name: str) -> str:
    path = _which(name)
    if path is None:
        raise RuntimeError(f"{name} is not installed (install_slurm)")
    return path
