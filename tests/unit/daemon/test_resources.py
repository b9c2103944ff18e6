"""How a node passes on changes of its view: the first few at once, a burst at most every
VIEW_SETTLE seconds."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rendezvous.daemon.resources import VIEW_BURST, VIEW_SETTLE, Resources


class FakeView:
    def __init__(self, n: int) -> None:
        self.n = n

    def target(self, now: float) -> int:
        return self.n


def resources(told: list[int]) -> Resources:
    res = Resources(
        me=None, view=FakeView(0), reservation=None, server=None, health=None,  # type: ignore[arg-type]
        service=SimpleNamespace(follow=lambda target: None), discovery=None,  # type: ignore[arg-type]
        on_view=lambda: told.append(res.view.n), policy=None,  # type: ignore[arg-type]
    )
    return res


def test_the_first_changes_are_told_at_once_and_a_burst_once_at_the_end_of_the_window():
    async def scenario() -> tuple[list[int], list[int]]:
        told: list[int] = []
        res = resources(told)
        for n in range(1, VIEW_BURST + 4):
            res.update_view(FakeView(n))  # type: ignore[arg-type]
        at_once = list(told)
        await asyncio.sleep(VIEW_SETTLE * 3)
        return at_once, told

    at_once, told = asyncio.run(scenario())
    assert at_once == list(range(1, VIEW_BURST + 1))  # the node that just started waits for none
    assert told == [*at_once, VIEW_BURST + 3]  # the rest of the burst: once, the latest view


def test_a_quiet_window_lets_the_next_changes_through_at_once_again():
    async def scenario() -> list[int]:
        told: list[int] = []
        res = resources(told)
        for n in range(1, VIEW_BURST + 1):
            res.update_view(FakeView(n))  # type: ignore[arg-type]
        await asyncio.sleep(VIEW_SETTLE * 2)
        res.update_view(FakeView(10))  # type: ignore[arg-type]
        return told

    assert asyncio.run(scenario()) == [*range(1, VIEW_BURST + 1), 10]


def test_changes_that_keep_coming_are_told_once_a_window_after_the_first_burst():
    async def scenario() -> list[int]:
        told: list[int] = []
        res = resources(told)
        for n in range(1, 41):  # a change every VIEW_SETTLE / 4 for 10 windows
            res.update_view(FakeView(n))  # type: ignore[arg-type]
            await asyncio.sleep(VIEW_SETTLE / 4)
        await asyncio.sleep(VIEW_SETTLE * 3)
        return told

    told = asyncio.run(scenario())
    assert told[:VIEW_BURST] == list(range(1, VIEW_BURST + 1)) and told[-1] == 40
    # about one a window after the burst (timers may run late on a busy machine: not more)
    assert len(told) <= VIEW_BURST + 12
