"""The pure parts of bench/prewarm_bench.py: which pairs a run resumed from a results file
still has to measure, and the summary of the figures."""

from __future__ import annotations

import json
import sys

from paths import REPO

sys.path.insert(0, str(REPO / "bench"))

import prewarm_bench  # noqa: E402


def row(kind, mode, seconds, **more):
    return {"kind": kind, "prewarm": mode, "seconds": seconds, **more}


def test_a_resumed_run_measures_only_the_pairs_not_measured_yet():
    rows = [row("restart", "auto", 5.0), row("restart", "none", 12.0), row("restart", "auto", 6.0)]
    modes = ("auto", "none")
    assert prewarm_bench.measured(rows, "restart", modes, 0)
    assert not prewarm_bench.measured(rows, "restart", modes, 1)  # its "none" is missing
    assert not prewarm_bench.measured(rows, "cold", ("auto", "none", "by-hand"), 0)


def test_the_summary_gives_medians_by_kind_and_mode_and_the_spares_memory():
    rows = [row("restart", "auto", s, spare_rss_mib=700.0) for s in (4.0, 5.0, 9.0)]
    rows += [row("restart", "none", s) for s in (10.0, 12.0)] + [row("cold", "by-hand", 7.5)]
    text = prewarm_bench.summary(rows)
    assert "restart  auto     n= 3 median   5.00 s" in text
    assert "restart  none     n= 2 median  11.00 s" in text
    assert "cold     by-hand  n= 1 median   7.50 s" in text
    assert "warm spare RSS: median 700 MiB (n=3)" in text


def test_the_lab_script_pairs_each_runs_kill_with_its_latest_first_step(tmp_path):
    import prewarm_lab

    lines = [
        {"job": "a", "prewarm": "auto", "killed_unix": 100.0, "first_step_unix": 104.0},
        {"job": "a", "prewarm": "auto", "killed_unix": None, "first_step_unix": 105.0},
        {"job": "b", "prewarm": "none", "killed_unix": 200.0, "first_step_unix": 211.0},
        {"job": "b", "prewarm": "none", "killed_unix": None, "first_step_unix": 209.0},
        {"job": "c", "prewarm": "none", "killed_unix": None, "first_step_unix": 1.0},  # no victim: left out
    ]
    results = tmp_path / "lab.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = prewarm_lab.summarize(results)
    assert "--prewarm auto: median 5.00 s over 1 runs" in text
    assert "--prewarm none: median 11.00 s over 1 runs" in text


def test_the_summary_of_faults_at_a_set_time_says_how_often_the_spare_was_ready_and_when():
    rows = [row("at", "auto", 6.0, fault_after=10.0, spare_ready_s=4.0),
            row("at", "auto", 9.0, fault_after=10.0, spare_ready_s=None),
            row("at", "auto", 7.0, fault_after=10.0, spare_ready_s=8.0), row("at", "none", 12.0, fault_after=10.0)]
    text = prewarm_bench.summary(rows)
    assert "at       auto     n= 3 median   7.00 s" in text and "at       none     n= 1 median  12.00 s" in text
    assert "spare ready after the round's start: 2 of 3 by the kill, median 6.0 s (max 8.0)" in text
