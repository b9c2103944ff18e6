"""A result (the JSON dict `bench/compare.py` writes) as a Markdown report. Pure: the same
dict always gives the same text, so a stored result can be rendered again."""

from __future__ import annotations

from typing import Mapping, Optional

from .figures import collect_targets

TOOL_NAMES = {"rendezvous": "rendezvous join", "torchrun": "torchrun c10d", "tf_config": "TF_CONFIG by hand"}


def seconds(s: Optional[Mapping], digits: int = 2) -> str:
    """A Summary in seconds: `0.36 s (0.33-0.41)`; one run: `0.36 s`."""
    if not s:
        return "-"
    text = f"{s['median']:.{digits}f} s"
    return text if s["n"] == 1 else f"{text} ({s['low']:.{digits}f}-{s['high']:.{digits}f})"


def millis(s: Optional[Mapping]) -> str:
    if not s:
        return "-"
    text = f"{s['median'] * 1000:.1f} ms"
    return text if s["n"] == 1 else f"{text} ({s['low'] * 1000:.1f}-{s['high'] * 1000:.1f})"


def mib(kib: Optional[float]) -> str:
    return "-" if kib is None else f"{kib / 1024:.1f} MiB"


def times(value: Optional[float], digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}x"


def table(header: list[str], rows: list[list[str]], right: int = 0) -> str:
    """A Markdown table; columns from index `right` on are right-aligned."""
    align = ["---" if i < right else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render(result: Mapping) -> str:
    parts = [header(result)]
    for name, draw in (("startup", startup), ("trainer", trainer), ("daemon", daemon), ("failures", failures)):
        if name in result:
            parts.append(failed(name, result[name]["failed"]) if "failed" in result[name] else draw(result[name]))
    targets = collect_targets(result)
    if targets:
        parts.append("### Targets\n\n" + table(
            ["target", "measured", "bound", "met"],
            [[t.label, f"{t.value:.{3 if t.unit == '%' else 2 if t.unit == 'x' and t.bound < 2 else 1}f}{t.unit}",
              ("at least " if t.at_least else "under ") + f"{t.bound:.3g}{t.unit}",
              "yes" if t.met else "**no**"] for t in targets], right=1))
    if "baseline" in result:
        parts.append(baseline(result["baseline"]))
    return "\n\n".join(parts) + "\n"


TITLES = {"startup": "rendezvous vs torchrun", "trainer": "Hand-written TF_CONFIG vs rendezvous join",
          "daemon": "What the daemon costs", "failures": "Failures"}


def failed(name: str, error: str) -> str:
    """A part whose measurement failed: what failed, and the logs that say why."""
    return f"### {TITLES[name]}\n\n**The measurement failed**:\n\n```\n{error}\n```"


def header(result: Mapping) -> str:
    m = result.get("machine", {})
    load = result.get("load_average", {})
    before = load.get("before_part", {})
    during = "".join(f", before {part} {_load(values)}" for part, values in before.items())
    versions = ", ".join(f"{k} {v or 'not installed'}" for k, v in result.get("versions", {}).items())
    lines = [
        f"Measured {result.get('date', '?')} on {m.get('cores', '?')} cores ({m.get('cpu', '?')}), "
        f"{m.get('memory_gib', '?')} GiB, Linux {m.get('kernel', '?')}; load average (1 min, "
        f"this benchmark's own processes included) {_load(load.get('before'))} at the start"
        f"{during}, {_load(load.get('after'))} at the end.",
        f"Versions: {versions}.",
        f"Command: `{result.get('command', '?')}`",
    ]
    if "programs" in result:
        lines.append(f"Programs: {result['programs']}.")
    if result.get("quick"):
        lines.append("**`--quick`: a smoke run with too few runs to quote.**")
    return "\n".join(lines)


def _load(values) -> str:
    return f"{values[0]:.1f}" if values else "?"


def startup(s: Mapping) -> str:
    text = [
        f"### {TITLES['startup']}\n",
        f"Every agent runs `sh -c 'date +%s.%N > FILE; ...'` (a fork of `date`, then a copy of its "
        f"agent's /proc stat and status). Cold: all N agents launched at once. Warm: N-1 launched, "
        f"and the last one {s.get('settle', 1):g} s after they all logged that they wait for it. "
        f"Latency: last launch -> every command started. Runs: {s.get('runs', '?')} per row, the "
        f"tools alternating run by run; median (min-max). Agent CPU and RSS: the agent process's "
        f"utime+stime and VmRSS when its command started. The ratio is of the two medians; in "
        f"brackets the range of the per-run ratios (run i of one tool over run i of the other).",
    ]
    for skip in s.get("skipped", []):
        text.append(f"\n*{skip['what']} skipped: {skip['reason']}.*")
    tools = s.get("tools", ["rendezvous"])
    rows = []
    for row in s.get("rows", []):
        cells = [row["where"], row["mode"], str(row["n"])]
        for tool in tools:
            cells.append(seconds(row["tools"].get(tool, {}).get("latency")))
        if "torchrun" in tools:
            spread = row.get("ratio_runs")
            cells.append(times(row.get("ratio")) + (
                f" ({spread['low']:.1f}-{spread['high']:.1f})" if spread and spread["n"] > 1 else ""))
        for tool in tools:
            cells.append(millis(row["tools"].get(tool, {}).get("skew")))
        for tool in tools:
            t = row["tools"].get(tool, {})
            cpu = t.get("agent_cpu")
            cells.append(f"{cpu['median']:.2f} s, {mib(t.get('agent_rss_kib', {}).get('median'))}" if cpu else "-")
        rows.append(cells)
    if rows:
        header = ["hosts", "mode", "N"]
        header += [f"{TOOL_NAMES[t]}: latency" for t in tools]
        if "torchrun" in tools:
            header.append("torchrun / rendezvous")
        header += [f"skew {t}" for t in tools]
        header += [f"agent CPU, RSS {t}" for t in tools]
        text.append("\n" + table(header, rows, right=2))
    return "\n".join(text)


def trainer(t: Mapping) -> str:
    text = [f"### {TITLES['trainer']}\n"]
    if t.get("skipped"):
        text.append(f"*Skipped: {t['skipped']}.*")
        return "\n".join(text)
    has_started = all("started" in v for v in t["tools"].values())
    text.append(
        f"Two workers of `{' '.join(t['args'])}` on loopback (127.0.0.2 and .3), launched at "
        f"once, either each with its TF_CONFIG written by the benchmark, or each through "
        f"`rendezvous join --expect 2 -- python -m trainer ...`. "
        + ("Both ways start the trainer through a shell that records the moment (`date`) and "
           "execs it. Trainer started: last launch -> the last worker's trainer started; first "
           if has_started else "First ")
        + f"step: last launch -> the slowest worker's end of its first training batch "
        f"(`timing.first_step_unix` in the trainer's `--result-file`); total: last launch -> "
        f"both exited. Runs: {t['runs']} of each, alternating"
        + (f", after {t['warm_up']} unmeasured each way" if t.get("warm_up") else "")
        + "; median (min-max). The ratio is of the two medians; in brackets the range of the "
        "per-run ratios (run i of one way over run i of the other).\n")
    figures = ["started", "trainer", "first_step", "total"] if has_started else ["first_step", "total"]
    labels = {"started": "launch -> trainer started", "trainer": "trainer started -> first step",
              "first_step": "launch -> first step", "total": "total"}
    rows = [[TOOL_NAMES[name], *(seconds(v[f], 3 if f == "started" else 2) for f in figures)]
            for name, v in t["tools"].items()]
    r = t.get("ratios", {})
    rows.append(["rendezvous / TF_CONFIG", *("-" if f == "started" else times(r.get(f), 3) + _per_run(t, f)
                                            for f in figures)])
    text.append(table(["started with", *(labels[f] for f in figures)], rows, right=1))
    added = t.get("added")
    if added:
        text.append(
            f"\nrendezvous starts the trainer {added['seconds']:.3f} s later than a hand-written "
            f"TF_CONFIG does (the daemon's start and the rendezvous): {added['share'] * 100:.1f}% "
            f"of the hand-written first step. The rest of the first step is TensorFlow's own start "
            f"(trainer started -> first step), in which rendezvous takes no part.")
    return "\n".join(text)


def _per_run(t: Mapping, figure: str) -> str:
    """The range of rendezvous/TF_CONFIG over pairs of runs: how far one pair can mislead."""
    ours, theirs = ([run[figure] for run in t["tools"].get(tool, {}).get("runs", [])]
                    for tool in ("rendezvous", "tf_config"))
    pairs = [a / b for a, b in zip(ours, theirs) if b > 0]
    return f" ({min(pairs):.2f}-{max(pairs):.2f})" if len(pairs) > 1 else ""


def daemon(d: Mapping) -> str:
    where = "network namespaces" if d.get("where") == "netns" else "loopback"
    text = [f"### {TITLES['daemon']}\n\nOne `rendezvous join` in {where}, told by `NOTIFY_SOCKET` "
            "(systemd's protocol) when it is ready.\n"]
    rows = []
    if "start_to_ready" in d:
        rows.append(["launch -> READY=1 (listening and advertised)", seconds(d["start_to_ready"], 3)])
    idle = d.get("idle")
    if idle:
        rows.append([f"CPU while idle, {idle['seconds']:g} s from {idle['after_ready']:g} s after ready",
                     f"{idle['cpu_seconds']:.2f} s = {idle['cpu_percent']:.3f}%"])
        rows.append(["RSS idle (VmRSS at the end of that)", mib(idle["rss_kib"])])
    job = d.get("job")
    if job and all(job["rss_kib"]) and all(job["hwm_kib"]):
        rows.append([f"RSS during a 2-node job ({job['read_after']:g} s into the command), VmRSS / peak",
                     " and ".join(f"{mib(r)} / {mib(h)}" for r, h in zip(job["rss_kib"], job["hwm_kib"]))])
    if rows:
        text.append(table(["figure", "value"], rows, right=1))
    if d.get("release_skipped"):
        text.append(f"\n*CPU from start to release skipped: {d['release_skipped']}.*")
    release = d.get("release")
    if release:
        text.append(
            "\nCPU per daemon from start to release, N daemons in N namespaces launched at once: "
            "utime+stime of each daemon when it said READY=1 and when its command started (read by "
            "the command from /proc of its supervisor's parent); median (min-max) over all daemons of all runs.\n")
        text.append(table(
            ["N", "runs", "CPU at ready", "CPU at release", "last launch -> all started"],
            [[str(r["n"]), str(len(r["runs"])), seconds(r.get("agent_cpu_ready")), seconds(r.get("agent_cpu")),
              seconds(r.get("latency"))] for r in release], right=1))
    return "\n".join(text)


#: What each fault of bench/restart_bench.py is, for the table.
FAULTS = {
    "command": "`kill -9` of one command",
    "daemon": "`kill -9` of a member's daemon, started again at once",
    "stopped-command": "SIGSTOP of one command",
    "frozen": "SIGSTOP of a member's daemon, for good",
    "link-down": "a host's link cut, put back once the others stopped",
    "lost-elastic": "a host's link cut for good, `--expect N-1:N`",
}


def failures(f: Mapping) -> str:
    text = f"### {TITLES['failures']}\n\n"
    if not f.get("available"):
        return text + (f"Fault -> every command stopped, fault -> every command running again, per "
                       f"fault kind: **{f.get('reason', 'not available')}**.")
    text += (f"{f['nodes']} nodes in network namespaces, `--liveness-timeout {f['liveness_timeout']:g}`, "
             f"`--settle {f['settle']:g}` (`bench/restart_bench.py`): fault -> every other node's "
             "command stopped, and -> every node's command of the next round started; median (min-max).\n\n")
    rows = [[FAULTS.get(r["fault"], r["fault"]), seconds(r["stopped"]), seconds(r["running"]) if r["running"] else "waits for it"]
            for r in f["rows"]]
    return text + table(["fault", "-> others stopped", "-> all running again"], rows, right=1)


def baseline(b: Mapping) -> str:
    text = [f"### Against the baseline `{b['file']}` ({b.get('date', '?')})\n",
            f"A ratio that got worse by a factor of more than {1 + b['tolerance']:g} is flagged.\n"]
    rows = []
    for c in b["changes"]:
        worse = "-" if c["worse_by"] is None else f"{c['worse_by']:.2f}"
        rows.append([c["label"], _num(c["old"]), _num(c["new"]), worse, "**worse**" if c["flagged"] else ""])
    text.append(table(["ratio", "baseline", "now", "worse by", "flagged"], rows, right=1))
    return "\n".join(text)


def _num(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.3g}"
