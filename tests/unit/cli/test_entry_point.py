"""The `rendezvous` command's entry point (rendezvous.__main__): what its process does before
the command line is parsed."""

from __future__ import annotations

import json
import subprocess
import sys

# Runs the entry point with the arguments given, noting the cyclic collector's runs: the
# number of frozen objects at each (0: before the freeze, so while importing).
PROBE = """
import gc, json, sys
runs = []
gc.callbacks.append(lambda phase, info: phase == "start" and runs.append(gc.get_freeze_count()))
sys.argv = ["rendezvous", *json.loads(sys.argv[1])]
from rendezvous.__main__ import main
runs.clear()
try:
    code = main()
except SystemExit as exit:
    code = exit.code
loaded = [name for name in ("google.protobuf.internal.python_message", "google.protobuf.text_format", "ifaddr",
                             "platform") if type(sys.modules.get(name)).__name__ == "module"]
print(json.dumps({"code": code, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "runs_before_freeze": runs.count(0), "node": "rendezvous.daemon.node" in sys.modules,
                  "loaded": loaded}))
"""


def _probe(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True,
                          timeout=60)
    return json.loads(done.stdout.splitlines()[-1])


def test_join_imports_the_daemon_with_the_collector_off_then_freezes_what_it_imported():
    # --expect 0 is refused once the options are read: the daemon's modules are imported
    # by then, and nothing touches the network.
    seen = _probe("join", "--expect", "0", "--", "true")
    assert seen["code"] == 2
    assert seen["node"]
    assert seen["runs_before_freeze"] == 0
    assert seen["frozen"] > 10_000  # modules, classes and functions: about 26,000 on 3.11
    assert seen["enabled"]


def test_a_job_runs_without_the_modules_the_daemon_defers(tmp_path):
    """protobuf's pure-Python message layer and ifaddr (rendezvous.cli.deferred) are never loaded
    by a daemon that forms a job on IPv4 and runs its command."""
    marker = tmp_path / "ran"
    seen = _probe("join", "--expect", "1", "--address", "127.0.0.2", "--job", f"deferred-{tmp_path.name}",
                  "--", "touch", str(marker))
    assert seen["code"] == 0
    assert marker.exists()
    assert seen["loaded"] == []


def test_help_and_the_other_subcommands_do_not_import_the_daemon():
    for args in (["join", "--help"], ["status", "--help"], ["--help"]):
        seen = _probe(*args)
        assert seen["code"] == 0, args
        assert not seen["node"], args
        assert seen["enabled"], args


def test_the_command_line_is_split_before_cli_as_cli_splits_it():
    from rendezvous.cli.main import split_command
    from rendezvous.cli.startup import split

    for argv in ([], ["join"], ["join", "--", "a", "--", "b"], ["--", "x"], ["status", "--job", "j", "--"]):
        assert split(argv) == split_command(argv), argv


def test_the_first_round_runs_in_the_gate_forked_as_the_command_started(tmp_path):
    """The gate forked before the imports is handed to the first round's launcher, which
    starts the command in it rather than spawning a gate of its own."""
    marker = tmp_path / "ran"
    done = subprocess.run(
        [sys.executable, "-m", "rendezvous", "join", "-v", "--expect", "1", "--address", "127.0.0.1",
         "--job", f"spare-{tmp_path.name}", "--", "touch", str(marker)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert marker.exists()
    assert "the command's gate: the spare forked at this process's start" in done.stderr, done.stderr
