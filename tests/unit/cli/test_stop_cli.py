"""`rendezvous stop` and the options `status --job` and `peers` now share with `join`: from
the one option table, checked alike, and the exit statuses written in the help."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest


from rendezvous.cli.main import build_parser, main
from rendezvous.config.checks import discovery_problem
from rendezvous.config.options import BY_NAME, SUBCOMMAND_OPTIONS
from rendezvous.errors import JobStopped, RequestRefused


@pytest.fixture(autouse=True)
def own_logging():
    """`main` sets up the root logger on this test's stderr (captured): put it back after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def help_of(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rendezvous", *args, "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_stop_status_is_documented_in_joins_help_and_stops():
    assert f"{JobStopped.exit_code}    `rendezvous stop` ended the job" in help_of("join")
    text = help_of("stop")
    assert f"exits with {JobStopped.exit_code}" in text and f"{RequestRefused.exit_code}    the job refused" in text
    for flag in ("--job", "--peer", "--discovery", "--token-file", "--stop-grace", "--timeout", "--reason"):
        assert flag in text


def test_status_and_peers_take_seeds_discovery_and_a_token_from_the_same_table():
    """--discovery's check is join's but for slurm and auto, which mean something inside a
    Slurm job step only (config.options)."""
    for name in ("peers", "discovery", "token_file"):
        option = next(o for o in SUBCOMMAND_OPTIONS["status"] if o.name == name)
        check = discovery_problem if name == "discovery" else BY_NAME[name].check
        assert (option.check, option.kind, option.flag) == (check, BY_NAME[name].kind, BY_NAME[name].flag)
    assert "--discovery" in help_of("peers")
    for name in ("stop_grace", "timeout", "peers", "discovery", "token_file"):
        check = discovery_problem if name == "discovery" else BY_NAME[name].check
        assert any(o.name == name and o.check is check for o in SUBCOMMAND_OPTIONS["stop"])


def test_stop_needs_a_job(capsys):
    assert main(["stop"]) == 2
    assert "stop needs --job NAME" in capsys.readouterr().err


@pytest.mark.parametrize("args, says", [
    (["--job", "bad name!"], "--job must be"),
    (["--job", "j", "--discovery", "carrier-pigeon"], "--discovery"),
    (["--job", "j", "--reason", "two\nlines"], "--reason must be one line"),
    (["--job", "j", "--stop-grace", "-1"], "--stop-grace"),
    (["--job", "j", "--peer", "host:99999"], "--peer"),
    (["--job", "j", "--token-file", "/nonexistent/token"], "--token-file /nonexistent/token"),
])
def test_bad_values_name_the_option(args, says, capsys):
    code = main(["stop", *args])
    assert code == 2, capsys.readouterr()
    assert says in capsys.readouterr().err


def test_a_stop_that_finds_no_node_ends_within_its_timeout_with_7():
    done = subprocess.run(
        [sys.executable, "-m", "rendezvous", "stop", "--job", "nobody", "--address", "127.0.0.1",
         "--peer", "127.0.0.1:9", "--discovery", "unicast", "--timeout", "1"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 7, done.stderr
    assert "no node of job 'nobody' answered through 127.0.0.1:9 within" in done.stderr


def test_the_parser_knows_stop():
    args = build_parser().parse_args(["stop", "--job", "j", "--reason", "r", "--peer", "10.0.0.1"])
    assert (args.job, args.reason, args.peers) == ("j", "r", ["10.0.0.1"])
