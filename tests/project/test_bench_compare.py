"""The pure parts of bench/compare.py: what commands record, summaries, ratios, the baseline
comparison, options and the Markdown report. Nothing here starts a process or reads a clock."""

from __future__ import annotations

import json
import sys

import pytest

from paths import REPO

sys.path.insert(0, str(REPO / "bench"))

import compare  # noqa: E402
from comparison import markdown  # noqa: E402
from comparison.agents import TRAINER_STARTED, rendezvous_argv, record_command, settled_marker, torchrun_argv  # noqa: E402
from comparison.figures import (  # noqa: E402
    FigureError,
    Round,
    Summary,
    alternate,
    collect_ratios,
    collect_targets,
    compare_with_baseline,
    cpu_seconds,
    parse_choices,
    parse_notify,
    parse_proc_stat,
    parse_sizes,
    parse_start,
    parse_status_kib,
    ratio,
    summarize_rounds,
    summarize_trainer,
)
from comparison.machine import first_line_value  # noqa: E402
from comparison.places import hosts_file  # noqa: E402

STAT = ("4242 (python3.11) S 1 4242 4242 0 -1 4194560 9000 0 0 0 "
        "31 7 0 0 20 0 5 0 1234 300000000 12000 18446744073709551615 1 1 0 0 0 0 0 16781312 16386 0 0 0 17 1 0 0")


# -- what commands record --------------------------------------------------------------------


def test_start_time_from_date():
    assert parse_start("1796083582.879132603\n") == pytest.approx(1796083582.879132603)


@pytest.mark.parametrize("text", ["", "now", "-1", "nan", "inf"])
def test_bad_start_time_is_named(text):
    with pytest.raises(FigureError, match="start time"):
        parse_start(text)


def test_proc_stat_utime_stime():
    assert parse_proc_stat(STAT) == (31, 7)
    assert cpu_seconds(STAT, 100) == pytest.approx(0.38)


def test_proc_stat_command_name_with_spaces_and_parentheses():
    odd = STAT.replace("(python3.11)", "(a) b (c))")
    assert parse_proc_stat(odd) == (31, 7)


@pytest.mark.parametrize("text", ["", "4242 python S 1", "4242 (x) S 1 2 3"])
def test_bad_proc_stat(text):
    with pytest.raises(FigureError):
        parse_proc_stat(text)


def test_status_fields_in_kib():
    status = "Name:\tpython3.11\nVmHWM:\t   51024 kB\nVmRSS:\t   50932 kB\nThreads:\t5\n"
    assert parse_status_kib(status, "VmRSS") == 50932
    assert parse_status_kib(status, "VmHWM") == 51024
    assert parse_status_kib(status, "VmSwap") is None
    with pytest.raises(FigureError):
        parse_status_kib("VmRSS:\tlots\n", "VmRSS")


def test_notify_datagram():
    assert parse_notify(b"READY=1\nSTATUS=waiting for peers 1/2") == {
        "READY": "1", "STATUS": "waiting for peers 1/2"}
    assert parse_notify(b"junk\nWATCHDOG=1\n") == {"WATCHDOG": "1"}


# -- runs and summaries ----------------------------------------------------------------------


def test_summary_median_and_range():
    s = Summary.of([0.5, 0.3, 0.4, 0.9, 0.35])
    assert (s.n, s.median, s.low, s.high) == (5, 0.4, 0.3, 0.9)
    assert s.to_json() == {"n": 5, "median": 0.4, "low": 0.3, "high": 0.9}
    with pytest.raises(ValueError):
        Summary.of([])


def test_round_latency_and_skew():
    r = Round(100.0, (100.30, 100.32, 100.31), (0.3, 0.2, 0.25), (50000, 51000, 50500))
    assert r.latency == pytest.approx(0.32)
    assert r.skew == pytest.approx(0.02)


def test_summarize_rounds_pools_agents():
    rounds = [Round(0.0, (1.0, 1.1), (0.3, 0.4), (100, 200)), Round(10.0, (10.5, 10.5), (0.2, 0.5), (300, 400))]
    out = summarize_rounds(rounds)
    assert out["latency"]["median"] == pytest.approx(0.8)
    assert out["skew"] == {"n": 2, "median": pytest.approx(0.05), "low": 0.0, "high": pytest.approx(0.1)}
    assert out["agent_cpu"]["n"] == 4 and out["agent_cpu"]["high"] == 0.5
    assert out["agent_rss_kib"]["median"] == 250
    assert "agent_cpu_ready" not in out
    assert len(out["runs"]) == 2


def test_tools_alternate_run_by_run():
    assert alternate(["a", "b"], 3) == [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
    assert alternate(["a"], 2) == [(0, "a"), (1, "a")]


def test_ratio_needs_both_figures():
    assert ratio(4.0, 0.5) == 8.0
    assert ratio(None, 0.5) is None
    assert ratio(1.0, 0.0) is None


# -- ratios, targets, baseline ---------------------------------------------------------------


def startup_row(where, mode, n, r):
    return {"where": where, "mode": mode, "n": n, "ratio": r, "tools": {}}


def result(startup=(), first_step=None, total=None, idle=None, added_share=None):
    out = {"schema": 1, "startup": {"rows": list(startup)},
           "trainer": {"ratios": {"first_step": first_step, "total": total}}}
    if added_share is not None:
        out["trainer"]["added"] = {"seconds": 0.1, "share": added_share}
    if idle:
        out["daemon"] = {"idle": idle}
    return out


def test_ratios_have_stable_keys():
    res = result([startup_row("netns", "warm", 8, 11.0)], first_step=1.03, total=None, added_share=0.02)
    got = {r.key: (r.value, r.better) for r in collect_ratios(res)}
    assert got == {"startup.netns.warm.n8": (11.0, "higher"), "trainer.first_step": (1.03, "lower"),
                   "trainer.added": (1.02, "lower")}


def test_targets_from_the_issue():
    res = result([startup_row("loopback", "cold", 2, 10.4), startup_row("loopback", "cold", 8, 8.0),
                  startup_row("loopback", "cold", 4, 1.0)],
                 first_step=1.06, idle={"rss_kib": 40 * 1024, "cpu_percent": 0.02})
    met = {t.label: t.met for t in collect_targets(res)}
    assert met == {
        "torchrun / rendezvous, loopback, cold, N=2": True,
        "torchrun / rendezvous, loopback, cold, N=8": False,  # 9x wanted
        "rendezvous / TF_CONFIG, start -> first step": False,  # within 5%
        "idle daemon RSS": True,
        "idle daemon CPU": True,
    }


def test_baseline_flags_a_ratio_more_than_20_percent_worse():
    old = result([startup_row("netns", "cold", 2, 10.0), startup_row("netns", "cold", 8, 10.0)],
                 first_step=1.00, total=1.00, added_share=0.02)
    new = result([startup_row("netns", "cold", 2, 8.4), startup_row("netns", "cold", 8, 8.2)],
                 first_step=1.25, total=1.19, added_share=0.25)
    changes = {c.key: c for c in compare_with_baseline(new, old)}
    assert not changes["startup.netns.cold.n2"].flagged  # 10 -> 8.4: worse by 1.19
    assert changes["startup.netns.cold.n8"].flagged  # 10 -> 8.2: worse by 1.22
    assert changes["startup.netns.cold.n8"].worse_by == pytest.approx(10 / 8.2)
    assert changes["trainer.first_step"].flagged  # lower is better: 1.00 -> 1.25
    assert not changes["trainer.total"].flagged
    assert changes["trainer.added"].flagged  # 1.02 -> 1.25: worse by 1.23


def test_baseline_better_is_never_flagged_and_missing_ratios_are_listed():
    old = result([startup_row("netns", "cold", 2, 10.0), startup_row("loopback", "warm", 4, 5.0)])
    new = result([startup_row("netns", "cold", 2, 30.0), startup_row("netns", "cold", 16, 9.0)])
    changes = {c.key: c for c in compare_with_baseline(new, old)}
    assert not changes["startup.netns.cold.n2"].flagged
    assert changes["startup.netns.cold.n2"].worse_by == pytest.approx(1 / 3)
    assert changes["startup.loopback.warm.n4"].new is None and not changes["startup.loopback.warm.n4"].flagged
    assert changes["startup.netns.cold.n16"].old is None and not changes["startup.netns.cold.n16"].flagged


def test_baseline_tolerance_is_a_factor():
    old, new = result(first_step=1.0), result(first_step=1.1)
    assert not compare_with_baseline(new, old, 0.2)[0].flagged
    assert compare_with_baseline(new, old, 0.05)[0].flagged


# -- options ---------------------------------------------------------------------------------


def test_every_part_has_its_measurement():
    assert all(callable(getattr(compare.measure, name)) for name in compare.PARTS)


def test_sizes_and_choices():
    assert parse_sizes("2, 4,8,4", "--sizes") == [2, 4, 8]
    for bad in ("", "2,,4", "1", "x", "2.5", "300", "٣"):
        with pytest.raises(ValueError, match="--sizes"):
            parse_sizes(bad, "--sizes")
    assert parse_choices("warm,cold", "--modes", ("cold", "warm")) == ["cold", "warm"]
    with pytest.raises(ValueError, match="--modes"):
        parse_choices("hot", "--modes", ("cold", "warm"))


def resolve(*argv):
    return compare.resolve(compare.build_parser().parse_args(list(argv)))


def test_quick_shrinks_the_defaults_and_explicit_options_win():
    full = resolve()
    assert (full.sizes, full.runs, full.idle_seconds, full.cost_sizes) == ([2, 4, 8], 5, 60.0,
                                                                            [2, 4, 8, 16, 32, 64])
    quick = resolve("--quick")
    assert (quick.sizes, quick.runs, quick.idle_seconds, quick.trainer_runs) == ([2], 2, 5.0, 1)
    assert resolve("--quick", "--runs", "7", "--idle-seconds", "1.5").runs == 7
    assert resolve("--trainer-args", "--epochs 2 --threads 1").trainer_args == ["--epochs", "2", "--threads", "1"]


@pytest.mark.parametrize("argv", [["--runs", "0"], ["--idle-seconds", "0"], ["--parts", "speed"],
                                  ["--hosts", "lan"], ["--tolerance", "0"], ["--sizes", "1"]])
def test_bad_options(argv):
    with pytest.raises(ValueError):
        resolve(*argv)


def test_bad_option_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        compare.main(["compare.py", "--runs", "0"])
    assert exc.value.code == 2
    assert "--runs must be at least 1" in capsys.readouterr().err


def test_an_output_that_cannot_be_written_fails_before_measuring(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(compare, "install", lambda workdir: pytest.fail("measured anyway"))
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as exc:
        compare.main(["compare.py", "--output", str(tmp_path / "file" / "report")])
    assert exc.value.code == 2
    assert f"cannot write the report to {tmp_path / 'file'}" in capsys.readouterr().err


def test_figures_are_printed_when_the_report_cannot_be_written(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"

    def measure_then_lose_the_directory(opts, workdir, programs, result):
        result.update({k: v for k, v in full_result().items() if k in opts.parts})
        out.rmdir()
        out.write_text("")  # now a file: nothing can be written under it

    monkeypatch.setattr(compare, "install", lambda workdir: None)
    monkeypatch.setattr(compare, "measure_all", measure_then_lose_the_directory)
    code = compare.main(["compare.py", "--parts", "startup", "--output", str(out / "report")])
    captured = capsys.readouterr()
    assert code == compare.EXIT_FAILED
    assert "### rendezvous vs torchrun" in captured.out
    assert json.loads(captured.out[captured.out.index("\n{") + 1:])["startup"] == full_result()["startup"]
    assert f"cannot write {out / 'report'}.md and .json" in captured.err


def test_a_part_that_fails_is_reported_and_the_others_are_measured(tmp_path, capsys, monkeypatch):
    def startup_fails(opts, workdir, programs):
        raise compare.RoundError("a0 exited 1:\nrendezvous: error: something broke")

    monkeypatch.setattr(compare, "install", lambda workdir: None)
    monkeypatch.setattr(compare.measure, "startup", startup_fails)
    monkeypatch.setattr(compare.measure, "daemon", lambda opts, workdir, programs: full_result()["daemon"])
    code = compare.main(["compare.py", "--parts", "startup,daemon", "--output", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert code == compare.EXIT_FAILED
    assert "a measurement of the startup part failed: a0 exited 1" in captured.err
    report = (tmp_path / "r.md").read_text()
    assert "### rendezvous vs torchrun\n\n**The measurement failed**" in report
    assert "rendezvous: error: something broke" in report
    assert "### What the daemon costs" in report and "| idle daemon RSS |" in report
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["startup"]["failed"].startswith("a0 exited 1") and saved["daemon"] == full_result()["daemon"]
    assert compare.main(["compare.py", "--render", str(tmp_path / "r.json")]) == 0


def test_render_and_baseline_from_files(tmp_path, capsys):
    old, new = full_result(), full_result()
    old["startup"]["rows"][0]["ratio"] = 10.0
    new["startup"]["rows"][0]["ratio"] = 7.0
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    code = compare.main(["compare.py", "--render", str(tmp_path / "new.json"),
                         "--baseline", str(tmp_path / "old.json")])
    out = capsys.readouterr().out
    assert code == compare.EXIT_WORSE
    assert "**worse**" in out and "1.43" in out
    assert compare.main(["compare.py", "--render", str(tmp_path / "old.json"),
                         "--baseline", str(tmp_path / "old.json")]) == 0


def test_a_file_that_is_not_a_result(tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a result"):
        compare.load_result(str(tmp_path / "x.json"))
    with pytest.raises(ValueError, match="cannot read"):
        compare.load_result(str(tmp_path / "missing.json"))
    broken = full_result()
    del broken["startup"]["rows"][0]["where"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(ValueError, match="broken.json is not a complete result of bench/compare.py: KeyError: 'where'"):
        compare.load_result(str(tmp_path / "broken.json"))


# -- the commands agents run -----------------------------------------------------------------


def test_every_agent_runs_a_fork_of_date(tmp_path):
    argv = record_command(tmp_path / "a0")
    assert argv[:2] == ["/bin/sh", "-c"] and argv[2].startswith("date +%s.%N")
    assert argv[3] == str(tmp_path / "a0")
    assert "sleep 3" in record_command(tmp_path / "a0", 3)[2]


def test_the_trainer_is_started_through_a_shell_that_records_the_moment_and_execs_it(tmp_path):
    import subprocess
    import time

    before = time.time()
    out = subprocess.run(["/bin/sh", "-c", TRAINER_STARTED, str(tmp_path / "w0.start"),
                          "/bin/sh", "-c", 'echo "$0 $1"', "one", "two"], capture_output=True, text=True)
    assert (out.returncode, out.stdout) == (0, "one two\n")  # the arguments reach the command as given
    assert before <= parse_start((tmp_path / "w0.start").read_text()) <= time.time()
    missing = subprocess.run(["/bin/sh", "-c", TRAINER_STARTED, str(tmp_path / "no" / "w0.start"), "true"])
    assert missing.returncode != 0  # a start that cannot be recorded runs nothing


def test_agent_command_lines():
    rdv = rendezvous_argv("/venv/bin/rendezvous", 4, "cmp-1", "127.0.0.3", ["/bin/sh", "-c", "x"], 60)
    assert rdv[:2] == ["/venv/bin/rendezvous", "join"]
    assert rdv[rdv.index("--expect") + 1] == "4" and rdv[rdv.index("--address") + 1] == "127.0.0.3"
    assert rdv[rdv.index("--") + 1:] == ["/bin/sh", "-c", "x"]
    assert "--address" not in rendezvous_argv("rendezvous", 2, "j", None, ["true"])
    tr = torchrun_argv("/venv/bin/torchrun", 4, "10.213.0.1:29400", "cmp-1", True, ["/bin/sh", "-c", "x"])
    assert tr[tr.index("--rdzv-backend") + 1] == "c10d" and tr[tr.index("--nnodes") + 1] == "4"
    assert "is_host=1" in tr and tr[tr.index("--no-python") + 1:] == ["/bin/sh", "-c", "x"]
    assert settled_marker("rendezvous", 4) == " 3/4 peers seen"


def test_namespace_hosts_file():
    text = hosts_file(["10.213.0.1", "10.213.0.2"], 1, "vm")
    assert text.splitlines() == ["127.0.0.1 localhost", "10.213.0.1 h0", "10.213.0.2 h1 vm"]


def test_cpuinfo_lines():
    assert first_line_value("processor\t: 0\nmodel name\t: Xeon: fast\n", "model name") == "Xeon: fast"
    assert first_line_value("", "model name") is None


# -- the report ------------------------------------------------------------------------------


def full_result():
    s = {"n": 5, "median": 0.36, "low": 0.30, "high": 0.41}
    t = {"n": 5, "median": 3.78, "low": 3.5, "high": 4.0}
    skew = {"n": 5, "median": 0.002, "low": 0.0, "high": 0.004}
    tools = {"rendezvous": {"latency": s, "skew": skew, "agent_cpu": {**s, "median": 0.3},
                            "agent_rss_kib": {**s, "median": 51200}},
             "torchrun": {"latency": t, "skew": skew}}
    return {
        "schema": 1, "date": "2026-12-01 00:00 UTC", "command": ".venv/bin/python bench/compare.py",
        "machine": {"cores": 2, "cpu": "Xeon", "memory_gib": 23.5, "kernel": "6.18"},
        "versions": {"python": "3.11.7", "torch": None}, "load_average": {"before": [1.0], "before_part": {"trainer": [3.0]}, "after": [2.0]},
        "startup": {"tools": ["rendezvous", "torchrun"], "runs": 5, "settle": 1.0,
                    "skipped": [{"what": "netns", "reason": "needs root"}],
                    "rows": [{"where": "loopback", "mode": "cold", "n": 2, "tools": tools, "ratio": 10.5,
                              "ratio_runs": {"n": 5, "median": 10.0, "low": 8.04, "high": 12.96}}]},
        "trainer": {"args": ["python", "-m", "trainer"], "runs": 5,
                    "tools": {"tf_config": {"first_step": t, "total": t}, "rendezvous": {"first_step": t, "total": t}},
                    "ratios": {"first_step": 1.0, "total": 1.0}},
        "daemon": {"where": "netns", "start_to_ready": s,
                   "idle": {"seconds": 60, "after_ready": 3, "cpu_seconds": 0.03, "cpu_percent": 0.05,
                            "rss_kib": 50000},
                   "job": {"rss_kib": [50000, 50100], "hwm_kib": [50200, 50300], "read_after": 1.5},
                   "release": [{"n": 64, "runs": [{}, {}], "agent_cpu": s, "agent_cpu_ready": s, "latency": t}]},
        "failures": {"available": True, "nodes": 3, "liveness_timeout": 5.0, "settle": 1.0, "rows": [
            {"fault": "command", "stopped": s, "running": s},
            {"fault": "frozen", "stopped": s, "running": None},
        ]},
    }


def test_report_has_every_part():
    text = markdown.render(full_result())
    assert "2 cores (Xeon), 23.5 GiB, Linux 6.18" in text
    assert "torch not installed" in text
    assert "`.venv/bin/python bench/compare.py`" in text
    assert "| loopback | cold | 2 | 0.36 s (0.30-0.41) | 3.78 s (3.50-4.00) | 10.5x (8.0-13.0) |" in text
    assert "1.0 at the start, before trainer 3.0, 2.0 at the end" in text
    assert "*netns skipped: needs root.*" in text
    assert "| rendezvous / TF_CONFIG | 1.000x | 1.000x |" in text
    assert "0.03 s = 0.050%" in text and "48.8 MiB" in text
    assert "| 64 | 2 |" in text
    assert "| `kill -9` of one command | 0.36 s (0.30-0.41) | 0.36 s (0.30-0.41) |" in text
    assert "| SIGSTOP of a member's daemon, for good | 0.36 s (0.30-0.41) | waits for it |" in text
    assert "| idle daemon RSS | 48.8 MiB | under 42.9 MiB | **no** |" in text


def test_report_tables_are_well_formed():
    for block in markdown.render(full_result()).split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        if lines:
            widths = {line.count("|") for line in lines}
            assert len(widths) == 1, block


def test_report_of_a_run_without_torch():
    res = full_result()
    res["startup"]["tools"] = ["rendezvous"]
    res["startup"]["rows"][0]["tools"].pop("torchrun")
    res["startup"]["rows"][0].pop("ratio")
    res["startup"]["rows"][0].pop("ratio_runs")
    text = markdown.render(res)
    assert "torchrun c10d" not in text and "torchrun / rendezvous" not in text


def test_a_fault_run_that_times_out_says_what_it_waited_for_and_shows_the_logs(tmp_path):
    import restart_bench

    (tmp_path / "rdvt-1-abc-h2.log").write_text("line 1\nround 1 of job 'j' aborted: something\n")
    with pytest.raises(TimeoutError) as exc:
        restart_bench.wait_for(lambda: False, "3 commands of round 2 starting after the fault (link-down)",
                               tmp_path, timeout=0.05)
    message = str(exc.value)
    assert message.startswith("3 commands of round 2 starting after the fault (link-down) did not happen within 0.05 s")
    assert "--- rdvt-1-abc-h2:\nline 1\nround 1 of job 'j' aborted: something" in message


def test_the_trainer_ratio_shows_the_range_of_its_pairs_of_runs():
    result = full_result()
    tools = result["trainer"]["tools"]
    tools["tf_config"]["runs"] = [{"first_step": 8.0, "total": 10.0}, {"first_step": 5.0, "total": 10.0}]
    tools["rendezvous"]["runs"] = [{"first_step": 6.4, "total": 11.0}, {"first_step": 6.0, "total": 11.5}]
    report = markdown.render(result)
    assert "| rendezvous / TF_CONFIG | 1.000x (0.80-1.20) | 1.000x (1.10-1.15) |" in report
    del tools["tf_config"]["runs"], tools["rendezvous"]["runs"]
    assert "| rendezvous / TF_CONFIG | 1.000x | 1.000x |" in markdown.render(result)


def trainer_runs():
    return {
        "tf_config": [{"started": 0.005, "first_step": 6.0, "total": 9.0},
                      {"started": 0.007, "first_step": 7.0, "total": 10.0},
                      {"started": 0.006, "first_step": 8.0, "total": 11.0}],
        "rendezvous": [{"started": 0.16, "first_step": 7.5, "total": 10.0},
                       {"started": 0.21, "first_step": 6.2, "total": 10.4},
                       {"started": 0.18, "first_step": 7.1, "total": 10.2}],
    }


def test_the_trainer_part_tells_what_rendezvous_adds_before_the_trainer_starts():
    t = summarize_trainer(trainer_runs())
    ours, theirs = t["tools"]["rendezvous"], t["tools"]["tf_config"]
    assert ours["started"] == {"n": 3, "median": 0.18, "low": 0.16, "high": 0.21}
    assert ours["trainer"]["median"] == pytest.approx(6.92)  # TensorFlow's own part: first step - started
    assert [r["trainer"] for r in theirs["runs"]] == pytest.approx([5.995, 6.993, 7.994])
    assert t["ratios"]["first_step"] == pytest.approx(7.1 / 7.0)
    assert t["ratios"]["trainer"] == pytest.approx(6.92 / 6.993)
    assert t["ratios"]["total"] == pytest.approx(10.2 / 10.0)
    assert t["added"]["seconds"] == pytest.approx(0.174)
    assert t["added"]["share"] == pytest.approx(0.174 / 7.0)


def test_the_report_shows_the_trainer_start_and_the_target_from_it():
    result = full_result()
    result["trainer"] = {"args": ["python", "-m", "trainer"], "runs": 3, "warm_up": 1, **summarize_trainer(trainer_runs())}
    text = markdown.render(result)
    assert "Runs: 3 of each, alternating, after 1 unmeasured each way;" in text
    assert ("| started with | launch -> trainer started | trainer started -> first step | launch -> first step "
            "| total |") in text
    assert "the last worker's trainer started; first step: last launch" in text
    assert "| rendezvous join | 0.180 s (0.160-0.210) | 6.92 s (5.99-7.34) | 7.10 s (6.20-7.50) |" in text
    assert "| rendezvous / TF_CONFIG | - | 0.990x (0.86-1.22) | 1.014x (0.89-1.25) | 1.020x (0.93-1.11) |" in text
    assert "rendezvous starts the trainer 0.174 s later than a hand-written TF_CONFIG does" in text
    assert ": 2.5% of the hand-written first step" in text
    assert "| the same, from the time added before the trainer starts | 1.02x | under 1.05x | yes |" in text
    old = markdown.render(full_result())  # a result from before the trainer's start was recorded renders as it did
    assert "launch -> trainer started" not in old
    assert "unmeasured" not in old and "`--result-file`); total" in old
