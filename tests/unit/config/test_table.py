"""The option table and the typed configs built from it cannot drift apart."""

from __future__ import annotations

import re
import typing

import pytest

from rendezvous.config import join
from rendezvous.config.join import JoinConfig, LogConfig
from rendezvous.config.options import (
    BY_NAME,
    JOIN_OPTIONS,
    LOG_OPTIONS,
    LOOK_OPTIONS,
    OPTIONS,
    SUBCOMMAND_OPTIONS,
    show_default,
)
from rendezvous.config.timings import Timings
from rendezvous.core.record import fields, replace
from rendezvous.core.size import Size


def test_the_join_config_has_a_field_per_join_option_in_the_tables_order():
    assert fields(JoinConfig) == JOIN_OPTIONS


def test_the_log_config_has_a_field_per_output_option_in_the_tables_order():
    assert fields(LogConfig) == LOG_OPTIONS


@pytest.mark.parametrize("config, names", [(JoinConfig(expect=2), JOIN_OPTIONS), (LogConfig(), LOG_OPTIONS)])
def test_the_configs_defaults_are_the_tables(config, names):
    for name in names:
        if name == "expect":
            continue
        default = BY_NAME[name].default
        assert getattr(config, name) == (default() if callable(default) else default), name


def test_every_field_has_a_real_type():
    hints = typing.get_type_hints(JoinConfig, vars(join))
    assert hints["expect"] is Size and hints["timings"] is Timings
    assert hints["peers"] == tuple[str, ...] and hints["port"] == typing.Optional[int]
    assert object not in hints.values()


@pytest.mark.parametrize(
    "name, shown",
    [("settle", "(default: 3)"), ("stop_grace", "(default: 10)"), ("max_restarts", "(default: 3)"),
     ("no_restart_on", "(default: 2,126,127; '' for none)"), ("liveness_timeout", "(at least 0.1; default: 5)"),
     ("sync_max_bytes", "(default: 21474836480, 20 GiB)"), ("job", "(default: default)")],
)
def test_the_help_shows_the_tables_default(name, shown):
    assert shown in BY_NAME[name].help_text


def test_the_help_follows_a_changed_default():
    assert "(default: 7.5)" in replace(BY_NAME["settle"], default=7.5).help_text


def test_no_help_writes_a_default_of_its_own():
    """A default in a help text is `{default}`, filled in from the table; the ones written out
    describe what no value means (wait forever, a free port, ...)."""
    options = [*OPTIONS, *LOOK_OPTIONS.values(), *(o for group in SUBCOMMAND_OPTIONS.values() for o in group)]
    for option in options:
        if option.default not in (None, (), False) and not callable(option.default):
            assert not re.search(rf"default: {re.escape(show_default(option.default))}\b", option.help), option.name


def test_the_subcommands_share_the_join_options_checks_and_flags():
    """... but --discovery, whose slurm and auto mean something inside a job step only."""
    for options in SUBCOMMAND_OPTIONS.values():
        for option in options:
            source = BY_NAME.get(option.name) or LOOK_OPTIONS[option.name]
            assert (option.kind, option.flag) == (source.kind, source.flag)
            if option.name == "discovery":
                assert option.check("slurm") and not source.check("slurm") and not option.check("both")
            else:
                assert option.check == source.check


def test_a_subcommand_option_has_one_flag_per_subcommand():
    for options in SUBCOMMAND_OPTIONS.values():
        flags = [o.flag for o in options]
        assert len(flags) == len(set(flags))


def test_peers_and_status_get_the_tables_defaults_when_not_given():
    from rendezvous.config.sources import look_options

    peers = look_options({"seconds": None, "job": None}, "peers")
    assert peers == {"seconds": 3.0, "job": None, "json": False, "address": None, "interface": None, "peers": (),
                     "discovery": None}
    status = look_options({}, "status")
    assert status["answer_timeout"] == 3.0 and status["watch"] is False and status["local"] is False


def test_peers_seeds_are_checked_and_written_out_in_full():
    from rendezvous.config.sources import look_options
    from rendezvous.core.seeds import DEFAULT_PORT
    from rendezvous.errors import ConfigError

    assert look_options({"peers": ["127.0.0.2"]}, "peers")["peers"] == (f"127.0.0.2:{DEFAULT_PORT}",)
    with pytest.raises(ConfigError, match=r"^--peer must be HOST\[:PORT\]"):
        look_options({"peers": ["127.0.0.2:0"]}, "peers")
    with pytest.raises(ConfigError, match=r"^--job must be 1-63 letters"):
        look_options({"job": "bad name!"}, "status")
