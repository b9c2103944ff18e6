"""Slurm's compressed host lists: `h[01-04,07],login1,rack[1-2]n[1-3]` -> the host names.

Slurm hands a job step its nodes as one such text (`SLURM_STEP_NODELIST`), the way
`scontrol show hostnames` expands it: commas outside brackets separate entries; inside
brackets, commas separate numbers and ranges `LOW-HIGH`, each written with the width of its
lower bound (`[08-10]` is 08, 09, 10; `[8-10]` is 8, 9, 10); an entry with two bracket
groups (`rack[1-2]n[1-3]`) is every combination, the first group varying slowest. The order
is the text's, duplicates stay and empty entries are skipped, as Slurm does. Slurm orders
three or more groups in an entry its own way: those are refused rather than guessed. Pure:
the daemon passes the text in.
"""

from __future__ import annotations

import re
from itertools import product

# A step of a few thousand nodes is a large cluster; a forged `h[0-999999999]` must not
# make a billion names.
MAX_HOSTS = 65536
# The characters of a host name as Slurm takes them (dots for FQDN node names).
_NAME = re.compile(r"[A-Za-z0-9._-]*")
_NUMBER = re.compile(r"[0-9]+")
_MAX_GROUPS = 2


def expand(text: str, limit: int = MAX_HOSTS) -> tuple[str, ...]:
    """The host names of a host list, in order; ValueError naming the text if it is not
    one, or names more than `limit` hosts."""
    hosts: list[str] = []
    for entry in _entries(text):
        for name in _expand_entry(entry, text):
            hosts.append(name)
            if len(hosts) > limit:
                raise ValueError(f"host list {text!r} names more than {limit} hosts")
    return tuple(hosts)


def _entries(text: str) -> list[str]:
    """The entries of `text`: split at the commas outside brackets."""
    entries, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"host list {text!r}: nested brackets")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"host list {text!r}: ']' without '['")
        elif char == "," and depth == 0:
            entries.append(text[start:at])
            start = at + 1
    if depth:
        raise ValueError(f"host list {text!r}: '[' without ']'")
    entries.append(text[start:])
    entries = [e for e in entries if e]
    if not entries:
        raise ValueError(f"host list {text!r}: no host")
    return entries


def _expand_entry(entry: str, text: str) -> list[str]:
    """One entry: literal parts and bracket groups, every combination in order."""
    parts: list[tuple[str, ...]] = []
    rest = entry
    while rest:
        literal, bracket, after = rest.partition("[")
        if not _NAME.fullmatch(literal):
            raise ValueError(f"host list {text!r}: not a host name: {literal!r}")
        parts.append((literal,))
        if not bracket:
            break
        inside, _, rest = after.partition("]")
        parts.append(_expand_ranges(inside, text))
        if len(parts) // 2 > _MAX_GROUPS:
            raise ValueError(f"host list {text!r}: more than {_MAX_GROUPS} bracket groups in {entry!r}")
    count = 1
    for part in parts:
        count *= len(part)
        if count > MAX_HOSTS:
            raise ValueError(f"host list {text!r} names more than {MAX_HOSTS} hosts")
    names = ["".join(combination) for combination in product(*parts)]
    if any(not name for name in names):
        raise ValueError(f"host list {text!r}: an empty host name")
    return names


def _expand_ranges(inside: str, text: str) -> tuple[str, ...]:
    """`01-04,07` -> 01, 02, 03, 04, 07."""
    numbers: list[str] = []
    for item in inside.split(","):
        low, dash, high = item.partition("-")
        if not _NUMBER.fullmatch(low) or (dash and not _NUMBER.fullmatch(high)):
            raise ValueError(f"host list {text!r}: not a number or a range LOW-HIGH: [{inside}]")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"host list {text!r}: range {item} runs backwards")
        if last - first + len(numbers) >= MAX_HOSTS:
            raise ValueError(f"host list {text!r} names more than {MAX_HOSTS} hosts")
        numbers.extend(str(n).zfill(len(low)) for n in range(first, last + 1))
    return tuple(numbers)
