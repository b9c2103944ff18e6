"""Options from the command line, RENDEZVOUS_* variables and the TOML config file: precedence,
and every error naming the option, variable or file key and the bad value."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from rendezvous.config import OPTIONS, JoinConfig, LogConfig
from rendezvous.errors import ConfigError
from rendezvous.config.sources import (
    DEFAULT_CONFIG_FILE,

    build_settings,
    config_file_path,
    file_key,
    from_cli,
    from_environ,
    load_settings,
    parse_config_file,
    read_config_file,
    variable_name,
)
from rendezvous.core.size import Size
from paths import REPO, SUPPORT

TRAINER = (sys.executable, "-m", "trainer")
NO_ARGS: dict = {}


def settings(cli=NO_ARGS, command=(), environ=None, config=None, file_text=None, tmp_path=None):
    """load_settings with a config file of `file_text` (if any) and no real environment."""
    environ = dict(environ or {})
    if file_text is not None:
        path = tmp_path / "rendezvous.conf"
        path.write_text(file_text)
        config = str(path)
    return load_settings(cli, command, environ, config)


# --------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------


def test_names_of_every_option():
    assert [variable_name(n) for n in ("expect", "tf_port", "log_format")] == [
        "RENDEZVOUS_EXPECT", "RENDEZVOUS_TF_PORT", "RENDEZVOUS_LOG_FORMAT",
    ]
    assert file_key("stop_grace") == "stop-grace"
    assert {o.name for o in OPTIONS} == {
        "expect", "job", "command", "address", "interface", "port", "tf_port", "timeout",
        "stop_grace", "verbose", "quiet", "log_format", "timings", "max_restarts", "no_restart_on",
        "liveness_timeout", "same_file", "allow_mismatch", "python", "settle", "metrics_port",
        "sync_dir", "sync_max_bytes", "token_file", "peers", "discovery", "allow_hosts", "abort_grace", "prewarm",
        "gpus", "data_interface", "data_address",
        "output_dir", "output_max_bytes", "output_keep_rounds",
    }


# --------------------------------------------------------------------------
# Precedence: command line > environment > file > defaults
# --------------------------------------------------------------------------

# option: (file text, environment text, command-line value, value from file, value from env)
LAYERS = {
    "expect": ('expect = "2:4"', "3", Size(1, 5), Size(2, 4), Size(3, 3)),
    "job": ('job = "from-file"', "from-env", "from-cli", "from-file", "from-env"),
    "address": ('address = "10.0.0.1"', "10.0.0.2", "10.0.0.3", "10.0.0.1", "10.0.0.2"),
    "interface": ('interface = "eth0"', "eth1", "eth2", "eth0", "eth1"),
    "port": ("port = 7000", "7001", 7002, 7000, 7001),
    "tf_port": ("tf-port = 8000", "8001", 8002, 8000, 8001),
    "metrics_port": ("metrics-port = 9464", "9465", 9466, 9464, 9465),
    "timeout": ("timeout = 600", "30.5", 7.0, 600.0, 30.5),
    "stop_grace": ("stop-grace = 20", "5", 1.0, 20.0, 5.0),
    "abort_grace": ("abort-grace = 0.5", "1.5", 2.0, 0.5, 1.5),
    "verbose": ("verbose = 1", "2", 0, 1, 2),
    "quiet": ("quiet = true", "no", True, True, False),
    "log_format": ('log-format = "json"', "plain", "auto", "json", "plain"),
    "peers": ('peers = ["a.example", "10.0.0.1:7000"]', "b.example, [fd00::1]:7001", ["c"],
              ("a.example", "10.0.0.1:7000"), ("b.example", "[fd00::1]:7001")),
    "discovery": ('discovery = "unicast"', "both", "mdns", "unicast", "both"),
    "gpus": ('gpus = "min"', "4", "none", "min", "4"),
    "data_interface": ('data-interface = "eth1"', "ib0", "eth2", "eth1", "ib0"),
    "data_address": ('data-address = "192.168.9.1"', "fd00:9::1", "192.168.9.3", "192.168.9.1", "fd00:9::1"),
}


def _value(s, name):
    return getattr(s.log if name in ("verbose", "quiet", "log_format") else s.join, name)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_each_option_file_then_environment_then_command_line(tmp_path, name):
    file_line, env_text, cli_value, from_file, from_env = LAYERS[name]
    base = "" if name == "expect" else "expect = 2\n"
    text = base + file_line + "\n"
    variable = variable_name(name)
    assert _value(settings(file_text=text, tmp_path=tmp_path), name) == from_file
    assert _value(settings(environ={variable: env_text}, file_text=text, tmp_path=tmp_path), name) == from_env
    cli = {name: cli_value}
    from_cli = tuple(cli_value) if isinstance(cli_value, list) else cli_value
    assert _value(settings(cli, environ={variable: env_text}, file_text=text, tmp_path=tmp_path), name) == from_cli


@pytest.mark.parametrize("environ, cli, problem", [
    ({"RENDEZVOUS_GPUS": "most"}, {}, "RENDEZVOUS_GPUS must be all, min, none or a number of GPUs, got 'most'"),
    ({}, {"gpus": "-2"}, "--gpus must be all, min, none or a number of GPUs, got '-2'"),
    ({"RENDEZVOUS_DATA_ADDRESS": "eth1"}, {}, "RENDEZVOUS_DATA_ADDRESS must be a numeric IP address, got 'eth1'"),
])
def test_bad_gpus_and_data_addresses_are_named_with_their_source(tmp_path, environ, cli, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        settings(cli, environ={"RENDEZVOUS_EXPECT": "2", **environ})


def test_a_gpus_number_in_the_config_file_may_be_a_number_or_text(tmp_path):
    assert settings(file_text="expect = 2\ngpus = 4\n", tmp_path=tmp_path).join.gpus == "4"
    with pytest.raises(ConfigError, match=re.escape("gpus must be all, min, none or a number of GPUs, got True")):
        settings(file_text="expect = 2\ngpus = true\n", tmp_path=tmp_path)


@pytest.mark.parametrize(
    "file_line, problem",
    [
        ('peers = ["host:0"]', "port must be from 1 to 65535"),
        ('peers = ["fd00::1:7000:x"]', "not an IPv6 address"),
        ('peers = [7]', "must be a list of HOST[:PORT]"),
        ('discovery = "dns"', "must be one of mdns, unicast, both"),
    ],
)
def test_bad_seeds_and_discovery_modes_are_named_with_their_source(tmp_path, file_line, problem):
    with pytest.raises(ConfigError, match=re.escape(problem)):
        settings(file_text="expect = 2\n" + file_line + "\n", tmp_path=tmp_path)


def test_command_file_then_environment_then_command_line(tmp_path):
    text = 'expect = 1\ncommand = ["python3", "/srv/train.py", "--epochs", "5"]\n'
    s = settings(file_text=text, tmp_path=tmp_path)
    assert s.join.command == ("python3", "/srv/train.py", "--epochs", "5")
    env = {"RENDEZVOUS_COMMAND": "python3 '/srv/my train.py' --lr=0.1"}
    assert settings(environ=env, file_text=text, tmp_path=tmp_path).join.command == (
        "python3", "/srv/my train.py", "--lr=0.1",
    )
    s = settings(command=["./run.sh", "x"], environ=env, file_text=text, tmp_path=tmp_path)
    assert s.join.command == ("./run.sh", "x")


def test_command_as_a_string_in_the_file_is_split_like_a_shell_line(tmp_path):
    s = settings(file_text='expect = 1\ncommand = "python3 train.py --name \'a b\'"\n', tmp_path=tmp_path)
    assert s.join.command == ("python3", "train.py", "--name", "a b")


@pytest.mark.parametrize(
    "where", ["file", "env", "cli"],
)
def test_a_command_of_options_goes_to_the_bundled_trainer_from_every_source(tmp_path, where):
    text = "expect = 1\n" + ('command = ["--epochs", "3"]\n' if where == "file" else "")
    env = {"RENDEZVOUS_COMMAND": "--epochs 3"} if where == "env" else {}
    command = ["--epochs", "3"] if where == "cli" else []
    s = settings(command=command, environ=env, file_text=text, tmp_path=tmp_path)
    assert s.join.command == (*TRAINER, "--epochs", "3")


def test_defaults_without_any_source(tmp_path):
    s = settings({"expect": 2})
    assert s.join == JoinConfig(expect=2)
    assert s.log == LogConfig()
    assert s.config_file is None or s.config_file == DEFAULT_CONFIG_FILE


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_metrics_port_is_off_or_a_real_port(port):
    assert JoinConfig(expect=1).metrics_port is None
    with pytest.raises(ConfigError, match=f"--metrics-port must be a port from 1 to 65535, got {port}"):
        JoinConfig(expect=1, metrics_port=port)


def test_an_empty_variable_counts_as_unset(tmp_path):
    s = settings(environ={"RENDEZVOUS_JOB": "", "RENDEZVOUS_EXPECT": "2", "RENDEZVOUS_TIMEOUT": ""})
    assert s.join.job == "default" and s.join.timeout is None


def test_other_rendezvous_variables_are_not_options():
    # set by the daemon for the command it starts; a nested `join` must not trip over them
    environ = {"RENDEZVOUS_RANK": "0", "RENDEZVOUS_WORLD_SIZE": "2", "RENDEZVOUS_NODE_ID": "x", "RENDEZVOUS_SKIP_NETNS": "1",
               "RENDEZVOUS_PROGRESS_FILE": "/run/rendezvous/x-progress-1.jsonl"}
    assert from_environ(environ) == {}


@pytest.mark.parametrize(
    "variable, text, value",
    [
        ("RENDEZVOUS_EXPECT", "3", Size(3, 3)),
        ("RENDEZVOUS_EXPECT", " 3\n", Size(3, 3)),
        ("RENDEZVOUS_EXPECT", "2:4", Size(2, 4)),
        ("RENDEZVOUS_PORT", "07000", 7000),
        ("RENDEZVOUS_TIMEOUT", "2.5", 2.5),
        ("RENDEZVOUS_TIMEOUT", ".5", 0.5),
        ("RENDEZVOUS_TIMEOUT", "10.", 10.0),
        ("RENDEZVOUS_STOP_GRACE", "0", 0.0),
    ],
)
def test_numbers_from_the_environment(variable, text, value):
    s = build_settings(from_environ({"RENDEZVOUS_EXPECT": "2", variable: text}))
    name = variable.removeprefix("RENDEZVOUS_").lower()
    assert getattr(s.join, name) == value


@pytest.mark.parametrize("text, value", [("1", True), ("TRUE", True), ("yes", True), ("on", True), ("0", False), ("false", False), ("No", False), ("off", False)])
def test_quiet_from_the_environment(text, value):
    assert settings({"expect": 1}, environ={"RENDEZVOUS_QUIET": text}).log.quiet is value


# --------------------------------------------------------------------------
# Which file
# --------------------------------------------------------------------------


def test_which_config_file():
    assert config_file_path(None, {}) == (DEFAULT_CONFIG_FILE, False)
    assert config_file_path(None, {"RENDEZVOUS_CONFIG": "/a.conf"}) == ("/a.conf", True)
    assert config_file_path("/b.conf", {"RENDEZVOUS_CONFIG": "/a.conf"}) == ("/b.conf", True)
    assert config_file_path(None, {"RENDEZVOUS_CONFIG": ""}) == (DEFAULT_CONFIG_FILE, False)


def test_rendezvous_config_names_the_file(tmp_path):
    path = tmp_path / "x.conf"
    path.write_text('expect = 5\njob = "envfile"\n')
    s = load_settings({}, (), {"RENDEZVOUS_CONFIG": str(path)})
    assert (s.join.expect, s.join.job, s.config_file) == (Size(5, 5), "envfile", str(path))


def test_a_missing_default_file_is_fine_a_missing_named_file_is_not(tmp_path):
    assert read_config_file(str(tmp_path / "absent.conf"), required=False) is None
    with pytest.raises(ConfigError, match="absent.conf: no such file"):
        read_config_file(str(tmp_path / "absent.conf"), required=True)
    with pytest.raises(ConfigError, match="gone.conf: no such file"):
        load_settings({"expect": 1}, (), {"RENDEZVOUS_CONFIG": str(tmp_path / "gone.conf")})


def test_a_directory_is_not_a_config_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_config_file(str(tmp_path), required=True)
    assert str(tmp_path) in str(info.value) and "directory" in str(info.value)


def test_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.conf"
    path.write_bytes(b'job = "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"latin1.conf: not UTF-8 text \(byte 10\)"):
        read_config_file(str(path), required=True)


# --------------------------------------------------------------------------
# File errors: every message names the file, the key and the value
# --------------------------------------------------------------------------

PATH = "/etc/rendezvous/rendezvous.conf"


def parse(text: str) -> dict:
    return parse_config_file(text, PATH)


@pytest.mark.parametrize(
    "text, needles",
    [
        ("expect = 3\nexpect = 4\n", [PATH, "not a valid TOML file", "line 2"]),
        ("expect = \n", [PATH, "not a valid TOML file", "line 1"]),
        ("[join\nexpect = 3\n", [PATH, "not a valid TOML file"]),
        ("expect: 3\n", [PATH, "not a valid TOML file"]),
    ],
)
def test_syntax_errors_name_the_file_and_line(text, needles):
    with pytest.raises(ConfigError) as info:
        parse(text)
    for needle in needles:
        assert needle in str(info.value)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("expext = 3\n", "'expext'"),
        ("[join]\nexpect = 3\n", "'join'"),
        ("retry_interval = 1\n", "'retry_interval'"),
        ("config = \"/x\"\n", "'config'"),
        ('"--expect" = 3\n', "'--expect'"),
    ],
)
def test_unknown_keys_name_the_key_and_the_file(text, needle):
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    assert message.startswith(PATH + ": unknown key " + needle)
    assert "known keys: expect, job, command" in message and "tf-port" in message


def test_one_option_under_two_spellings_is_an_error():
    with pytest.raises(ConfigError, match="'tf_port' is given twice, also as 'tf-port'"):
        parse("tf-port = 1\ntf_port = 2\n")


def test_both_spellings_are_accepted():
    assert parse("tf_port = 1\nstop_grace = 2")["tf_port"].value == 1
    assert parse("tf-port = 1\nstop-grace = 2")["stop_grace"].value == 2.0


@pytest.mark.parametrize(
    "line, shown",
    [
        ("expect = 0", "expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got 0"),
        ("expect = 4097", "expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got 4097"),
        ('expect = "3:2"', "expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got '3:2'"),
        ("expect = 2.0", "expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got 2.0"),
        ("expect = true", "expect must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got True"),
        ('job = "bad job"', "job must be 1-63 letters"),
        ("job = 7", "got 7"),
        ("command = []", "command must not be empty"),
        ('command = ["python", 3]', "command must be a list of strings, got ['python', 3]"),
        ("command = 3", "command must be a list of strings, got 3"),
        ('command = "python \'unbalanced"', "command cannot be split like a shell command line"),
        ('address = "example.com"', "address must be a numeric IP address, got 'example.com'"),
        ("address = 10", "address must be a numeric IP address, got 10"),
        ('interface = ""', "interface must be an interface name such as eth0, got ''"),
        ("interface = 0", "got 0"),
        ("port = 70000", "port must be from 0 (any free port) to 65535, got 70000"),
        ('port = "http"', "port must be from 0 (any free port) to 65535, got 'http'"),
        ("tf-port = -1", "tf-port must be from 0 (any free port) to 65535, got -1"),
        ("tf_port = 1.5", "tf_port must be from 0 (any free port) to 65535, got 1.5"),
        ("timeout = 0", "timeout must be a positive number of seconds, got 0.0"),
        ("timeout = -1.5", "timeout must be a positive number of seconds, got -1.5"),
        ("timeout = inf", "timeout must be a positive number of seconds, got inf"),
        ("timeout = nan", "timeout must be a positive number of seconds, got nan"),
        ('timeout = "forever"', "got 'forever'"),
        ("stop-grace = -1", "stop-grace must be zero or more seconds, got -1.0"),
        ("stop-grace = false", "stop-grace must be zero or more seconds, got False"),
        ("verbose = 3", "verbose must be 0, 1 or 2, got 3"),
        ("quiet = 1", "quiet must be true or false, got 1"),
        ('log-format = "xml"', "log-format must be one of auto, plain, json, got 'xml'"),
    ],
)
def test_bad_values_in_the_file_name_the_file_key_and_value(tmp_path, line, shown):
    base = "" if line.startswith("expect") else "expect = 2\n"
    path = tmp_path / "rendezvous.conf"
    path.write_text(base + line + "\n")
    with pytest.raises(ConfigError) as info:
        load_settings({}, (), {}, str(path))
    assert str(info.value).startswith(f"{path}: ")
    assert shown in str(info.value)


# --------------------------------------------------------------------------
# Environment errors: every message names the variable and the value
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable, text, shown",
    [
        ("RENDEZVOUS_EXPECT", "0", "RENDEZVOUS_EXPECT must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got '0'"),
        ("RENDEZVOUS_EXPECT", "two", "RENDEZVOUS_EXPECT must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got 'two'"),
        ("RENDEZVOUS_EXPECT", "2.5", "got '2.5'"),
        ("RENDEZVOUS_JOB", "bad job", "RENDEZVOUS_JOB must be 1-63 letters"),
        ("RENDEZVOUS_ADDRESS", "example.com", "RENDEZVOUS_ADDRESS must be a numeric IP address, got 'example.com'"),
        ("RENDEZVOUS_PORT", "http", "RENDEZVOUS_PORT must be from 0 (any free port) to 65535, got 'http'"),
        ("RENDEZVOUS_TF_PORT", "65536", "RENDEZVOUS_TF_PORT must be from 0 (any free port) to 65535, got 65536"),
        ("RENDEZVOUS_TIMEOUT", "soon", "RENDEZVOUS_TIMEOUT must be a positive number of seconds, got 'soon'"),
        ("RENDEZVOUS_TIMEOUT", "-3", "got -3.0"),
        ("RENDEZVOUS_STOP_GRACE", "inf", "RENDEZVOUS_STOP_GRACE must be zero or more seconds, got 'inf'"),
        # Only ASCII digits make a whole number, only plain decimals a number of seconds.
        ("RENDEZVOUS_EXPECT", "1_0", "RENDEZVOUS_EXPECT must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got '1_0'"),
        ("RENDEZVOUS_EXPECT", "+3", "got '+3'"),
        ("RENDEZVOUS_EXPECT", "-3", "got '-3'"),
        ("RENDEZVOUS_EXPECT", "\u0663", "got '\u0663'"),  # ARABIC-INDIC DIGIT THREE
        ("RENDEZVOUS_PORT", "7_000", "RENDEZVOUS_PORT must be from 0 (any free port) to 65535, got '7_000'"),
        ("RENDEZVOUS_TF_PORT", "0x1f90", "got '0x1f90'"),
        ("RENDEZVOUS_VERBOSE", "0_1", "RENDEZVOUS_VERBOSE must be 0, 1 or 2, got '0_1'"),
        ("RENDEZVOUS_TIMEOUT", "1_0", "RENDEZVOUS_TIMEOUT must be a positive number of seconds, got '1_0'"),
        ("RENDEZVOUS_TIMEOUT", "1e3", "got '1e3'"),
        ("RENDEZVOUS_TIMEOUT", "nan", "got 'nan'"),
        ("RENDEZVOUS_STOP_GRACE", "1_5.0", "got '1_5.0'"),
        ("RENDEZVOUS_VERBOSE", "lots", "RENDEZVOUS_VERBOSE must be 0, 1 or 2, got 'lots'"),
        ("RENDEZVOUS_QUIET", "maybe", "RENDEZVOUS_QUIET must be true or false, got 'maybe'"),
        ("RENDEZVOUS_LOG_FORMAT", "xml", "RENDEZVOUS_LOG_FORMAT must be one of auto, plain, json, got 'xml'"),
        ("RENDEZVOUS_COMMAND", "   ", "RENDEZVOUS_COMMAND must not be empty"),
        ("RENDEZVOUS_COMMAND", "python 'x", "RENDEZVOUS_COMMAND cannot be split like a shell command line"),
    ],
)
def test_bad_values_in_the_environment_name_the_variable_and_value(variable, text, shown):
    environ = {"RENDEZVOUS_EXPECT": "2", variable: text}
    with pytest.raises(ConfigError) as info:
        build_settings(from_environ(environ))
    assert shown in str(info.value)


def test_a_bad_value_is_reported_even_when_a_stronger_source_overrides_it():
    # The lower layer is not silently ignored: a typo in the file shows up at once.
    with pytest.raises(ConfigError, match="RENDEZVOUS_PORT"):
        build_settings({**from_environ({"RENDEZVOUS_PORT": "x"}), **from_cli({"expect": 1}, ())})


def test_command_line_errors_name_the_option():
    with pytest.raises(ConfigError, match=r"^--port must be from 0 \(any free port\) to 65535, got 70000$"):
        build_settings(from_cli({"expect": 1, "port": 70000}, ()))


def test_missing_expect_says_where_it_can_come_from():
    with pytest.raises(ConfigError) as info:
        build_settings({})
    message = str(info.value)
    assert "--expect" in message and "RENDEZVOUS_EXPECT" in message and "expect = N" in message


# --------------------------------------------------------------------------
# The real command line
# --------------------------------------------------------------------------


def run(args, environ=None, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RENDEZVOUS_")}
    env.update(environ or {})
    return subprocess.run(
        [sys.executable, "-m", "rendezvous", *args], capture_output=True, text=True, timeout=timeout,
        env=env, stdin=subprocess.DEVNULL,
    )


def test_cli_config_file_error_exits_2_naming_file_key_and_value(tmp_path):
    path = tmp_path / "r.conf"
    path.write_text("expect = 2\ntf-port = 99999\n")
    result = run(["join", "--config", str(path)])
    assert result.returncode == 2, result
    assert f"rendezvous: error: {path}: tf-port must be from 0 (any free port) to 65535, got 99999" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_unknown_key_exits_2(tmp_path):
    path = tmp_path / "r.conf"
    path.write_text("expect = 2\nexpext = 3\n")
    result = run(["join"], {"RENDEZVOUS_CONFIG": str(path)})
    assert result.returncode == 2
    assert f"{path}: unknown key 'expext'" in result.stderr


def test_cli_environment_error_exits_2():
    result = run(["join"], {"RENDEZVOUS_EXPECT": "many"})
    assert result.returncode == 2
    assert "RENDEZVOUS_EXPECT must be N or MIN:MAX with 1 <= MIN <= MAX <= 4096, got 'many'" in result.stderr


def test_cli_option_overrides_a_bad_environment_value_only_when_good():
    result = run(["join", "--expect", "0"], {"RENDEZVOUS_EXPECT": "2"})
    assert result.returncode == 2 and "--expect must be" in result.stderr


def test_a_whole_join_from_file_and_environment(tmp_path):
    """expect, job, command from the file, the address and timeout from the environment."""
    out = tmp_path / "out"
    out.mkdir()
    recorder = (SUPPORT / "record_start.py")
    path = tmp_path / "r.conf"
    job = f"f-{os.getpid()}-{os.urandom(3).hex()}"
    path.write_text(
        f'expect = 1\njob = "{job}"\ncommand = ["{sys.executable}", "{recorder}", "{out}"]\n'
        'log-format = "plain"\n'
    )
    result = run(["join", "--config", str(path)], {"RENDEZVOUS_ADDRESS": "127.0.0.2", "RENDEZVOUS_TIMEOUT": "30"})
    assert result.returncode == 0, result.stderr
    [record] = [p for p in out.glob("*.json")]
    import json

    rec = json.loads(record.read_text())
    assert rec["env"]["RENDEZVOUS_JOB"] == job
    assert rec["tf_config"]["cluster"]["worker"][0].startswith("127.0.0.2:")


# --------------------------------------------------------------------------
# The documented list of values (docs/operations.md) is what the environment and the file accept
# --------------------------------------------------------------------------

README = REPO / "docs" / "operations.md"


def documented_values(name: str) -> list[str]:
    """The `values` in the README's parentheses right after `name` (not options like `-v`)."""
    text = " ".join(README.read_text().split())
    match = re.search(re.escape(f"`{name}`") + r" \(([^)]*)\)", text)
    assert match, f"docs/operations.md lists no values for {name}"
    return [v for v in re.findall(r"`([^`]+)`", match[1]) if not v.startswith("-")]


@pytest.mark.parametrize("variable", ["RENDEZVOUS_VERBOSE", "RENDEZVOUS_QUIET"])
def test_every_value_the_readme_lists_for_a_variable_is_accepted(variable):
    values = documented_values(variable)
    assert len(values) >= 3
    for text in values:
        build_settings(from_environ({"RENDEZVOUS_EXPECT": "2", variable: text}))


def test_the_readme_lists_the_values_of_verbose_and_quiet_exactly():
    assert documented_values("RENDEZVOUS_VERBOSE") == ["0", "1", "2"]
    assert set(documented_values("RENDEZVOUS_QUIET")) == {"1", "0", "true", "false", "yes", "no", "on", "off"}
    assert documented_values("verbose") == ["0", "1", "2"]
    assert documented_values("quiet") == ["true", "false"]


def test_restart_and_timing_options_from_a_file_and_the_environment():
    text = 'expect = 2\nmax-restarts = 0\nno-restart-on = [1, 2]\nliveness-timeout = 2\n[timings]\nkeepalive = 1\n'
    values = parse_config_file(text, PATH)
    join = build_settings(values).join
    assert (join.max_restarts, join.no_restart_on, join.liveness_timeout) == (0, frozenset({1, 2}), 2.0)
    assert join.timings.keepalive == 1.0 and join.timings.suspect_after == 3.0
    env = from_environ({"RENDEZVOUS_NO_RESTART_ON": "126, 127", "RENDEZVOUS_TIMINGS": "suspect-after=0.5"})
    assert env["no_restart_on"].value == frozenset({126, 127})
    assert env["timings"].value.suspect_after == 0.5


def test_a_bad_timings_table_names_the_file_and_the_key():
    with pytest.raises(ConfigError, match=r"/etc/rendezvous/rendezvous.conf: timings names an unknown timing 'nope'"):
        parse_config_file("[timings]\nnope = 1\n", "/etc/rendezvous/rendezvous.conf")


def test_preflight_options_from_flags_the_environment_and_a_file():
    args = {"same_file": ["train.py", "data.cfg"], "allow_mismatch": ["python", "gpu-model"], "python": "/opt/py"}
    join = build_settings({**from_cli(args, []), **from_cli({"expect": 2}, [])}).join
    assert (join.same_file, join.allow_mismatch, join.python) == (("train.py", "data.cfg"), ("python", "gpu-model"), "/opt/py")
    env = from_environ({"RENDEZVOUS_SAME_FILE": "a.py, b.py", "RENDEZVOUS_ALLOW_MISMATCH": "same-file"})
    assert (env["same_file"].value, env["allow_mismatch"].value) == (("a.py", "b.py"), ("same-file",))
    text = 'expect = 2\nsame-file = ["train.py"]\nallow-mismatch = "python,same-file"\npython = "/opt/py"\n'
    join = build_settings(parse_config_file(text, PATH)).join
    assert (join.same_file, join.allow_mismatch, join.python) == (("train.py",), ("python", "same-file"), "/opt/py")
    assert JoinConfig(expect=1).same_file == () and JoinConfig(expect=1).python is None


@pytest.mark.parametrize("kind", ["gpu-count", "tensorflow", "gpus"])
def test_allow_mismatch_refuses_what_it_cannot_allow_listing_what_it_can(kind):
    with pytest.raises(ConfigError) as info:
        build_settings(from_environ({"RENDEZVOUS_EXPECT": "2", "RENDEZVOUS_ALLOW_MISMATCH": kind}))
    message = str(info.value)
    assert message.startswith("RENDEZVOUS_ALLOW_MISMATCH must name kinds from tensorflow-patch, python, gpu-model, same-file")
    assert "data-network, gpu-count, gpus-option, tensorflow differences are always refused" in message


def test_same_file_refuses_an_empty_path_naming_the_file_key():
    with pytest.raises(ConfigError, match=f"{PATH}: same-file must be file paths"):
        build_settings(parse_config_file('expect = 2\nsame-file = [""]\n', PATH))


@pytest.mark.parametrize(
    "ports, named",
    [
        ({"port": 7000, "tf_port": 7000}, "--port and --tf-port are both 7000: the command"),
        ({"port": 7000, "metrics_port": 7000}, "--port and --metrics-port are both 7000: the metrics endpoint"),
        ({"tf_port": 9100, "metrics_port": 9100}, "--tf-port and --metrics-port are both 9100: the command"),
        ({"port": 9100, "tf_port": 9100, "metrics_port": 9100}, "--port and --tf-port are both 9100"),
    ],
)
def test_no_two_given_ports_are_the_same(ports, named):
    with pytest.raises(ConfigError, match=re.escape(named)):
        JoinConfig(expect=2, **ports)


def test_ports_left_to_the_system_may_all_be_unset():
    config = JoinConfig(expect=2, port=0, tf_port=0, metrics_port=None)
    assert (config.port, config.tf_port, config.metrics_port) == (0, 0, None)
    assert JoinConfig(expect=2, port=7000, tf_port=7001, metrics_port=7002).metrics_port == 7002


def test_metrics_port_equal_to_tf_port_exits_2_naming_both():
    from peers import run_join  # on 127.0.0.2, ended by --timeout should the ports be taken

    result = run_join("--expect", "2", "--timeout", "1", "--tf-port", "9100", "--metrics-port", "9100", "--", "true")
    assert result.returncode == 2, result
    assert "--tf-port and --metrics-port are both 9100" in result.stderr
