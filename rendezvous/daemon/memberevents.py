"""The member's event source (`MemberEvents`): what it hears during one round, as
core.member events, for `rendezvous.daemon.joiner.Joiner` to feed to the member machine."""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import aclosing
from typing import AsyncGenerator, AsyncIterator, Callable, Optional

from ..coordinator import JoinSession, SessionLost, Untrusted
from ..core import member as machine
from ..core.listening import Listening
from ..core.member import Member, MemberEvent
from ..core.view import conflicts
from ..launch.launcher import Launcher
from .viewholder import ViewHolder

log = logging.getLogger(__name__)


class MemberEvents:
    """The member's event source: what the coordinator says, changes of whom to join, the
    command's end and the coordinator's silence, as core.member events. It only listens:
    what follows from an event is the member machine's to decide (`Joiner`) and
    `MemberActions`' to carry out. `state` reads the machine's state, which says how long
    to listen for what."""

    def __init__(self, views: ViewHolder, launcher: Launcher, state: Callable[[], Member],
                 expect_source: str = "--expect") -> None:
        self._views = views
        self._launcher = launcher
        self._state = state
        self._expect_source = expect_source  # where config.expect came from, for the conflict it names

    async def joined(self, session: JoinSession) -> AsyncIterator[MemberEvent]:
        # A frozen coordinator accepts the connection and then says nothing: gRPC would
        # wait for its HTTP/2 handshake for 20 s.
        join = asyncio.ensure_future(session.join())
        await asyncio.wait({join}, timeout=self._state().liveness_timeout)
        if not join.done():
            join.cancel()
            yield machine.Lost(f"{session.endpoint} did not take the join within {self._state().liveness_timeout:g} s")
            return
        try:
            join.result()
        except SessionLost as exc:
            yield machine.Lost(str(exc))
            return
        async with aclosing(self.listen(session)) as events:
            async for event in events:
                yield event

    async def listen(
        self, session: JoinSession, exited: Optional[asyncio.Future] = None
    ) -> AsyncGenerator[MemberEvent, None]:
        """What the coordinator says, changes of whom to join, the command's end (`exited`:
        its exit code and why it failed though it did not exit), and the coordinator's
        silence, as they come."""
        receive = asyncio.ensure_future(session.receive())
        listening = Listening()
        try:
            while True:
                view = self._views.view
                now = time.monotonic()
                yield machine.TargetChanged(view.target(now).endpoint, tuple(conflicts(view, now, self._expect_source)))
                self._views.changed.clear()
                changed = asyncio.ensure_future(self._views.changed.wait())
                waiting = {receive, changed} | ({exited} if exited and not exited.done() else set())
                asked = time.monotonic()
                poll = self._state().poll_interval(exited is not None, view.next_lapse(asked))
                await asyncio.wait(waiting, timeout=poll, return_when=asyncio.FIRST_COMPLETED)
                changed.cancel()
                now = time.monotonic()
                listening = listening.woke(self._state(), asked, poll, now)
                if listening.paused_for is not None:
                    log.warning("this node did not run for %.1f s (starved of CPU or stopped): "
                                "the coordinator counts as heard now", listening.paused_for)
                while receive.done():
                    try:
                        yield receive.result()
                    except Untrusted as exc:
                        yield machine.Untrusted(str(exc))
                        return
                    except SessionLost as exc:
                        yield machine.Lost(str(exc))
                        return
                    listening = listening.heard()
                    receive = asyncio.ensure_future(session.receive())
                lost = listening.silent(self._state())
                if lost is not None:
                    yield lost
                    return
                if exited is not None and exited.done() and not exited.cancelled():
                    yield machine.CommandExited(*exited.result())
                    exited = None
                elif exited is not None:
                    stopped = self._launcher.stopped_since(None, now) is not None
                    listening, ended = listening.command(self._state(), stopped, now)
                    if ended is not None:
                        yield ended
                        exited = None
        finally:
            receive.cancel()
