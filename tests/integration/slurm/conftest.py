"""One real Slurm cluster (slurmctld + 3 slurmd in network namespaces) for the module's tests."""

from __future__ import annotations

import pytest

from netns import Network, cleanup_stale, require_netns
from slurm import SlurmCluster, install_slurm


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A 3-node cluster: host 0 the controller (where sbatch runs), h1-h3 the nodes, host 4
    another machine of the network, outside the cluster."""
    require_netns()
    problem = install_slurm()
    if problem:
        pytest.fail(problem, pytrace=False)  # as root with apt-get it installs: missing is a defect
    cleanup_stale()
    workdir = tmp_path_factory.mktemp("slurm")
    with Network(5) as net, SlurmCluster(net, workdir) as cluster:
        yield cluster
