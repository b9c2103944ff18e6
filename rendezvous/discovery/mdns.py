"""Discovery over mDNS/DNS-SD (python-zeroconf): advertise this node, discover the others.

Zeroconf binds only the chosen address, and a dual-stack node's other address too: it is
heard by the nodes of both families, and a job of either may use it (core.family). Browser
callbacks start one task per service that resolves it and hands the decoded advert to the
caller: a service whose records were not in the answer needs a query of its own, which must
not delay the others. Junk records are logged and ignored.
Without an advert of its own (`rendezvous peers`) it only browses.

python-zeroconf browses with a few queries at startup, then only when records are about to
expire: announcements lost at startup (dozens of nodes starting at once overflow socket
buffers) would be heard of only after many minutes. `ask_again` asks once more, listing the
answers already known, so that only the nodes not heard of answer, and resolves again the
services that could not be resolved.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Optional

from zeroconf import DNSQuestionType, IPVersion, ServiceStateChange, current_time_millis
from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

from ..config.timings import Timings
from ..core.advert import SERVICE_TYPE, Advert, InvalidAdvert, decode_advert
from ..core.peer import IPAddress
from ..errors import AddressError
from . import Discovery, DiscoveryEvent, Gone, Seen, deliver

log = logging.getLogger(__name__)

# Services resolved at once at most: a flood of junk services costs a bounded number of queries.
MAX_RESOLVING = 64


def _node_id_of(name: str) -> str:
    return name[: -len(SERVICE_TYPE) - 1] if name.endswith("." + SERVICE_TYPE) else name


class MdnsDiscovery(Discovery):
    """Advertises `advert` on `address` and reports every other rendezvous node it sees,
    of every job; with `advert=None` it advertises nothing and only browses."""

    def __init__(
        self,
        address: IPAddress,
        advert: Optional[Advert],
        on_event: Callable[[DiscoveryEvent], None],
        timings: Timings = Timings(),
    ) -> None:
        alternate = advert.alternate if advert else None
        self._addresses = [address, *([alternate] if alternate else [])]
        self._timings = timings
        self._advert = advert
        self._on_event = on_event
        self._zc: Optional[AsyncZeroconf] = None
        self._browser: Optional[AsyncServiceBrowser] = None
        self._info: Optional[AsyncServiceInfo] = None
        self._resolving: dict[str, asyncio.Task] = {}  # service name -> its latest change
        # Services whose records never came, oldest first (a dict as an ordered set).
        self._unresolved: dict[str, None] = {}
        self._slots = asyncio.Semaphore(MAX_RESOLVING)
        # Queries ask for multicast answers (QM), never unicast ones (QU, zeroconf's default
        # for a first query): where several mDNS stacks share port 5353 on one machine (a
        # daemon, avahi, other nodes), a unicast answer can be delivered to one of their
        # sockets instead, and a node restarted on the same address then hears nobody.
        self._question_type = DNSQuestionType.QM

    def _service_info(self, advert: Advert) -> AsyncServiceInfo:
        return AsyncServiceInfo(
            SERVICE_TYPE,
            advert.instance_name,
            addresses=[a.packed for a in (advert.peer.address, advert.alternate) if a is not None],
            port=advert.peer.port,
            properties=advert.to_txt(),
            server=advert.host_name,
        )

    @property
    def _ip_version(self) -> IPVersion:
        versions = {a.version for a in self._addresses}
        return IPVersion.All if len(versions) > 1 else IPVersion.V4Only if versions == {4} else IPVersion.V6Only

    async def start(self) -> None:
        try:
            self._zc = AsyncZeroconf(interfaces=[str(a) for a in self._addresses], ip_version=self._ip_version)
        except OSError as exc:
            names = " and ".join(map(str, self._addresses))
            raise AddressError(f"cannot use {names} for mDNS: {exc.strerror or exc}") from None
        if self._advert is not None:
            self._info = self._service_info(self._advert)
            # Instance names are random node ids, so name probing (~1.2 s) buys nothing.
            await self._zc.async_register_service(self._info, cooperating_responders=True)
            log.debug("advertising %s on %s", self._advert.instance_name, self._addresses)
        self._browser = AsyncServiceBrowser(
            self._zc.zeroconf, SERVICE_TYPE, handlers=[self._on_state_change],
            question_type=self._question_type,
        )

    async def update(self, advert: Advert) -> None:
        """Re-announce changed TXT fields (phase, coordinator)."""
        self._advert = advert
        if self._zc is None:
            return
        self._info = self._service_info(advert)
        await self._zc.async_update_service(self._info)

    def ask_again(self) -> None:
        if self._browser is None:
            return
        self._browser.query_scheduler.async_send_ready_queries(False, current_time_millis(), {SERVICE_TYPE})
        # At most MAX_RESOLVING per ask, the longest waiting first (one that fails again
        # goes last): a flood of names that never resolve costs a bounded number of queries.
        for name in list(self._unresolved)[:MAX_RESOLVING]:
            del self._unresolved[name]
            self._start_resolving(name)

    async def close(self) -> None:
        """Say goodbye (so peers drop this node at once) and release the sockets."""
        if self._browser is not None:
            await self._browser.async_cancel()
        tasks = list(self._resolving.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._zc is not None:
            if self._info is not None:
                goodbyes_sent = await self._zc.async_unregister_service(self._info)
                try:
                    await asyncio.wait_for(goodbyes_sent, self._timings.goodbye_timeout)
                except asyncio.TimeoutError:
                    log.debug("goodbye packets not confirmed within %ss", self._timings.goodbye_timeout)
            await self._zc.async_close()
            self._zc = None

    def _on_state_change(
        self,
        zeroconf: object,
        service_type: str,
        name: str,
        state_change: ServiceStateChange,
    ) -> None:
        """A service's newer change replaces its older one still being resolved."""
        node_id = _node_id_of(name)
        if self._advert is not None and node_id == self._advert.node_id:
            return
        previous = self._resolving.pop(name, None)
        if previous is not None:
            previous.cancel()
        self._unresolved.pop(name, None)
        if state_change is ServiceStateChange.Removed:
            self._deliver(Gone(node_id))
            return
        self._start_resolving(name)

    def _start_resolving(self, name: str) -> None:
        task = asyncio.get_running_loop().create_task(self._resolve_one(name), name=f"resolve-{_node_id_of(name)}")
        self._resolving[name] = task
        task.add_done_callback(lambda t: self._resolving.pop(name) if self._resolving.get(name) is t else None)

    async def _resolve_one(self, name: str) -> None:
        async with self._slots:
            advert = await self._resolve(name)
        if advert is not None:
            self._deliver(Seen(advert))

    def _deliver(self, event: DiscoveryEvent) -> None:
        deliver(self._on_event, event)

    async def _resolve(self, name: str) -> Optional[Advert]:
        assert self._zc is not None
        info = AsyncServiceInfo(SERVICE_TYPE, name)
        try:
            timeout_ms = int(self._timings.resolve_timeout * 1000)
            if not await info.async_request(self._zc.zeroconf, timeout_ms, self._question_type):
                log.debug("could not resolve %s", name)
                self._unresolved[name] = None
                return None
            # Both families: a dual-stack node's advert says which address is the other one.
            addresses = info.parsed_addresses(IPVersion.All)
            return decode_advert(info.properties or {}, addresses, info.port or 0)
        except InvalidAdvert as exc:
            log.debug("ignoring service %s: %s", name, exc)
        except Exception:  # a malformed record must never take the daemon down
            log.debug("ignoring service %s: could not decode it", name, exc_info=True)
        return None
