"""`rendezvous status --job NAME --watch`: redrawn in place on a terminal, repeated below
otherwise. The job's coordinator is replaced by a list of answers: only the drawing is tested
here (tests/integration/netns/test_job_status_netns.py asks real coordinators)."""

from __future__ import annotations

import asyncio
import io
import ipaddress

import pytest

from rendezvous.cli import show
from rendezvous.core.job import JobView
from rendezvous.core.size import Size


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Seen(Exception):
    """Every answer was given: ends the watch."""


def views(*phases: str):
    answers = iter(JobView(job="j", round=1, phase=p, expect=Size.fixed(2), coordinator=None) for p in phases)

    async def fetch(job, address, timeout, endpoint=None, lookup=None):
        for view in answers:
            return view, "10.0.0.9:7000"
        raise Seen

    return fetch


def watch(monkeypatch, out: io.StringIO, interval: float = 0.001) -> str:
    """Three answers, the watch asking again every `interval`; what it printed."""
    monkeypatch.setattr(show, "fetch_job", views("gathering", "released", "released"))
    coro = show._show_job("j", ipaddress.ip_address("127.0.0.1"), 1.0, False, True, out, interval)
    with pytest.raises(Seen):
        asyncio.run(coro)
    return out.getvalue()


def test_on_a_terminal_each_view_replaces_the_last(monkeypatch):
    text = watch(monkeypatch, Terminal())
    frames = text.split(show.CLEAR_SCREEN)
    assert frames[0] == "" and len(frames) == 4, text
    assert "(gathering)" in frames[1] and "(released)" in frames[2] and "(released)" in frames[3]


def test_off_a_terminal_each_view_is_printed_below_the_last(monkeypatch):
    text = watch(monkeypatch, io.StringIO())
    assert show.CLEAR_SCREEN not in text
    assert text.index("(gathering)") < text.index("(released)")


def test_the_watch_asks_again_after_the_interval_it_is_given(monkeypatch):
    """The interval comes from the caller (Timings.watch_interval by default), not a constant."""
    slept = []

    async def sleep(seconds):
        slept.append(seconds)

    monkeypatch.setattr(show.asyncio, "sleep", sleep)
    watch(monkeypatch, io.StringIO(), interval=0.25)
    assert slept == [0.25, 0.25, 0.25]


def test_the_default_interval_is_the_timings_one():
    from rendezvous.config.timings import Timings

    assert show.show_job.__defaults__[-1] == Timings().watch_interval
