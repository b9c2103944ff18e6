"""A confirmed coordinator not heard from for `silent_after` is asked again (core.heard), so
that a node cut off from it shows it silent; one heard recently is not asked."""

from __future__ import annotations

import asyncio

from rendezvous.core.view import PeerView
from rendezvous.daemon import confirmer as confirming
from rendezvous.daemon.confirmer import Confirmer
from rendezvous.daemon.viewholder import ViewHolder

from test_confirmer import INTERVAL, LOW, ME, Script, settle

AFTER = 0.2


def test_a_confirmed_coordinator_gone_quiet_is_asked_again_and_shown_silent(monkeypatch):
    script = Script()
    monkeypatch.setattr(confirming, "fetch_status", script)

    async def scenario() -> None:
        script.adverts, script.silent = [LOW], False
        views = ViewHolder(PeerView(ME).seen(LOW), 0.0, silent_after=AFTER)
        confirmer = Confirmer(views, None, 1.0, INTERVAL, 0.25)
        confirmer.kick()  # a new advert: asked, it answers, it is heard
        await settle(confirmer)
        assert len(script.asked) == 1 and LOW.node_id in views.view.confirmed
        confirmer.kick()  # heard just now: nobody to ask
        await settle(confirmer)
        assert len(script.asked) == 1
        script.silent = True  # cut off
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 50 * (AFTER + INTERVAL)  # the confirmer's own timer asks it
        while LOW.node_id not in views.heard.missed and loop.time() < deadline:
            await asyncio.sleep(AFTER / 4)
        confirmer.close()
        assert len(script.asked) >= 2, "the coordinator gone quiet was never asked again"
        assert LOW.node_id in views.heard.missed

    asyncio.run(scenario())


def test_a_coordinator_suspected_while_asked_again_answers_again_as_a_candidate(monkeypatch, caplog):
    """The ask of a quiet coordinator starts before it is suspected (its Join failed
    meanwhile) and is answered after: it says it answers again and is a candidate again."""
    release = asyncio.Event()
    answer = Script()

    async def held(endpoint, timeout, keys, caller, about=None):
        await release.wait()  # stopped (SIGSTOP), then continued
        return await answer(endpoint, timeout, keys, caller)

    monkeypatch.setattr(confirming, "fetch_status", held)

    async def scenario() -> None:
        answer.adverts, answer.silent = [LOW], False
        views = ViewHolder(PeerView(ME).seen(LOW).confirm(LOW), 0.0, silent_after=AFTER)
        views.hear(LOW.node_id)
        confirmer = Confirmer(views, None, 1.0, INTERVAL, 0.25)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 50 * (AFTER + INTERVAL)
        confirmer.kick()
        while LOW.node_id not in confirmer._tasks and loop.time() < deadline:  # gone quiet: asked again
            await asyncio.sleep(AFTER / 4)
        assert LOW.node_id in confirmer._tasks, "the quiet coordinator was never asked again"
        views.update(views.view.suspect(LOW.node_id, float("inf")))  # its Join failed meanwhile
        release.set()
        await settle(confirmer)
        confirmer.close()
        assert not views.view.is_suspected(LOW.node_id, loop.time())

    with caplog.at_level("INFO", logger="rendezvous.daemon.viewholder"):
        asyncio.run(scenario())
    assert f"{LOW.peer.describe()} answers again: it is a candidate again" in caplog.text, caplog.text


def test_this_node_is_never_missed_or_silent_to_itself():
    """A lost Join stream misses every member it vouched for, this node among them: only
    its peers are recorded, so this node is never left out of what it sees."""

    async def scenario() -> None:
        views = ViewHolder(PeerView(ME).seen(LOW).confirm(LOW), 0.0, silent_after=0.0)
        views.hear(ME.node_id, LOW.node_id)
        views.miss(ME.node_id, LOW.node_id)
        await asyncio.sleep(0.01)
        assert ME.node_id not in views.heard.last and ME.node_id not in views.heard.missed
        assert LOW.node_id in views.heard.missed

    asyncio.run(scenario())
