"""The pure parts of bench/prewarm_bench.py: which pairs a run resumed from a results file
still has to measure, and the summary of the figures."""

from __future__ import annotations

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
