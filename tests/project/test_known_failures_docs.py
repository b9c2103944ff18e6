"""Every known failure's link leads to an entry of the troubleshooting page that names it."""

from __future__ import annotations

import re

import pytest

from paths import REPO
from rendezvous.core.known_failures import KNOWN_FAILURES, SCRIPT_TF_CONFIG

PAGE = (REPO / "docs" / "troubleshooting.md").read_text()


@pytest.mark.parametrize("known", [*KNOWN_FAILURES, SCRIPT_TF_CONFIG], ids=lambda k: k.key)
def test_each_known_failure_has_its_entry_in_troubleshooting(known):
    path, _, anchor = known.link.partition("#")
    assert path == "docs/troubleshooting.md"
    heading = re.search(rf"^### (.*) \{{#{re.escape(anchor)}\}}$", PAGE, re.M)
    assert heading, f"docs/troubleshooting.md has no heading {{#{anchor}}} for {known.key}"
