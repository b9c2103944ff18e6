"""How many peers a job has: `--expect N`, or `--expect MIN:MAX` for an elastic job.

A round freezes at once with MAX peers, or with at least MIN once no new peer has come
for the settle time (`round.settle`). `N` is `N:N`.
"""

from __future__ import annotations


from .numbers import parse_whole
from .record import record

MAX_PEERS = 4096


@record
class Size:
    min: int
    max: int

    def __post_init__(self) -> None:
        for bound in (self.min, self.max):
            if not (isinstance(bound, int) and not isinstance(bound, bool)):
                raise ValueError(f"peer counts are whole numbers, got {bound!r}")
        if not 1 <= self.min <= self.max <= MAX_PEERS:
            raise ValueError(
                f"needs 1 <= MIN <= MAX <= {MAX_PEERS}, got {self.min}:{self.max}"
            )

    @classmethod
    def fixed(cls, n: int) -> "Size":
        return cls(n, n)

    @classmethod
    def parse(cls, text: str) -> "Size":
        """`3` -> 3:3, `2:4` -> 2:4; ValueError naming the text otherwise."""
        low, sep, high = text.strip().partition(":")
        counts = [parse_whole(low.strip()), parse_whole(high.strip()) if sep else None]
        if counts[0] is None or (sep and counts[1] is None):
            raise ValueError(f"must be N or MIN:MAX (whole numbers), got {text!r}")
        return cls(counts[0], counts[1] if sep else counts[0])  # type: ignore[arg-type]

    @property
    def elastic(self) -> bool:
        return self.min != self.max

    def __contains__(self, count: object) -> bool:
        return isinstance(count, int) and self.min <= count <= self.max

    def __str__(self) -> str:
        """As `--expect` takes it: `3`, `2:4`."""
        return f"{self.min}:{self.max}" if self.elastic else str(self.max)

    def describe(self) -> str:
        """For messages: `3`, `2 to 4`."""
        return f"{self.min} to {self.max}" if self.elastic else str(self.max)

    def fields(self) -> dict[str, int]:
        """As JSON and the wire both carry it: `expect` is MAX, `expect_min` is MIN."""
        return {"expect": self.max, "expect_min": self.min}

    def progress(self, count: int) -> str:
        """How far a round is: `2/3`, or `2/4 (at least 2)` for an elastic job."""
        return f"{count}/{self.max} (at least {self.min})" if self.elastic else f"{count}/{self.max}"
