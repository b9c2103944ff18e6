"""What a node hears from the network and tells it, from startup to shutdown: discovery's
events applied to the view, this node's own advert (its phase and round, its IP family),
and the nudges while it waits alone or without its whole job.
"""

from __future__ import annotations

import asyncio
import logging
from ipaddress import IPv4Address
from typing import Any, Callable, Coroutine, Optional

from ..config.join import JoinConfig, discovery_mode
from ..core.admission import check_allowed
from ..core.advert import Advert, Phase
from ..core.peer import IPAddress
from ..core.family import Family, left_out_message, switch_message, switched
from ..core.record import replace
from ..core.seeds import lonely_hint, parse_seeds
from ..core.unformed import TWIN_ADVICE, alone_hint, describe_held, describe_twin, timeout_advice
from ..core.view import PeerView, describe_missing, describe_shared, odd_peers
from ..discovery import DiscoveryEvent, Gone, Hinted
from ..host.arp import ArpWatch
from .resources import Endpoint
from .viewholder import ViewHolder

log = logging.getLogger(__name__)


class Presence:
    def __init__(
        self,
        config: JoinConfig,
        endpoint: Endpoint,
        views: ViewHolder,
        phase: Callable[[], Phase],  # this node's now
        frozen: Callable[[], bool],  # its round is frozen: it keeps its addresses
        report: Callable[[], None],
        expect_source: str = "--expect",  # where config.expect came from
    ) -> None:
        self._config = config
        self._endpoint = endpoint
        self._views = views
        self._phase = phase
        self._frozen = frozen
        self._report = report
        self._expect_source = expect_source
        self._tasks: set[asyncio.Task] = set()
        self._left_out: set[str] = set()  # nodes of the job that cannot use its IP family, named once
        self._named_outside: set[IPAddress] = set()  # addresses outside --allow-host, named once
        self.hint: Optional[str] = None  # why nobody may be seen, once said
        self.held: list[str] = []  # other hosts that answer ARP for this node's address, as said
        self._arp: Optional[ArpWatch] = None

    def start(self) -> None:
        self._spawn(self._hint_when_alone(), "lonely-hint")
        self._spawn(self._ask_while_incomplete(), "ask-again")
        me, interface = self._endpoint.me.address, self._endpoint.interface
        if isinstance(me, IPv4Address) and not me.is_loopback and interface:
            self._arp = ArpWatch(interface, me, lambda hardware: self._held_by(interface, me, hardware))
            self._arp.probe()

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._arp is not None:
            self._arp.close()

    def shared(self, view: PeerView) -> list[str]:
        """What this node knows of other hosts with its address: nodes that advertise its
        endpoint (PeerView.twins), and hosts that answer ARP for its address."""
        return [describe_twin(view.me, t) for t in view.twins.values()] + self.held

    def waiting(self, view: PeerView) -> Optional[str]:
        """What the progress line adds while this node waits: why nobody may be seen, or an
        address that several nodes (or hosts) have."""
        shared = "; ".join([*describe_shared(view), *self.held]) or None
        return self.hint or shared if not view.others else shared

    def unformed(self, timeout: float) -> str:
        """Why the job did not form within --timeout: whom this node saw, heard but could
        not be in the job with, and found holding its address; what to fix."""
        view = self._views.view
        held = "".join(f"; {line}" for line in self.held)
        return (f"no rendezvous within --timeout {timeout:g}s: {describe_missing(view, self._expect_source)}{held}. "
                f"{timeout_advice(odd_peers(view), bool(view.twins or self.held))}")

    def _held_by(self, interface: str, address: IPv4Address, hardware: str) -> None:
        said = describe_held(address, interface, hardware)
        self.held.append(said)
        log.warning("%s. %s", said, TWIN_ADVICE)
        self._report()

    def on_discovery(self, event: DiscoveryEvent) -> None:
        if not isinstance(event, Gone) and self._refused(event.advert):
            return
        before = self._views.view
        view = before.apply(event)
        # Every Status request of a known peer carries a hint: nothing new unless the view changed.
        if view is not before or not isinstance(event, Hinted):
            self._name_left_out(view.family)
            self._views.update(self._switch_family(view))
        if not isinstance(event, Gone) and event.advert.node_id in view.others:
            self._views.hear(event.advert.node_id)  # an advert, even one repeated, is a sign of life

    def _refused(self, advert: Advert) -> bool:
        """An advert of this job from a host outside --allow-host (the Slurm step's nodes) is
        left out, named once: such a node must not be elected, nor counted."""
        problem = None if advert.job != self._config.job else check_allowed(advert.peer, self._endpoint.allowed)
        if problem is not None and advert.peer.address not in self._named_outside:
            self._named_outside.add(advert.peer.address)
            log.warning("left out node %s of job %r, a host outside the job: %s", advert.node_id, advert.job, problem)
        return problem is not None

    def advertise(self, phase: Phase, round: int, coordinator: Optional[str] = None, gpus: Optional[str] = None) -> None:
        """This node's advert in `phase` of `round` (with `gpus`, its GPUs as shown, when
        given), announced after the delay."""
        view = self._views.view
        me = replace(view.me.with_phase(phase, coordinator), round=round, gpus=gpus or view.me.gpus)
        self._views.update(view.with_me(me))
        self._spawn(self._update_advert(), f"advertise-{phase.value}")

    def _name_left_out(self, family: Family) -> None:
        """Say once of each member of the job that cannot use its IP family that it is out."""
        for member in family.left_out:
            if member.node_id not in self._left_out:
                self._left_out.add(member.node_id)
                log.warning("%s", left_out_message(member, self._config.job, family.version))

    def _switch_family(self, view: PeerView) -> PeerView:
        """The view with this node on its address of the job's IP family, when it advertises
        the other one; only before the freeze: a frozen round keeps its addresses."""
        moved = None if self._frozen() else switched(view.me, view.family)
        if moved is None:
            return view
        log.warning("%s", switch_message(moved, self._config.job, view.adverts))
        self._endpoint.switch(moved.peer)
        self._spawn(self._update_advert(), "advertise-family")
        return view.with_me(moved)

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """A task of this node, cancelled at shutdown."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _hint_when_alone(self) -> None:
        """Nobody to join for a while: say why that may be, once, in the log and the
        progress. The network only when nobody was heard: not when the peers heard cannot be
        in the job with this node, or another node advertises its address (core.unformed)."""
        seconds = self._config.timings.lonely_hint
        await asyncio.sleep(seconds)
        if self._phase() is not Phase.WAITING:
            return
        view, mode = self._views.view, discovery_mode(self._config)
        seeds = parse_seeds(self._config.peers) if mode != "mdns" else ()
        network = lonely_hint(seconds, seeds, multicast=mode != "unicast")
        self.hint = alone_hint(view.me, view.others, odd_peers(view), self.shared(view), seconds,
                               self._expect_source, network)
        if self.hint is None:
            return
        log.warning("%s", self.hint)
        self._report()

    async def _ask_while_incomplete(self) -> None:
        """While this node waits without having seen its whole job, have discovery ask
        again, twice as seldom each time: what was lost is not left to the caches' expiry;
        and probe ARP again, for a host given this node's address since (host.arp)."""
        first = interval = self._config.timings.ask_again
        while interval > 0:
            await asyncio.sleep(interval)
            if self._phase() is Phase.WAITING and not self._views.view.complete:
                self._endpoint.discovery.ask_again()
                if self._arp is not None:
                    self._arp.probe()
            interval = min(2 * interval, 16 * first)

    async def _update_advert(self) -> None:
        """Announce this node's advert as it is after the delay: changes made meanwhile
        (a phase, a switch of IP family and back) go out as one, never in the wrong order."""
        await asyncio.sleep(self._config.timings.advertise_delay)
        await self._endpoint.discovery.update(self._views.view.me)
