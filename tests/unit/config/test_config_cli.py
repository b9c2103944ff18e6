"""Tests of rendezvous.config.options (JoinConfig validation) and rendezvous.cli.main (parsing, exit codes).

Bad options are exercised through `python -m rendezvous` subprocesses: they must exit with
status 2 before any network activity, naming the bad value.
"""

from __future__ import annotations

import math
import os
import secrets
import subprocess
import sys

import pytest
from peers import run_join

from rendezvous import __version__
from rendezvous.cli.main import build_parser, split_command
from rendezvous.config.sources import build_settings, from_cli, resolve_command
from rendezvous.config import DEFAULT_JOB, JoinConfig, Timings, default_trainer_command
from rendezvous.errors import (
    AddressError,
    CommandNotExecutable,
    ConfigError,
    CoordinatorError,
    LaunchError,
    MembershipError,
    RendezvousError,
    RendezvousTimeout,
)
from rendezvous.core.size import Size

TRAINER = (sys.executable, "-m", "trainer")


def rendezvous(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rendezvous", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


# --------------------------------------------------------------------------
# Errors and exit codes
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, code",
    [
        (ConfigError, 2),
        (RendezvousTimeout, 3),
        (MembershipError, 4),
        (AddressError, 5),
        (CoordinatorError, 6),
        (LaunchError, 127),
        (CommandNotExecutable, 126),
    ],
)
def test_error_classes_and_exit_codes(cls, code):
    assert issubclass(cls, RendezvousError)
    assert cls.exit_code == code


def test_exit_codes_are_distinct():
    classes = [ConfigError, RendezvousTimeout, MembershipError, AddressError, CoordinatorError, LaunchError]
    assert len({c.exit_code for c in classes}) == len(classes)


@pytest.mark.parametrize(
    "make, code, needle",
    [
        (lambda d: d / "missing", 127, "command not found: "),
        (lambda d: (d / "train.py").write_text("print('hi')") and d / "train.py", 126, "command is not executable: "),
        (lambda d: d, 126, "command is a directory: "),
    ],
    ids=["missing", "not-executable", "directory"],
)
def test_a_command_that_cannot_run_exits_as_a_shell_would(tmp_path, make, code, needle):
    """127 when the command is not there, 126 when it is but cannot run (what --help says),
    before any rendezvous: one line on stderr, no traceback."""
    command = str(make(tmp_path))
    result = rendezvous("join", "--expect", "2", "--address", "127.0.0.1", "--timeout", "20", "--", command)
    assert result.returncode == code, result
    assert f"rendezvous: error: {needle}{command!r}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_sync_dir_that_cannot_hold_a_copy_exits_2_before_any_rendezvous(tmp_path):
    """A regular file given as --sync-dir: one line naming it, no traceback, and no waiting
    for the peer (that would end in --timeout's 3)."""
    path = tmp_path / "checkpoints"
    path.write_text("not a directory")
    result = rendezvous("join", "--expect", "2", "--address", "127.0.0.1", "--timeout", "20",
                        "--sync-dir", str(path), "--", "true")
    assert result.returncode == 2, result
    assert result.stderr.strip().endswith(f"rendezvous: error: --sync-dir {path}: not a directory")
    assert "Traceback" not in result.stderr and "peers seen" not in result.stderr


# --------------------------------------------------------------------------
# JoinConfig
# --------------------------------------------------------------------------


def test_defaults():
    c = JoinConfig(expect=2)
    assert c.job == DEFAULT_JOB == "default"
    assert c.command == default_trainer_command() == TRAINER
    assert c.address is None and c.interface is None
    assert (c.port, c.tf_port) == (None, 0)  # port: 29630, or a free one if taken
    assert c.peers == () and c.discovery is None
    assert c.timeout is None
    assert (c.stop_grace, c.abort_grace) == (10.0, 3.0)
    assert c.timings == Timings()


def test_a_fully_specified_valid_config():
    c = JoinConfig(
        expect=4096,
        job="a" * 63,
        command=("python", "train.py"),
        address="2001:db8::1",
        interface="eth0",
        port=65535,
        tf_port=1,
        timeout=0.001,
        stop_grace=0.0,
        timings=Timings(retry_interval=0.01),
    )
    assert c.expect == Size(4096, 4096) and c.address == "2001:db8::1"


@pytest.mark.parametrize(
    "kwargs, needles",
    [
        ({"expect": 0}, ["--expect", "0"]),
        ({"expect": -1}, ["--expect", "-1"]),
        ({"expect": 4097}, ["--expect", "4097"]),
        ({"expect": 2.0}, ["--expect", "2.0"]),
        ({"expect": "2:"}, ["--expect", "'2:'"]),
        ({"expect": "3:2"}, ["--expect", "'3:2'"]),
        ({"job": ""}, ["--job", "''"]),
        ({"job": "bad job"}, ["--job", "'bad job'"]),
        ({"job": "-x"}, ["--job", "'-x'"]),
        ({"job": "a" * 64}, ["--job", "a" * 64]),
        ({"command": ()}, ["command", "empty"]),
        ({"address": "example.com"}, ["--address", "'example.com'"]),
        ({"address": "10.0.0.256"}, ["--address", "'10.0.0.256'"]),
        ({"address": ""}, ["--address", "''"]),
        ({"port": -1}, ["--port", "-1"]),
        ({"port": 65536}, ["--port", "65536"]),
        ({"tf_port": 70000}, ["--tf-port", "70000"]),
        ({"tf_port": -5}, ["--tf-port", "-5"]),
        ({"timeout": 0}, ["--timeout", "0"]),
        ({"timeout": -1.5}, ["--timeout", "-1.5"]),
        ({"timeout": math.inf}, ["--timeout", "inf"]),
        ({"timeout": math.nan}, ["--timeout", "nan"]),
        ({"stop_grace": -0.5}, ["--stop-grace", "-0.5"]),
        ({"stop_grace": math.inf}, ["--stop-grace", "inf"]),
        ({"stop_grace": math.nan}, ["--stop-grace", "nan"]),
        ({"abort_grace": -1}, ["--abort-grace", "-1"]),
        ({"abort_grace": math.inf}, ["--abort-grace", "inf"]),
        ({"timings": {"keepalive": 1}}, ["--timings", "{'keepalive': 1}"]),
    ],
)
def test_invalid_values_raise_config_error_naming_option_and_value(kwargs, needles):
    kwargs = {"expect": 2, **kwargs}
    with pytest.raises(ConfigError) as info:
        JoinConfig(**kwargs)
    for needle in needles:
        assert needle in str(info.value)


def test_job_with_a_trailing_newline_is_a_config_error():
    # --job is documented as letters, digits, '.', '_' or '-' only.
    with pytest.raises(ConfigError):
        JoinConfig(expect=2, job="train\n")


# --------------------------------------------------------------------------
# split_command / resolve_command
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, options, command",
    [
        ([], [], []),
        (["join", "--expect", "2"], ["join", "--expect", "2"], []),
        (["join", "--expect", "2", "--"], ["join", "--expect", "2"], []),
        (["join", "--expect", "2", "--", "python", "t.py"], ["join", "--expect", "2"], ["python", "t.py"]),
        (["--", "x"], [], ["x"]),
        # only the first '--' splits: later ones belong to the command
        (["join", "--", "cmd", "--", "--expect", "9"], ["join"], ["cmd", "--", "--expect", "9"]),
        (["join", "--expect", "2", "--", "--epochs", "5"], ["join", "--expect", "2"], ["--epochs", "5"]),
    ],
)
def test_split_command_at_the_first_double_dash(argv, options, command):
    assert split_command(argv) == (options, command)


def test_split_command_accepts_tuples_and_does_not_mutate():
    argv = ["join", "--", "a"]
    assert split_command(tuple(argv)) == (["join"], ["a"])
    assert argv == ["join", "--", "a"]


def test_resolve_empty_command_is_the_bundled_trainer():
    assert resolve_command([]) == TRAINER
    assert resolve_command(()) == TRAINER


@pytest.mark.parametrize("options", [["--epochs", "5"], ["-e", "5"], ["-"], ["--dataset=digits", "train.py"]])
def test_resolve_leading_dash_passes_options_to_the_trainer(options):
    assert resolve_command(options) == (*TRAINER, *options)


@pytest.mark.parametrize("command", [["python", "train.py", "--epochs", "5"], ["./run.sh"], ["env", "-i", "x"]])
def test_resolve_a_real_command_is_kept_as_is(command):
    assert resolve_command(command) == tuple(command)


# --------------------------------------------------------------------------
# build_parser / the config of the command line alone (in process)
# --------------------------------------------------------------------------


def parse(*args: str):
    return build_parser().parse_args(list(args))


def config_from_args(args, command):
    return build_settings(from_cli(vars(args), command)).join


def test_parser_defaults_mean_not_given():
    # None = not given on the command line: the environment or the config file may set it.
    args = parse("join", "--expect", "3")
    assert args.subcommand == "join"
    assert args.expect == Size(3, 3)
    for name in ("job", "config", "address", "interface", "port", "tf_port", "timeout", "stop_grace", "verbose", "quiet"):
        assert getattr(args, name) is None, name
    c = config_from_args(args, [])
    assert c.job == DEFAULT_JOB
    assert (c.port, c.tf_port) == (None, 0)  # port: 29630, or a free one if taken
    assert c.peers == () and c.discovery is None
    assert c.timeout is None
    assert c.stop_grace == 10.0


def test_parser_all_options():
    args = parse(
        "join", "--expect", "8", "--job", "exp-1", "--address", "10.0.0.5", "--interface", "eth1",
        "--port", "7000", "--tf-port", "9000", "--timeout", "30", "--stop-grace", "2.5", "-vv", "-q",
    )
    assert (args.expect, args.job, args.address, args.interface) == (Size(8, 8), "exp-1", "10.0.0.5", "eth1")
    assert (args.port, args.tf_port, args.timeout, args.stop_grace) == (7000, 9000, 30.0, 2.5)
    assert (args.verbose, args.quiet) == (2, True)


def test_peer_may_be_given_again_and_with_commas():
    args = parse("join", "--expect", "3", "--peer", "a", "--peer", "b:7000,[fd00::1]", "--discovery", "unicast")
    c = config_from_args(args, [])
    assert c.peers == ("a", "b:7000", "[fd00::1]") and c.discovery == "unicast"


def test_config_from_args():
    args = parse("join", "--expect", "2", "--job", "j", "--port", "7000", "--timeout", "5")
    c = config_from_args(args, ["--epochs", "1"])
    assert c == JoinConfig(
        expect=2, job="j", command=(*TRAINER, "--epochs", "1"), port=7000, timeout=5.0
    )
    assert config_from_args(args, ["python", "x.py"]).command == ("python", "x.py")
    assert config_from_args(args, []).command == TRAINER


def test_config_from_args_raises_config_error_for_bad_values():
    with pytest.raises(ConfigError, match="4097"):
        config_from_args(parse("join", "--expect", "4097"), [])


# `join` alone parses: --expect may come from the environment or a config file
# (test_missing_expect_exits_2 checks the error).
@pytest.mark.parametrize("args", [[], ["join", "--expect", "2", "--nope"]])
def test_parser_refuses_with_system_exit_2(args, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(args)
    assert info.value.code == 2


# --------------------------------------------------------------------------
# The real command line, in a subprocess
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--expect", "0"], "got '0'"),
        (["--expect", "4097"], "4097"),
        (["--expect", "-3"], "-3"),
        (["--expect", "two"], "'two'"),
        (["--expect", "2.5"], "'2.5'"),
        (["--expect", "2", "--job", "bad job"], "'bad job'"),
        (["--expect", "2", "--job", "a" * 64], "a" * 64),
        (["--expect", "2", "--job", "job/1"], "'job/1'"),
        (["--expect", "2", "--address", "example.com"], "'example.com'"),
        (["--expect", "2", "--address", "999.1.1.1"], "'999.1.1.1'"),
        (["--expect", "2", "--port", "70000"], "70000"),
        (["--expect", "2", "--port", "-1"], "-1"),
        (["--expect", "2", "--port", "http"], "'http'"),
        (["--expect", "2", "--tf-port", "65536"], "65536"),
        (["--expect", "2", "--timeout", "0"], "got 0.0"),
        (["--expect", "2", "--timeout", "-5"], "-5.0"),
        (["--expect", "2", "--timeout", "nan"], "nan"),
        (["--expect", "2", "--timeout", "inf"], "inf"),
        (["--expect", "2", "--timeout", "soon"], "'soon'"),
        (["--expect", "2", "--stop-grace", "-1"], "-1.0"),
        (["--expect", "2", "--stop-grace", "forever"], "'forever'"),
        (["--expect", "2", "--stop-grace", "inf"], "inf"),
        (["--expect", "2", "--max-restarts", "1001"], "1001"),
        (["--expect", "2", "--max-restarts", "-1"], "'-1'"),
        (["--expect", "2", "--no-restart-on", "2,300"], "got 2,300"),
        (["--expect", "2", "--no-restart-on", "2,x"], "'2,x'"),
        (["--expect", "2", "--liveness-timeout", "0"], "got 0.0"),
        (["--expect", "2", "--liveness-timeout", "0.01"], "must be at least 0.1 s (heartbeats go out every fifth of it), got 0.01"),
        (["--expect", "2", "--timings", "foo=1"], "unknown timing 'foo'"),
        (["--expect", "2", "--timings", "keepalive"], "'keepalive' is not one"),
        (["--expect", "2", "--timings", "keepalive=-1"], "keepalive to -1.0"),
    ],
)
def test_bad_option_exits_2_naming_the_value(args, needle):
    result = rendezvous("join", *args)
    assert result.returncode == 2, result
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


# Numbers are ASCII digits (seconds: plain decimals), as in RENDEZVOUS_* variables: int() and
# float() would take '1_0' as 10. On loopback with a short timeout, in case one got through.
@pytest.mark.parametrize(
    "args, needle",
    [
        (["--expect", "1_0"], "--expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got '1_0'"),
        (["--expect", "\u0663"], "--expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got '\u0663'"),
        (["--expect", "+2"], "got '+2'"),
        (["--expect", "2:+3"], "got '2:+3'"),
        (["--expect", "3:2"], "got '3:2'"),
        (["--expect", "2", "--port", "7_000"], "argument --port: not a whole number: '7_000'"),
        (["--expect", "2", "--tf-port", "0x2328"], "argument --tf-port: not a whole number: '0x2328'"),
        (["--expect", "2", "--stop-grace", "1_0"], "argument --stop-grace: not a number of seconds: '1_0'"),
        (["--expect", "2", "--stop-grace", "1e1"], "not a number of seconds: '1e1'"),
    ],
)
def test_numbers_must_be_plain_digits(args, needle):
    result = rendezvous("join", "--address", "127.0.0.1", "--timeout", "3", *args)
    assert result.returncode == 2, result
    assert needle in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, option",
    [
        (["--expect", "0"], "--expect"),
        (["--expect", "2", "--job", "bad job"], "--job"),
        (["--expect", "2", "--address", "example.com"], "--address"),
        (["--expect", "2", "--port", "70000"], "--port"),
        (["--expect", "2", "--tf-port", "65536"], "--tf-port"),
        (["--expect", "2", "--timeout", "0"], "--timeout"),
        (["--expect", "2", "--stop-grace", "-1"], "--stop-grace"),
    ],
)
def test_invalid_value_message_names_the_option(args, option):
    result = rendezvous("join", *args)
    assert result.returncode == 2
    assert "rendezvous: error:" in result.stderr
    assert option in result.stderr


def test_bad_option_before_the_command_is_still_reported():
    # the command after '--' is not parsed, even when it looks like our options
    result = rendezvous("join", "--expect", "0", "--", "python", "train.py", "--expect", "5")
    assert result.returncode == 2
    assert "got '0'" in result.stderr


def test_missing_expect_exits_2():
    result = rendezvous("join")
    assert result.returncode == 2
    assert "--expect" in result.stderr


def test_unknown_option_exits_2():
    result = rendezvous("join", "--expect", "2", "--bogus")
    assert result.returncode == 2
    assert "--bogus" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["join", "--expect", "2", "--address", "127.0.0.1", "--timeout", "3", "--bogus"],
        ["peers", "--address", "127.0.0.1", "--seconds", "0.1", "--bogus"],
        ["status", "--bogus"],
    ],
)
def test_unknown_option_shows_the_subcommands_usage(args):
    result = rendezvous(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"usage: rendezvous {args[0]} "), result.stderr
    assert f"rendezvous {args[0]}: error: unrecognized arguments: --bogus" in result.stderr


def test_a_command_after_double_dash_is_for_join_only():
    result = rendezvous("status", "--", "python", "train.py")
    assert result.returncode == 2
    assert result.stderr.startswith("usage: rendezvous status ")
    assert "status takes no command after --" in result.stderr


def test_no_subcommand_exits_2():
    result = rendezvous()
    assert result.returncode == 2


JOB_PROBLEM = "must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"


def test_peers_checks_its_seeds_like_join(tmp_path):
    for command in (["peers", "--address", "127.0.0.1"], ["join", "--expect", "2"]):
        result = look(*command, "--peer", "127.0.0.2:70000", tmp_path=tmp_path)
        assert result.returncode == 2, result
        assert result.stderr.startswith("rendezvous: error: --peer must be HOST[:PORT] (a name or address, "
                                        "and a port from 1 to 65535): "), result.stderr
        assert result.stdout == ""


def look(*args: str, tmp_path) -> subprocess.CompletedProcess[str]:
    """`rendezvous peers` (on loopback) or `status` (seeing no daemon: an empty runtime dir)."""
    return subprocess.run(
        [sys.executable, "-m", "rendezvous", *args],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path)},
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["peers", "--seconds", "-1"], "--seconds must be a positive number of seconds, got -1.0"),
        (["peers", "--seconds", "0"], "--seconds must be a positive number of seconds, got 0.0"),
        (["status", "--timeout", "-1"], "--timeout must be a positive number of seconds, got -1.0"),
        (["status", "--timeout", "0"], "--timeout must be a positive number of seconds, got 0.0"),
        (["peers", "-vvv"], "--verbose must be 0, 1 or 2, got 3"),
        (["status", "-vvv"], "--verbose must be 0, 1 or 2, got 3"),
        (["join", "--expect", "2", "--timeout", "3", "-vvv"], "--verbose must be 0, 1 or 2, got 3"),
        (["status", "--job", "bad name!"], f"--job {JOB_PROBLEM}, got 'bad name!'"),
        (["status", "--job", "bad name!", "--local"], f"--job {JOB_PROBLEM}, got 'bad name!'"),
        (["peers", "--job", ".dot-first"], f"--job {JOB_PROBLEM}, got '.dot-first'"),
        (["join", "--expect", "2", "--job", "bad name!"], f"--job {JOB_PROBLEM}, got 'bad name!'"),
        (["status", "--job", "j", "--address", "eth0"], "--address must be a numeric IP address, got 'eth0'"),
        (["peers", "--interface", ""], "--interface must be an interface name such as eth0, got ''"),
    ],
)
def test_peers_and_status_check_their_options_like_join(args, message, tmp_path):
    if args[0] != "status":
        args = [*args, "--address", "127.0.0.1"]
    result = look(*args, tmp_path=tmp_path)
    assert result.returncode == 2, result
    assert result.stderr == f"rendezvous: error: {message}\n"
    assert result.stdout == ""


@pytest.mark.parametrize("args", [["peers", "--seconds", "nan"], ["peers", "--seconds", "inf"], ["status", "--timeout", "soon"]])
def test_peers_and_status_refuse_what_is_not_seconds(args, tmp_path):
    if args[0] == "peers":
        args = [*args, "--address", "127.0.0.1"]
    result = look(*args, tmp_path=tmp_path)
    assert result.returncode == 2
    assert f"not a number of seconds: {args[2]!r}" in result.stderr


def test_peers_and_status_take_good_values(tmp_path):
    # a job nobody runs: other daemons on this machine's loopback may answer too
    job = f"nobody-{secrets.token_hex(4)}"
    result = look("peers", "--address", "127.0.0.1", "--seconds", "0.2", "--job", job, "-vv", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "within 0.2s" in result.stdout
    result = look("status", "--timeout", "0.5", "-vv", tmp_path=tmp_path)
    assert result.returncode == 7, result.stderr  # no daemon here


@pytest.mark.parametrize("subcommand", ["join", "peers", "status"])
def test_help_says_verbose_stops_at_two(subcommand):
    text = " ".join(rendezvous(subcommand, "--help").stdout.split())
    assert "-vv also zeroconf's and gRPC's (at most -vv: more is an error)" in text


def test_version():
    result = rendezvous("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"rendezvous {__version__}"
    assert __version__ == "0.2.0"


def test_top_level_help_lists_join():
    result = rendezvous("--help")
    assert result.returncode == 0
    assert "join" in result.stdout


def join_option_strings() -> set[str]:
    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    join = subparsers.choices["join"]
    return {s for action in join._actions for s in action.option_strings}


def test_join_help_mentions_every_option():
    result = rendezvous("join", "--help")
    assert result.returncode == 0
    options = join_option_strings()
    expected = {
        "-h", "--help", "--expect", "--job", "--address", "--interface", "--port", "--tf-port",
        "--timeout", "--stop-grace", "-v", "--verbose", "-q", "--quiet",
    }
    assert expected <= options
    for option in options:
        assert option in result.stdout, option


def test_join_help_documents_the_exit_codes():
    result = rendezvous("join", "--help")
    assert result.returncode == 0
    text = result.stdout
    assert "exit status" in text
    lines = text.splitlines()
    for code in (
        ConfigError.exit_code,
        RendezvousTimeout.exit_code,
        MembershipError.exit_code,
        AddressError.exit_code,
        CoordinatorError.exit_code,
        LaunchError.exit_code,
    ):
        assert any(line.strip().startswith(f"{code} ") for line in lines), code
    assert "130/143" in text
    assert "128+N" in text


def test_join_help_explains_the_command():
    text = rendezvous("join", "--help").stdout
    assert "-- COMMAND" in text
    assert "python -m trainer" in text
    assert "TF_CONFIG" in text


def test_preflight_flags_repeat_and_take_commas():
    args = parse("join", "--expect", "2", "--same-file", "a.py", "--same-file", "b.py",
                 "--allow-mismatch", "python,gpu-model", "--allow-mismatch", "same-file", "--python", "/opt/py")
    c = config_from_args(args, ["python", "a.py"])
    assert c.same_file == ("a.py", "b.py")
    assert c.allow_mismatch == ("python", "gpu-model", "same-file")
    assert c.python == "/opt/py"


def test_allow_mismatch_of_an_unknown_kind_exits_2_naming_the_kinds():
    result = rendezvous("join", "--expect", "2", "--allow-mismatch", "gpu-count")
    assert result.returncode == 2, result
    assert "--allow-mismatch must name kinds from tensorflow-patch, python, gpu-model, same-file" in result.stderr


def test_status_watch_needs_a_job(tmp_path):
    result = look("status", "--watch", tmp_path=tmp_path)
    assert result.returncode == 2 and "--watch needs --job NAME" in result.stderr


def test_status_of_a_job_nobody_runs_exits_7(tmp_path):
    result = look("status", "--job", "nobody-runs-this", "--timeout", "0.5", "--address", "127.0.0.1", tmp_path=tmp_path)
    assert result.returncode == 7 and result.stdout == ""
    assert result.stderr == "rendezvous: error: no node of job 'nobody-runs-this' answered on 127.0.0.1 within 0.5s\n"


@pytest.mark.parametrize("json_output", [False, True], ids=["table", "json"])
def test_peers_to_a_reader_that_is_gone_ends_quietly_as_sigpipe_would(tmp_path, json_output):
    """`rendezvous peers | head -0`: no traceback about the broken pipe, and 141, the status
    of a program that SIGPIPE ended (the same except block serves status)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "rendezvous", "peers", "--seconds", "0.3", "--address", "127.0.0.2",
             "--job", f"gone-{tmp_path.name}", *(["--json"] if json_output else [])],
            stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60, stdin=subprocess.DEVNULL,
            env={**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(tmp_path)})
    finally:
        os.close(writer)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 141, done.stderr


def test_a_join_whose_output_reader_is_gone_still_exits_with_its_own_code():
    """`rendezvous join ... 2>&1 | head -1`: once head has gone every write to stderr fails
    (EPIPE); the daemon goes on, and its exit status stays its own (here 3, the timeout), not
    1 from the error message it could not print."""
    reader, writer = os.pipe()
    os.close(reader)  # gone before the first line
    try:
        done = run_join("--expect", "2", "--timeout", "0.5", "--", "true", output=writer)
    finally:
        os.close(writer)
    assert done.returncode == 3
