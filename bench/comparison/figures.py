"""Pure figures: no processes, no clock, no files. Everything here works on text and numbers,
so the tests check it without running a benchmark.

A result is a plain JSON-able dict (see `bench/compare.py`); the ratios and targets are read
back from it, so a stored result can be compared with a new one or re-rendered.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Iterable, Mapping, Optional, Sequence

#: A ratio that got worse by more than this factor against the baseline is flagged.
DEFAULT_TOLERANCE = 0.20

HIGHER, LOWER = "higher", "lower"


class FigureError(ValueError):
    """A recorded figure cannot be read: the text it came from is named in the message."""


# -- what the started commands recorded ------------------------------------------------------


def parse_start(text: str) -> float:
    """`date +%s.%N` output -> seconds since the epoch."""
    try:
        value = float(text.strip())
    except ValueError:
        raise FigureError(f"not a start time (date +%s.%N): {text.strip()[:60]!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise FigureError(f"not a start time (date +%s.%N): {text.strip()[:60]!r}")
    return value


def parse_proc_stat(text: str) -> tuple[int, int]:
    """(utime, stime) in clock ticks from /proc/<pid>/stat.

    The second field is the command name in parentheses and may itself hold spaces or
    parentheses, so fields are counted from the last ')'."""
    end = text.rfind(")")
    if end < 0:
        raise FigureError(f"not a /proc/<pid>/stat line: {text.strip()[:60]!r}")
    fields = text[end + 1 :].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    try:
        return int(fields[11]), int(fields[12])
    except (IndexError, ValueError):
        raise FigureError(f"not a /proc/<pid>/stat line: {text.strip()[:60]!r}") from None


def cpu_seconds(stat_text: str, ticks_per_second: int) -> float:
    """User + system CPU seconds of a process (all its threads) from its /proc/<pid>/stat."""
    utime, stime = parse_proc_stat(stat_text)
    return (utime + stime) / ticks_per_second


def parse_status_kib(text: str, field: str) -> Optional[int]:
    """A `Name:  1234 kB` field of /proc/<pid>/status in KiB, None if absent."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == field:
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
                return int(parts[0])
            raise FigureError(f"/proc status field {field} is not 'N kB': {line!r}")
    return None


def parse_notify(data: bytes) -> dict[str, str]:
    """An sd_notify datagram (`READY=1\\nSTATUS=...`) -> its assignments."""
    fields: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value
    return fields


# -- runs and summaries ----------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """Median and range of one figure over several runs."""

    n: int
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Iterable[float]) -> "Summary":
        values = [float(v) for v in values]
        if not values:
            raise ValueError("no values to summarize")
        return cls(len(values), statistics.median(values), min(values), max(values))

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Round:
    """One start of N agents: when the last was launched, when each command started, and each
    agent's CPU seconds and RSS read by its command as it started."""

    launched_last: float
    starts: tuple[float, ...]
    agent_cpu: tuple[float, ...] = ()
    agent_rss_kib: tuple[int, ...] = ()
    agent_cpu_ready: tuple[float, ...] = ()  # CPU seconds when the agent said it was ready

    @property
    def latency(self) -> float:
        """Last launch -> every command started."""
        return max(self.starts) - self.launched_last

    @property
    def skew(self) -> float:
        """First command start -> last command start."""
        return max(self.starts) - min(self.starts)

    def to_json(self) -> dict:
        out = {
            "latency": self.latency,
            "skew": self.skew,
            "agent_cpu": list(self.agent_cpu),
            "agent_rss_kib": list(self.agent_rss_kib),
        }
        if self.agent_cpu_ready:
            out["agent_cpu_ready"] = list(self.agent_cpu_ready)
        return out


def summarize_rounds(rounds: Sequence[Round]) -> dict:
    """The JSON of one tool at one size: every run, then medians and ranges."""
    out = {
        "runs": [r.to_json() for r in rounds],
        "latency": Summary.of(r.latency for r in rounds).to_json(),
        "skew": Summary.of(r.skew for r in rounds).to_json(),
    }
    cpu = [c for r in rounds for c in r.agent_cpu]
    if cpu:
        out["agent_cpu"] = Summary.of(cpu).to_json()
    rss = [k for r in rounds for k in r.agent_rss_kib]
    if rss:
        out["agent_rss_kib"] = Summary.of(rss).to_json()
    ready = [c for r in rounds for c in r.agent_cpu_ready]
    if ready:
        out["agent_cpu_ready"] = Summary.of(ready).to_json()
    return out


def summarize_trainer(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> dict:
    """The JSON of the trainer part from each way's runs (`agents.trainer_round`): every run,
    medians and ranges (`trainer` is TensorFlow's own part: trainer started -> first step),
    the ratios rendezvous/TF_CONFIG of the medians, and what rendezvous adds before the
    trainer starts, in seconds and as a share of the hand-written first step: a figure with
    the noise of a short start, not of two TensorFlow starts."""
    def figures(r: Mapping[str, float]) -> dict[str, float]:
        return {**r, "trainer": r["first_step"] - r["started"]}

    out: dict = {"tools": {}}
    for tool, rs in runs.items():
        rows = [figures(r) for r in rs]
        out["tools"][tool] = {"runs": rows,
                              **{name: Summary.of(r[name] for r in rows).to_json() for name in rows[0]}}
    ours, theirs = out["tools"]["rendezvous"], out["tools"]["tf_config"]
    out["ratios"] = {name: ratio(ours[name]["median"], theirs[name]["median"])
                     for name in ("trainer", "first_step", "total")}
    added = ours["started"]["median"] - theirs["started"]["median"]
    out["added"] = {"seconds": added, "share": added / theirs["first_step"]["median"]}
    return out


def alternate(tools: Sequence[str], runs: int) -> list[tuple[int, str]]:
    """(run, tool) in the order to measure them: every tool once per run, the first tool
    alternating run by run, so neither always runs on a machine the other just warmed."""
    order = []
    for run in range(runs):
        for tool in tools if run % 2 == 0 else list(reversed(tools)):
            order.append((run, tool))
    return order


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


# -- ratios, targets and the baseline ---------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    """A ratio of two tools' figures measured in the same run; `better` is 'higher' or 'lower'."""

    key: str
    label: str
    value: float
    better: str


#: The first step's ratio read from what rendezvous adds before the trainer starts.
ADDED_LABEL = "start -> first step, from the time added before the trainer starts"


def added_ratio(trainer: Mapping) -> Optional[float]:
    """1 + what rendezvous adds before the trainer starts, as a share of the hand-written
    first step: the first step's ratio without the noise of two TensorFlow starts."""
    added = trainer.get("added")
    return None if added is None else 1 + added["share"]


def collect_ratios(result: Mapping) -> list[Ratio]:
    """Every ratio a result holds, with a key that stays the same from run to run."""
    found: list[Ratio] = []
    for row in result.get("startup", {}).get("rows", []):
        value = row.get("ratio")
        if value is not None:
            found.append(Ratio(
                f"startup.{row['where']}.{row['mode']}.n{row['n']}",
                f"torchrun / rendezvous, {row['where']}, {row['mode']}, N={row['n']}",
                value, HIGHER,
            ))
    trainer = result.get("trainer", {})
    for name, label in (("first_step", "start -> first step"), ("total", "total time")):
        value = trainer.get("ratios", {}).get(name)
        if value is not None:
            found.append(Ratio(f"trainer.{name}", f"rendezvous / TF_CONFIG, {label}", value, LOWER))
    added = added_ratio(trainer)
    if added is not None:
        found.append(Ratio("trainer.added", f"rendezvous / TF_CONFIG, {ADDED_LABEL}", added, LOWER))
    return found


@dataclass(frozen=True)
class Target:
    label: str
    value: float
    bound: float
    at_least: bool  # True: value >= bound is met; False: value < bound is met
    unit: str = ""

    @property
    def met(self) -> bool:
        return self.value >= self.bound if self.at_least else self.value < self.bound


#: The issue's targets: torchrun/rendezvous at N=2 and N=8 in both modes.
RATIO_TARGETS = {2: 7.0, 8: 9.0}
FIRST_STEP_TARGET = 1.05
IDLE_RSS_TARGET_MIB = 45e6 / 2**20  # 45 MB
IDLE_CPU_TARGET_PERCENT = 0.1


def collect_targets(result: Mapping) -> list[Target]:
    targets: list[Target] = []
    for row in result.get("startup", {}).get("rows", []):
        bound = RATIO_TARGETS.get(row["n"])
        if bound is not None and row.get("ratio") is not None:
            targets.append(Target(
                f"torchrun / rendezvous, {row['where']}, {row['mode']}, N={row['n']}",
                row["ratio"], bound, at_least=True, unit="x",
            ))
    first = result.get("trainer", {}).get("ratios", {}).get("first_step")
    if first is not None:
        targets.append(Target("rendezvous / TF_CONFIG, start -> first step", first,
                              FIRST_STEP_TARGET, at_least=False, unit="x"))
    added = added_ratio(result.get("trainer", {}))
    if added is not None:
        targets.append(Target("the same, from the time added before the trainer starts", added,
                              FIRST_STEP_TARGET, at_least=False, unit="x"))
    idle = result.get("daemon", {}).get("idle")
    if idle:
        targets.append(Target("idle daemon RSS", idle["rss_kib"] / 1024, IDLE_RSS_TARGET_MIB,
                              at_least=False, unit=" MiB"))
        targets.append(Target("idle daemon CPU", idle["cpu_percent"], IDLE_CPU_TARGET_PERCENT,
                              at_least=False, unit="%"))
    return targets


@dataclass(frozen=True)
class Change:
    """One ratio in the baseline and now. `worse_by` > 1 means it got worse by that factor."""

    key: str
    label: str
    old: Optional[float]
    new: Optional[float]
    better: str
    worse_by: Optional[float]
    flagged: bool


def compare_with_baseline(current: Mapping, baseline: Mapping,
                          tolerance: float = DEFAULT_TOLERANCE) -> list[Change]:
    """Every ratio of either result; flagged when it is in both and got worse by more than
    `tolerance` (0.2: a factor of 1.2, e.g. torchrun/rendezvous 10x -> under 8.33x, or
    rendezvous/TF_CONFIG 1.02 -> over 1.224). A ratio in only one of them is listed, never
    flagged."""
    now = {r.key: r for r in collect_ratios(current)}
    before = {r.key: r for r in collect_ratios(baseline)}
    changes = []
    for key in list(before) + [k for k in now if k not in before]:
        old, new = before.get(key), now.get(key)
        ref = new or old
        worse_by = None
        if old is not None and new is not None and old.value > 0 and new.value > 0:
            worse_by = old.value / new.value if ref.better == HIGHER else new.value / old.value
        changes.append(Change(
            key, ref.label, old.value if old else None, new.value if new else None, ref.better,
            worse_by, worse_by is not None and worse_by > 1 + tolerance + 1e-12,
        ))
    return changes


# -- options ---------------------------------------------------------------------------------


def parse_sizes(text: str, option: str, low: int = 2, high: int = 250) -> list[int]:
    """`2,4,8` -> [2, 4, 8]: whole numbers from `low` to `high`, without repeats."""
    sizes = []
    for word in text.split(","):
        word = word.strip()
        if not word.isascii() or not word.isdigit() or not low <= int(word) <= high:
            raise ValueError(f"{option} takes comma-separated whole numbers from {low} to {high}, got {text!r}")
        if int(word) not in sizes:
            sizes.append(int(word))
    return sizes


def parse_choices(text: str, option: str, allowed: Sequence[str]) -> list[str]:
    """`a,b` -> ['a', 'b'], each one of `allowed`, in the order of `allowed`."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in words if w not in allowed]
    if unknown or not words:
        raise ValueError(f"{option} takes a comma-separated list of {', '.join(allowed)}, got {text!r}")
    return [a for a in allowed if a in words]
