"""Where the tests find the checkout and their helper scripts, wherever the test file sits."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[1]
