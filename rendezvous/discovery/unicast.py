"""Discovery without multicast: adverts gossiped over the gRPC service every node runs.

Every `gossip_interval` a node exchanges what it knows (core.adverts) with each of its
seeds and with a few peers it learned of: one Exchange call carries both directions, and
after the first call with a node, only what the other side lacks. Seeds therefore need not
know every node, only be connected through each other; a node learns the whole job on its
first exchange with any seed that has heard of it. A node announces its advert with a
higher serial when it changes and four times per `advert_ttl` to show it is alive; one that
announces nothing newer for `advert_ttl` (killed, cut off) is dropped, and one that stops
says goodbye with a last record.

What a node takes in depends on whom it comes from (core.adverts): the answers of its own
seeds whole, since they relay the job; from any other node, in its calls or its answers,
only the adverts of that node's own address, a bounded number of them; with a token, a
signed call or answer whole and an unsigned call nothing.

The seeds' names are resolved again at every exchange: a name with several addresses is
several seeds, and the set may change while the job waits. Each lookup runs in a thread of
its own (the system's resolver may wait seconds for a DNS server) and is awaited for half a
`gossip_interval` at most; one still unanswered is awaited again at the next exchange
rather than started anew. Its thread is a daemon thread: a node whose --timeout passes
exits then, not when the resolver gives up (with the loop's executor, asyncio.run waited
for it). A seed that does not resolve is named in one warning until it does. A dual-stack node (its advert
has an alternate address) talks to seeds and peers of both families.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
import socket
import threading
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import grpc

from ..config.timings import Timings
from ..coordinator import SessionLost, exchange, open_channel
from ..core.advert import Advert
from ..core.adverts import AdvertStore, Changes, Gossip, Record
from ..core.auth import Keys
from ..core.peer import IPAddress
from ..core.seeds import Seed
from . import Discovery, DiscoveryEvent, Gone, Seen, deliver

log = logging.getLogger(__name__)

# Peers learned of, besides the seeds, that a node exchanges with at each interval: enough
# for adverts to spread in a few intervals when seeds are far apart, few enough that a
# large job is not a storm of calls.
FANOUT = 2

# socket.getaddrinfo's signature; tests pass a resolver that fails or hangs without DNS.
Resolver = Callable[..., list]


def _lookup(resolve: Resolver, host: str, port: int, family: int) -> "asyncio.Future[list]":
    """resolve(host, port, ...) in a daemon thread (at once for an address), as a future
    of the running loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[list] = loop.create_future()

    def settle(result: Any, error: Optional[BaseException]) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def work() -> None:
        result, error = None, None
        try:
            result = resolve(host, port, family=family, type=socket.SOCK_STREAM)
        except Exception as exc:  # noqa: BLE001 - handed to the loop, whatever it is
            error = exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop closed while the resolver waited: nobody asks now
            pass

    if _is_address(host):  # nothing to ask a resolver: no thread every interval for it
        try:
            future.set_result(resolve(host, port, family=family, type=socket.SOCK_STREAM))
        except OSError as exc:
            future.set_exception(exc)
    else:
        threading.Thread(target=work, name=f"resolve {host}", daemon=True).start()
    return future


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class UnicastDiscovery(Discovery):
    """Announces `advert` to `seeds` and the peers learned from them; reports every node
    they know of, of every job. With `advert=None` it only asks (`rendezvous peers`)."""

    def __init__(
        self,
        address: IPAddress,
        advert: Optional[Advert],
        on_event: Callable[[DiscoveryEvent], None],
        seeds: Sequence[Seed],
        timings: Timings = Timings(),
        resolve: Resolver = socket.getaddrinfo,
    ) -> None:
        self._resolver = resolve
        self._lookups: dict[Seed, asyncio.Future[list]] = {}  # still unanswered
        self._versions = advert.versions if advert else frozenset({address.version})
        self._advert = advert
        self._on_event = on_event
        self._seeds = tuple(seeds)
        self._timings = timings
        self._store = AdvertStore(timings.advert_ttl)
        self._serial = 0
        self._announced = 0.0  # when, by the monotonic clock
        self._digests: dict[str, Mapping[str, int]] = {}  # what each node had at the last exchange
        self._sender = advert.node_id if advert else "browser"
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._seed_endpoints: set[str] = set()  # as last resolved
        self._unresolved: set[Seed] = set()
        self._wake = asyncio.Event()
        self._changed = False  # whether an advert came, changed or went since the flag was cleared
        self._task: Optional[asyncio.Task] = None
        self._keys: Optional[Keys] = None

    # -- Discovery ---------------------------------------------------------------------

    async def start(self) -> None:
        """Announce to the seeds and learn what they know before the node picks whom to
        join (a first guess of itself would cost a redirect), then gossip on."""
        self._announce()
        try:
            await asyncio.wait_for(self._exchange_all(), self._timings.gossip_interval)
        except asyncio.TimeoutError:
            log.debug("no seed answered within %ss", self._timings.gossip_interval)
        self._task = asyncio.create_task(self._gossip(), name="discovery-gossip")

    async def update(self, advert: Advert) -> None:
        """Announce the change now rather than at the next interval."""
        self._advert = advert
        self._announce()
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._advert is not None:
            self._announce(goodbye=True)
            try:
                await asyncio.wait_for(self._exchange_all(), self._timings.goodbye_timeout)
            except asyncio.TimeoutError:
                log.debug("goodbye not confirmed within %ss", self._timings.goodbye_timeout)
        channels, self._channels = self._channels, {}
        await asyncio.gather(*(c.close() for c in channels.values()), return_exceptions=True)

    def use_keys(self, keys: Optional[Keys]) -> None:
        self._keys = keys

    def exchange(self, gossip: Gossip) -> Gossip:
        """A node sent what it knows: keep what is newer and may come from it
        (`AdvertStore.admit`), answer with what it lacks."""
        records = gossip.records if gossip.source is None else self._store.admit(gossip.records, gossip.source)
        self._apply(self._store.merge(records, time.monotonic()))
        return self._store.answer(gossip)

    # -- gossip --------------------------------------------------------------------------

    def _announce(self, goodbye: bool = False) -> None:
        """This node's advert with a higher serial: newer than all before, and alive (or,
        the last time, gone)."""
        if self._advert is not None:
            self._serial += 1
            self._announced = time.monotonic()
            record = Record(self._advert, self._serial, goodbye)
            self._store = self._store.merge([record], self._announced).store

    async def _gossip(self) -> None:
        """Exchange every `gossip_interval` while adverts change; while none does, twice as
        seldom each time, up to a quarter of `advert_ttl`: a seed of a large job that waits
        would otherwise answer N calls every interval for as long as the job waits."""
        interval = self._timings.gossip_interval
        while True:
            wake = asyncio.ensure_future(self._wake.wait())
            try:
                await asyncio.wait({wake}, timeout=interval)
            finally:
                wake.cancel()
            self._wake.clear()
            if time.monotonic() - self._announced >= self._timings.advert_ttl / 4:
                self._announce()
            self._changed = False
            await self._exchange_all()
            self._apply(self._store.expire(time.monotonic()))
            await self._forget_gone()
            slowest = max(self._timings.gossip_interval, self._timings.advert_ttl / 4)
            interval = self._timings.gossip_interval if self._changed else min(2 * interval, slowest)

    async def _exchange_all(self) -> None:
        endpoints = await self._targets()
        await asyncio.gather(*(self._exchange_with(e) for e in endpoints))

    async def _targets(self) -> list[str]:
        """Every seed's every address, and FANOUT peers learned of; never this node."""
        seeds = {e for s in await asyncio.gather(*map(self._resolve, self._seeds)) for e in s}
        self._seed_endpoints = seeds
        mine = self._own_endpoints()
        learned = sorted(
            a.peer.endpoint for a in self._store.adverts()
            if a.peer.address.version in self._versions and a.peer.endpoint not in seeds | mine
        )
        chosen = seeds | set(random.sample(learned, min(FANOUT, len(learned))))
        return sorted(chosen - mine)

    def _own_endpoints(self) -> set[str]:
        """Where this node listens: its address, and a dual-stack node's other one."""
        advert = self._advert
        if advert is None:
            return set()
        return {moved.peer.endpoint for moved in map(advert.using, advert.versions) if moved}

    async def _forget_gone(self) -> None:
        """Close the channels of nodes no longer known, and forget what they had."""
        known = self._seed_endpoints | {a.peer.endpoint for a in self._store.adverts()}
        gone = [e for e in self._channels if e not in known]
        for endpoint in gone:
            self._digests.pop(endpoint, None)
            await self._channels.pop(endpoint).close()

    async def _resolve(self, seed: Seed) -> list[str]:
        """The endpoints of a seed's addresses of this node's families."""
        family = socket.AF_UNSPEC if len(self._versions) > 1 else socket.AF_INET if 4 in self._versions else socket.AF_INET6
        lookup = self._lookups.get(seed)
        if lookup is None:
            lookup = self._lookups[seed] = _lookup(self._resolver, seed.host, seed.port, family)
        bound = self._timings.gossip_interval / 2
        try:
            infos = await asyncio.wait_for(asyncio.shield(lookup), bound)
        except asyncio.TimeoutError:
            self._unresolvable(seed, f"no answer from the resolver within {bound:g}s")
            return []
        except OSError as exc:
            self._unresolvable(seed, exc.strerror or str(exc))
            return []
        finally:
            if lookup.done():
                self._lookups.pop(seed, None)
        self._unresolved.discard(seed)
        return sorted({seed.endpoint(str(info[4][0]).split("%")[0]) for info in infos})

    def _unresolvable(self, seed: Seed, reason: str) -> None:
        if seed not in self._unresolved:
            log.warning("seed %s: cannot resolve %s (%s); trying again", seed, seed.host, reason)
        self._unresolved.add(seed)

    async def _exchange_with(self, endpoint: str) -> None:
        channel = self._channels.get(endpoint)
        if channel is None:
            channel = self._channels[endpoint] = open_channel(endpoint)
        theirs = self._digests.get(endpoint, {})
        gossip = Gossip(tuple(self._store.newer_than(theirs)), self._store.digest())
        try:
            answer = await exchange(channel, gossip, self._sender, self._timings.gossip_interval, self._keys)
        except SessionLost as exc:
            log.debug("exchange with %s failed: %s", endpoint, exc)
            self._digests.pop(endpoint, None)  # it may come back with nothing: tell it all
            return
        self._digests[endpoint] = answer.known
        # A seed relays the job; any other node only speaks for itself (core.adverts).
        records = answer.records if endpoint in self._seed_endpoints else self._store.admit(answer.records, _host(endpoint))
        self._apply(self._store.merge(records, time.monotonic()))

    def _apply(self, changes: Changes) -> None:
        self._store = changes.store
        me = self._advert.node_id if self._advert else None
        events: list[DiscoveryEvent] = [Gone(n) for n in changes.gone if n != me]
        events += [Seen(a) for a in changes.seen if a.node_id != me]
        self._changed = self._changed or bool(events)
        for event in events:
            deliver(self._on_event, event)


def _host(endpoint: str) -> str:
    """The address of `host:port` or `[host]:port`."""
    return endpoint.rsplit(":", 1)[0].strip("[]")
