"""What keeps a flood of bad requests from costing a node much: open Join streams per
address, and warning lines per kind and address."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import Counter
from typing import Iterator, NoReturn

import grpc

from ..core.peer import parse_grpc_peer

# Open Join streams from one address at most: a node opens one, a host a few.
MAX_STREAMS_PER_SOURCE = 64


def source_of(context: grpc.aio.ServicerContext) -> str:
    """The caller's address as gRPC names it, without the port."""
    try:
        return str(parse_grpc_peer(context.peer()))
    except ValueError:
        return context.peer()


async def abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, details: str) -> NoReturn:
    """End the call with `code`: grpc's abort raises, which its untyped API does not say."""
    await context.abort(code, details)
    raise AssertionError("grpc.aio's abort returned")


class RateLimitedWarnings:
    """One warning line per kind and address per `interval` seconds, then how many were
    left out: a flood of bad requests must not become a flood of log lines."""

    def __init__(self, logger: logging.Logger, interval: float, capacity: int = 1024) -> None:
        self._log = logger
        self._interval = interval
        self._capacity = capacity
        self._last: dict[tuple[str, str], float] = {}
        self._skipped: Counter[tuple[str, str]] = Counter()

    def warn(self, kind: str, source: str, message: str, *args: object) -> None:
        key = (kind, source)
        now = time.monotonic()
        if now - self._last.get(key, -math.inf) < self._interval or (
            key not in self._last and len(self._last) >= self._capacity
        ):
            self._skipped[key] += 1
            return
        skipped = self._skipped.pop(key, 0)
        self._last[key] = now
        suffix = f" ({skipped} more like it in the last {self._interval:.0f} s)" if skipped else ""
        self._log.warning(message + suffix, *args)
        if len(self._last) >= self._capacity:
            self._last = {k: t for k, t in self._last.items() if now - t < self._interval}


class Guard:
    """The limits one servicer applies to every caller, and its warnings about them."""

    def __init__(self, job: str, logger: logging.Logger, warning_interval: float) -> None:
        self._job = job
        self.warnings = RateLimitedWarnings(logger, warning_interval)
        self._streams: Counter[str] = Counter()  # open Join streams by source address

    def warn(self, kind: str, source: str, message: str, *args: object) -> None:
        self.warnings.warn(kind, source, message, *args)

    def full(self, source: str) -> bool:
        """Whether `source` has as many Join streams open as it may: idle connections from
        one host must not take every descriptor."""
        if self._streams[source] < MAX_STREAMS_PER_SOURCE:
            return False
        self.warn("streams", source, "refused a Join stream from %s: %d are open from it", source, MAX_STREAMS_PER_SOURCE)
        return True

    @contextlib.contextmanager
    def stream(self, source: str) -> Iterator[None]:
        """Counts one open Join stream from `source` while it lasts."""
        self._streams[source] += 1
        try:
            yield
        finally:
            self._streams[source] -= 1
            if not self._streams[source]:
                del self._streams[source]

    async def refuse(self, context: grpc.aio.ServicerContext, source: str, why: str) -> None:
        """End a call whose authentication failed."""
        self.warn("auth", source, "refused %s: authentication failed (%s)", source, why)
        await context.abort(
            grpc.StatusCode.UNAUTHENTICATED,
            f"authentication failed for job {self._job!r}: {why}. Every peer needs the same --token-file",
        )
