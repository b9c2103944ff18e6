"""--prewarm: the next round's launcher, whose command interpreter imports its modules
while a round runs, so that a restart round, an admission or a rejoin starts warm. One
spare per node; it goes with the job. It imports at the lowest CPU and I/O priority, so
that it never slows the round that runs, and at the usual one once it is taken."""

from __future__ import annotations

import asyncio
from typing import Callable, Optional, Sequence

from ..launch.launcher import Launcher
from ..launch.prewarm import modules_for


class Spare:
    def __init__(self, make_launcher: Callable[[], Launcher], prewarm: Optional[str], command: Sequence[str]) -> None:
        self._make_launcher = make_launcher
        self._command = tuple(command)
        self._modules, self._optional = modules_for(prewarm, command)
        self._launcher: Optional[Launcher] = None
        self._up: Optional[asyncio.Task] = None

    def warm(self) -> None:
        """Start warming (--timings spare-after after the round's start, or at its first
        progress line if sooner); nothing without modules to import, or with a spare."""
        if not self._modules or self._launcher is not None:
            return
        spare = self._launcher = self._make_launcher()
        self._up = asyncio.create_task(spare.prepare(self._command, self._modules, self._optional, spare=True),
                                       name="spare")

    def take(self) -> Optional[Launcher]:
        """The spare for the next round, if it is ready (its interpreter up or fallen back)."""
        spare, up = self._launcher, self._up
        if spare is None or up is None or not up.done() or up.exception() is not None:
            return None
        self._launcher, self._up = None, None
        spare.foreground()
        return spare

    def memory(self) -> Optional[tuple[int, int]]:
        """The spare's waiting interpreter: its pid and resident bytes, if there is one."""
        return self._launcher.warm_memory() if self._launcher is not None else None

    async def stop(self) -> None:
        spare, self._launcher = self._launcher, None
        if spare is not None:
            if self._up is not None:
                await asyncio.gather(self._up, return_exceptions=True)
            await spare.stop(0)
