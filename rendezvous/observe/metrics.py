"""Prometheus metrics of one node (`--metrics-port`), served with the standard client.

Every scrape asks the node's event loop for a fresh `NodeStatus` (the HTTP server runs in
a thread of its own; the node's state is only read on its loop) and turns it into gauges
with `samples`, a pure function. Names start with `rendezvous_`; every sample carries the
labels `job` and `node`. The last failure's cause is a label (cut to 200 characters): one
series per distinct failure, as the failures of a job are few.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Callable, Iterator, Optional

from ..config.timings import Timings
from ..core.advert import Phase
from ..core.record import record
from ..core.status import NodeStatus
from ..errors import AddressError

log = logging.getLogger(__name__)


@record
class Sample:
    name: str
    help: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


def samples(status: NodeStatus) -> Iterator[Sample]:
    """What a scrape shows of `status`; gauges without a value yet are left out."""
    for phase in Phase:
        yield Sample("rendezvous_phase", "1 for the phase the node is in, 0 for the others",
                     float(status.phase is phase), (("phase", phase.value),))
    yield Sample("rendezvous_round", "the round the node is in (from 1)", status.round)
    yield Sample("rendezvous_restarts", "rounds started after a failed one", status.round - 1)
    yield Sample("rendezvous_members_seen", "live nodes of the job discovered, this one included", len(status.seen) or 1)
    yield Sample("rendezvous_members_expected", "--expect: the most nodes a round takes (MAX of MIN:MAX)", status.expect.max)
    yield Sample("rendezvous_members_expected_min", "--expect: the fewest nodes a round starts with (MIN of MIN:MAX)", status.expect.min)
    optional: tuple[tuple[str, str, Optional[float]], ...] = (
        ("rendezvous_rendezvous_duration_seconds", "from the round's start to the command's release", status.rendezvous_seconds),
        ("rendezvous_command_uptime_seconds", "how long the command has run", status.trainer_uptime),
        ("rendezvous_command_exit_code", "the command's exit status once it finished", status.exit_code),
    )
    progress = status.progress
    if progress is not None:
        optional += (
            ("rendezvous_training_epoch", "the epoch the command last reported", progress.epoch),
            ("rendezvous_training_step", "the step the command last reported", progress.step),
            ("rendezvous_training_loss", "the loss the command last reported", progress.loss),
            ("rendezvous_training_images_per_second", "the throughput the command last reported", progress.images_per_s),
        )
    for name, about, value in optional:
        if value is not None:
            yield Sample(name, about, float(value))
    for metric, value in progress.metrics if progress else ():
        yield Sample("rendezvous_training_metric", "a metric the command last reported", value, (("metric", metric),))
    failure = status.failure
    if failure is not None:
        yield Sample("rendezvous_last_failure_exit_code",
                     "the exit code of the last failed command this node knows of; "
                     "its node, rank and cause in the labels", failure.exit_code, (("failed_node", failure.node_id), ("failed_address", failure.address),
                                         ("rank", "" if failure.rank is None else str(failure.rank)),
                                         ("cause", failure.cause[:200])))


class _Collector:
    """A prometheus_client collector that reads the node's status on its loop."""

    def __init__(self, status: Callable[[], NodeStatus], loop: asyncio.AbstractEventLoop, read_timeout: float) -> None:
        self._status = status
        self._loop = loop
        self._read_timeout = read_timeout

    def _fresh(self) -> NodeStatus:
        async def read() -> NodeStatus:
            return self._status()

        return asyncio.run_coroutine_threadsafe(read(), self._loop).result(timeout=self._read_timeout)

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        status = self._fresh()
        families: dict[str, GaugeMetricFamily] = {}
        for sample in samples(status):
            labels = (("job", status.job), ("node", status.node.node_id), *sample.labels)
            family = families.get(sample.name)
            if family is None:
                family = families[sample.name] = GaugeMetricFamily(
                    sample.name, sample.help, labels=[k for k, _ in labels]
                )
            family.add_metric([v for _, v in labels], sample.value)
        return list(families.values())


def _allow_ssl() -> None:
    """prometheus_client imports ssl (for its TLS options, unused here), which the
    `rendezvous` command's process goes without until then (see rendezvous.cli.startup)."""
    if "ssl" in sys.modules and sys.modules["ssl"] is None:
        del sys.modules["ssl"]


class MetricsServer:
    """The /metrics endpoint on `host:port`, until `close`. A scrape waits `read_timeout`
    for the node's loop to give its status."""

    def __init__(self, host: str, port: int, status: Callable[[], NodeStatus],
                 read_timeout: float = Timings.metrics_read_timeout) -> None:
        _allow_ssl()
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(status, asyncio.get_running_loop(), read_timeout))
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        except OSError as exc:
            raise AddressError(f"--metrics-port {port}: cannot listen on {host}: {exc.strerror or exc}") from None
        log.info("Prometheus metrics on http://%s:%d/metrics", host, port)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_metrics(port: Optional[int], host: str, status: Callable[[], NodeStatus],
                  read_timeout: float = Timings.metrics_read_timeout) -> Optional[MetricsServer]:
    return MetricsServer(host, port, status, read_timeout) if port else None
