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


def views(*phases: str):
    answers = iter(JobView(job="j", round=1, phase=p, expect=Size.fixed(2), coordinator=None) for p in phases)

    async def fetch(job, address, timeout, endpoint=None):
        return next(answers), "10.0.0.9:7000"

    return fetch


def watch(monkeypatch, out: io.StringIO, seconds: float) -> str:
    monkeypatch.setattr(show, "fetch_job", views("gathering", "released", "released", "released"))
    coro = show._show_job("j", ipaddress.ip_address("127.0.0.1"), 1.0, False, True, out)
    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(asyncio.wait_for(coro, seconds))
    return out.getvalue()


def test_on_a_terminal_each_view_replaces_the_last(monkeypatch):
    text = watch(monkeypatch, Terminal(), 1.5)
    frames = text.split(show.CLEAR_SCREEN)
    assert frames[0] == "" and len(frames) == 3, text
    assert "(gathering)" in frames[1] and "(released)" in frames[2]


def test_off_a_terminal_each_view_is_printed_below_the_last(monkeypatch):
    text = watch(monkeypatch, io.StringIO(), 1.5)
    assert show.CLEAR_SCREEN not in text
    assert text.index("(gathering)") < text.index("(released)")
