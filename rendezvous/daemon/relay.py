"""The command's progress, from the file it appends to on to the coordinator: one round's
member creates the file at the freeze (its path goes into the command's environment),
follows it from the start and sends the latest progress on its Join stream, at most once
per `Timings.progress_send`, so that a command writing many lines a second costs the
coordinator no more than one message per interval.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable, Optional

from ..coordinator import JoinSession, SessionLost
from ..core.progress import Progress
from ..launch.follower import ProgressFollower, create_progress_file


class ProgressRelay:
    """Follows one round's progress file and relays the latest progress to the coordinator."""

    def __init__(self, directory: Optional[Path], poll: float, send_every: float,
                 on_progress: Callable[[Progress], None]) -> None:
        self._directory = directory
        self._poll = poll
        self._send_every = send_every
        self._on_progress = on_progress
        self._follower: Optional[ProgressFollower] = None
        self._progressed = asyncio.Event()
        self._sender: Optional[asyncio.Task] = None

    @property
    def latest(self) -> Optional[Progress]:
        return self._follower.latest if self._follower else None

    def path(self, node_id: str) -> Path:
        """The file the command writes to, created at the first call (the first freeze)."""
        if self._follower is None:
            path = create_progress_file(self._directory, node_id)
            self._follower = ProgressFollower(path, self._poll, self._progressed_to)
        return self._follower.path

    def start(self, session: JoinSession) -> None:
        """Once the command starts: follow its file, send what it says on `session`."""
        if self._follower is not None:
            self._follower.start()
            self._sender = asyncio.create_task(self._send(session), name="send-progress")

    def stop_sending(self) -> None:
        if self._sender is not None:
            self._sender.cancel()

    async def close(self) -> None:
        """Stops following and removes the file."""
        if self._follower is not None:
            await self._follower.close()

    def _progressed_to(self, progress: Progress) -> None:
        self._progressed.set()
        self._on_progress(progress)

    async def _send(self, session: JoinSession) -> None:
        """The latest progress to the coordinator, at most once per `send_every`."""
        while True:
            await self._progressed.wait()
            self._progressed.clear()
            if self.latest is None:
                return
            try:
                await session.progress(self.latest)
            except SessionLost:
                return  # the read side reports the lost coordinator
            await asyncio.sleep(self._send_every)
