"""Tests of rendezvous.core.size: `--expect N` and `--expect MIN:MAX`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.size import MAX_PEERS, Size


@pytest.mark.parametrize(
    "text, size",
    [("3", Size(3, 3)), ("2:4", Size(2, 4)), (" 1 : 1 ", Size(1, 1)), ("4096", Size(4096, 4096)), ("3:3", Size(3, 3))],
)
def test_parse(text, size):
    assert Size.parse(text) == size


@pytest.mark.parametrize("text", ["", ":", "2:", ":3", "a", "2:x", "-1:3", "1.5", "2:3:4", "+2", "٣"])
def test_parse_refuses_what_is_not_n_or_min_max(text):
    with pytest.raises(ValueError, match="N or MIN:MAX"):
        Size.parse(text)


@pytest.mark.parametrize("text", ["0", "3:2", "0:2", "4097", "1:4097"])
def test_parse_refuses_counts_out_of_range(text):
    with pytest.raises(ValueError, match="1 <= MIN <= MAX"):
        Size.parse(text)


@pytest.mark.parametrize("bad", [True, 2.0, "2", None])
def test_counts_are_whole_numbers(bad):
    with pytest.raises(ValueError, match="whole numbers"):
        Size(bad, 3)  # type: ignore[arg-type]


def test_text_forms():
    assert (str(Size(3, 3)), str(Size(2, 4))) == ("3", "2:4")
    assert (Size(3, 3).describe(), Size(2, 4).describe()) == ("3", "2 to 4")
    assert (Size(3, 3).progress(1), Size(2, 4).progress(3)) == ("1/3", "3/4 (at least 2)")
    assert not Size.fixed(3).elastic and Size(2, 3).elastic


def test_contains():
    assert [n in Size(2, 4) for n in range(6)] == [False, False, True, True, True, False]


@given(st.integers(1, MAX_PEERS), st.integers(0, 100))
def test_str_round_trips_through_parse(low, extra):
    size = Size(low, min(MAX_PEERS, low + extra))
    assert Size.parse(str(size)) == size
