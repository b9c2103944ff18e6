"""How a node waits under stop signals: the first stops it, a second SIGINT kills the command,
and --timeout ends only a wait that still waits for peers."""

from __future__ import annotations

import asyncio
import signal

import pytest

from rendezvous.daemon.signals import StopSignals, Stopped, TimedOut


def signals(calls: list[str]) -> StopSignals:
    return StopSignals(lambda: calls.append("stop"), lambda: calls.append("kill"))


def test_work_that_ends_first_gives_its_result():
    async def scenario():
        return await signals([]).until_stopped(asyncio.sleep(0, "done"))

    assert asyncio.run(scenario()) == "done"


def test_a_stop_signal_ends_the_wait_and_cancels_the_work():
    async def scenario():
        calls: list[str] = []
        stops = signals(calls)
        work = asyncio.ensure_future(asyncio.Event().wait())
        asyncio.get_running_loop().call_soon(stops.received, signal.SIGTERM)
        with pytest.raises(Stopped):
            await stops.until_stopped(work)
        return calls, work.cancelled(), stops.signum

    assert asyncio.run(scenario()) == (["stop"], True, signal.SIGTERM)


def test_the_timeout_ends_a_wait_that_still_waits():
    async def scenario():
        with pytest.raises(TimedOut):
            await signals([]).until_stopped(asyncio.Event().wait(), timeout=0.01)

    asyncio.run(scenario())


def test_past_the_timeout_work_that_no_longer_waits_goes_on_to_its_end():
    """A round frozen before --timeout passes goes on to its start."""
    async def scenario():
        done = asyncio.Event()
        work = asyncio.ensure_future(done.wait())

        async def later():
            await asyncio.sleep(0.05)
            done.set()

        finisher = asyncio.ensure_future(later())
        result = await signals([]).until_stopped(work, timeout=0.01, waiting=lambda: False)
        await finisher
        return result

    assert asyncio.run(scenario()) is True


def test_a_second_sigint_kills_the_command_and_another_signal_does_nothing_more():
    calls: list[str] = []
    stops = signals(calls)

    async def scenario():
        stops.received(signal.SIGTERM)
        stops.received(signal.SIGHUP)
        stops.received(signal.SIGINT)

    asyncio.run(scenario())
    assert calls == ["stop", "kill"] and stops.signum == signal.SIGTERM
