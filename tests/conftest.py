"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The helpers in tests/support (the namespace harness, forgers, recorders) import as top-level
# modules from every test folder.
sys.path.insert(0, str(Path(__file__).resolve().parent / "support"))

# Daemons the tests start import no TensorFlow ahead of their commands (--prewarm's default
# for a Python command would, in every node of every test): the tests of --prewarm ask for it.
os.environ.setdefault("RENDEZVOUS_PREWARM", "none")

from netns import Network, cleanup_stale, require_netns, stop_on_sigterm

# --------------------------------------------------------------------------
# Network namespaces (tests/support/netns.py)
# --------------------------------------------------------------------------

_netns_stale_cleaned = False


def pytest_configure(config):
    """A test run stopped with SIGTERM or SIGHUP ends like one stopped with Ctrl-C: fixtures
    tear down, so its namespaces are removed."""
    stop_on_sigterm()


@pytest.fixture(autouse=True)
def _netns_guard(request):
    """Tests marked ``@pytest.mark.netns`` fail with a clear message when
    namespaces are unavailable (not root, no ``ip``), or skip when
    ``RENDEZVOUS_SKIP_NETNS=1``."""
    if request.node.get_closest_marker("netns") is not None:
        require_netns()


@pytest.fixture
def make_network():
    """Factory ``make_network(n_hosts, subnet=...) -> Network`` (already up).

    Every network it made is torn down after the test, whatever happened.
    Before the first one, namespaces left by crashed runs are removed.
    """
    global _netns_stale_cleaned
    require_netns()
    if not _netns_stale_cleaned:
        cleanup_stale()
        _netns_stale_cleaned = True
    networks: list[Network] = []

    def factory(n_hosts: int, **kwargs) -> Network:
        net = Network(n_hosts, **kwargs)
        networks.append(net)
        return net.up()

    yield factory
    errors = []
    for net in reversed(networks):
        try:
            net.down()
        except Exception as e:
            errors.append(f"{net!r}: {e}")
    if errors:
        pytest.fail("network teardown failed: " + "; ".join(errors), pytrace=False)


@pytest.fixture
def netns_network(make_network):
    """Same factory as ``make_network``."""
    return make_network
