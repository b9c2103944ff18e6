"""How long a test waits for something that must happen before it calls it a hang.

These bounds measure no speed: they only end a test that would otherwise wait for ever, so
they are generous. The machine may be loaded (two shared cores, other test runs beside this
one), where an interpreter that starts in 0.2 s on a quiet machine can take several seconds.
A test about how fast something happens derives its bound from the timings it configured.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

# Under pytest-timeout's 300 s for the whole test, so a hang names what it waited for.
HANG = 120.0

T = TypeVar("T")


def wait_until(condition: Callable[[], T], what: str = "", timeout: float = HANG,
               interval: float = 0.05) -> T:
    """Poll `condition` until it returns something true; that value. AssertionError naming
    `what` (called if callable) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout:.0f}s: {what() if callable(what) else what}")
        time.sleep(interval)
