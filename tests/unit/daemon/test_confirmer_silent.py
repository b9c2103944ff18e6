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
