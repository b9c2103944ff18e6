"""Numbers written as text, by users (options, variables) and by peers (TXT records,
endpoints): plain ASCII digits only. int() and float() would also take '1_0', '+3', ' 7',
other scripts' digits, exponents, inf and nan."""

from __future__ import annotations

import re
from typing import Optional

_WHOLE_TEXT = re.compile(r"[0-9]+")
_SECONDS_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def parse_whole(text: str, max_digits: int = 20) -> Optional[int]:
    """`42` -> 42; None unless the text is at most `max_digits` ASCII digits."""
    return int(text) if len(text) <= max_digits and _WHOLE_TEXT.fullmatch(text) else None


def parse_seconds(text: str) -> Optional[float]:
    """`2.5`, `-1`, `.5` -> a float; None unless the text is a plain decimal number."""
    return float(text) if len(text) <= 40 and _SECONDS_TEXT.fullmatch(text) else None
