"""Slurm host lists: the forms `scontrol show hostnames` expands (each expected value below
is what Slurm 22.05's scontrol printed), and properties over generated lists."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core.hostlist import MAX_HOSTS, expand


@pytest.mark.parametrize(
    "text, hosts",
    [
        ("h1", ["h1"]),
        ("h[01-04,07]", ["h01", "h02", "h03", "h04", "h07"]),
        ("rack[1-2]n[1-3]", ["rack1n1", "rack1n2", "rack1n3", "rack2n1", "rack2n2", "rack2n3"]),
        ("a,b[8-10],c[08-10]", ["a", "b8", "b9", "b10", "c08", "c09", "c10"]),
        ("h[009-10]", ["h009", "h010"]),
        ("h[01-2]", ["h01", "h02"]),
        ("x[0-0]", ["x0"]),
        ("h1,h1", ["h1", "h1"]),
        ("a-b.c[1-2]", ["a-b.c1", "a-b.c2"]),
        ("a[1-2][3-4]", ["a13", "a14", "a23", "a24"]),
        ("h[1-2],", ["h1", "h2"]),
        (",a", ["a"]),
        ("[1-2]", ["1", "2"]),
        ("gpu[1,3-4],cpu[10-11]", ["gpu1", "gpu3", "gpu4", "cpu10", "cpu11"]),
    ],
)
def test_expands_as_scontrol_does(text: str, hosts: list[str]) -> None:
    assert expand(text) == tuple(hosts)


@pytest.mark.parametrize(
    "text, said",
    [
        ("h[2-1]", "runs backwards"),
        ("h[[1]]", "nested brackets"),
        ("h[a]", "not a number"),
        ("h[]", "not a number"),
        ("h[1-3", "'[' without ']'"),
        ("h1]", "']' without '['"),
        ("", "no host"),
        (",", "no host"),
        ("a b", "not a host name"),
        ("h[1-2-3]", "not a number"),
        ("a[1-2]b[3-4]c[5-6]", "more than 2 bracket groups"),
    ],
)
def test_refuses_what_is_not_a_host_list_naming_it(text: str, said: str) -> None:
    with pytest.raises(ValueError, match="host list") as raised:
        expand(text)
    assert said in str(raised.value) and repr(text) in str(raised.value)


def test_a_huge_range_is_refused_without_making_its_names() -> None:
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} hosts"):
        expand("h[0-999999999999]")
    with pytest.raises(ValueError, match=f"more than {MAX_HOSTS} hosts"):
        expand("a[0-999]b[0-999]")
    with pytest.raises(ValueError, match="more than 3 hosts"):
        expand("h[1-2],g[1-2]", limit=3)


# -- properties ----------------------------------------------------------------------------

prefixes = st.text("abcxyz-.", min_size=1, max_size=4).filter(lambda p: not p[-1].isdigit())


@st.composite
def host_groups(draw: st.DrawFn) -> tuple[str, list[str]]:
    """One entry `prefix[ranges]` and the names it stands for, written independently of
    the parser: zero padding to the lower bound's width."""
    prefix = draw(prefixes)
    width = draw(st.integers(1, 3))
    items, names = [], []
    for _ in range(draw(st.integers(1, 4))):
        low = draw(st.integers(0, 10 ** width - 1))
        high = draw(st.integers(low, low + 12))
        text_low = f"{low:0{width}d}"
        items.append(text_low if low == high else f"{text_low}-{high}")
        names += [f"{prefix}{n:0{width}d}" for n in range(low, high + 1)]
    return f"{prefix}[{','.join(items)}]", names


@settings(deadline=None)
@given(st.lists(st.one_of(host_groups(), prefixes.map(lambda p: (p + "1", [p + "1"]))), min_size=1, max_size=6))
def test_every_entry_expands_to_its_names_in_order(entries: list[tuple[str, list[str]]]) -> None:
    text = ",".join(entry for entry, _ in entries)
    assert expand(text) == tuple(name for _, names in entries for name in names)


@settings(deadline=None)
@given(host_groups(), host_groups())
def test_two_groups_are_every_combination_the_first_slowest(first: tuple[str, list[str]],
                                                            second: tuple[str, list[str]]) -> None:
    assert expand(first[0] + second[0]) == tuple(a + b for a in first[1] for b in second[1])


@settings(deadline=None, max_examples=500)
@given(st.text("ab01-9[],. x", max_size=24))
def test_any_text_is_a_host_list_or_a_value_error(text: str) -> None:
    try:
        hosts = expand(text)
    except ValueError as exc:
        assert "host list" in str(exc)
    else:
        assert hosts and all(h and "[" not in h and "]" not in h and "," not in h for h in hosts)
