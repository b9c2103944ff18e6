"""Stop signals: the first one stops the node (a flag every wait of the node looks at), a
second SIGINT kills the command at once."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Awaitable, Callable, Optional, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# SIGHUP too: a closed terminal or ssh session must not orphan the command, which runs in
# a process group of its own and so gets no SIGHUP from the terminal.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """A stop signal arrived while waiting."""


class TimedOut(Exception):
    """The timeout passed while waiting."""


class StopSignals:
    def __init__(self, on_stop: Callable[[], None], kill: Callable[[], None]) -> None:
        self._on_stop = on_stop  # at the first signal: stopping the command can take its whole grace period
        self._kill = kill  # at a second SIGINT
        self._stopping = asyncio.Event()
        self.signum: Optional[int] = None  # the first signal's

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self.received, signum)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)

    def received(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.signum is not None:
            if signum == signal.SIGINT:
                log.warning("second %s: killing the command now", name)
                self._kill()
            return
        log.info("received %s: stopping", name)
        self.signum = signum
        self._stopping.set()
        self._on_stop()

    async def until_stopped(
        self, awaitable: Awaitable[T], timeout: Optional[float] = None, waiting: Callable[[], bool] = lambda: True,
        first: Optional[Callable[[], Awaitable[None]]] = None,
    ) -> T:
        """Await `awaitable` unless a stop signal comes first (Stopped), or the timeout while
        `waiting()` still holds at its end (TimedOut). At a stop signal, `first` is awaited
        before `awaitable` is cancelled (cancelling a gRPC read cancels its whole stream)."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({work, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not done and not waiting():
                done, _ = await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if work in done:
            return work.result()
        if stop in done and first is not None:
            await first()
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        if stop in done:
            raise Stopped()
        raise TimedOut()
