"""The systemd unit and its example config: `systemd-analyze verify` accepts the unit, and
the settings the daemon's behaviour depends on are there.

verify needs the ExecStart binary to exist, so it checks a copy whose ExecStart is this
checkout's `rendezvous`. It does not need the `rendezvous` user to exist (User= is resolved
only when the service starts), so no system user is created here.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rendezvous.config.join import JoinConfig
from rendezvous.host.runtime import SYSTEM_DIRECTORY
from rendezvous.config.sources import DEFAULT_CONFIG_FILE, build_settings, parse_config_file
from rendezvous.core.size import Size
from paths import REPO

ROOT = REPO
UNIT = ROOT / "systemd" / "rendezvous.service"
EXAMPLE = ROOT / "systemd" / "rendezvous.conf.example"
INSTALLED_BINARY = "/opt/rendezvous/venv/bin/rendezvous"


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True, empty_lines_in_values=False)
    parser.optionxform = str  # keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.fail(
            "systemd-analyze is missing: install the `systemd` package "
            "(scripts/setup does, as root: apt-get install systemd)",
            pytrace=False,
        )
    return found


def verify(text: str, tmp_path: Path) -> subprocess.CompletedProcess:
    copy = tmp_path / "rendezvous.service"
    copy.write_text(text.replace(INSTALLED_BINARY, str(Path(sys.executable).with_name("rendezvous"))))
    return subprocess.run(
        [systemd_analyze(), "verify", str(copy)], capture_output=True, text=True, timeout=120,
    )


def test_systemd_analyze_verify_passes(tmp_path):
    result = verify(UNIT.read_text(), tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # verify only warns about unknown keys and bad values: any line about the unit is a failure
    assert "rendezvous.service" not in output, output


def test_verify_would_notice_a_mistake(tmp_path):
    """The check above is not vacuous: a misspelt value is reported."""
    result = verify(UNIT.read_text().replace("KillMode=mixed", "KillMode=mixd"), tmp_path)
    assert "rendezvous.service" in result.stdout + result.stderr


def test_notify_watchdog_and_restart():
    service = unit()["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert int(service["WatchdogSec"]) >= 10
    assert service["Restart"] == "on-abnormal"  # rounds restart inside the daemon
    assert int(service["RestartSec"]) > 0
    assert set(service["RestartPreventExitStatus"].split()) == {"2", "127"}
    assert {"StartLimitIntervalSec", "StartLimitBurst"} <= set(unit()["Unit"])


def test_runs_join_with_the_config_file_as_a_dedicated_user():
    service = unit()["Service"]
    assert service["ExecStart"] == f"{INSTALLED_BINARY} join --config {DEFAULT_CONFIG_FILE}"
    assert service["User"] == "rendezvous"
    assert service["RuntimeDirectory"] == SYSTEM_DIRECTORY.name == "rendezvous"
    assert service["StateDirectory"] == "rendezvous"


def test_stopping_leaves_rendezvous_time_to_stop_the_trainer():
    service = unit()["Service"]
    # SIGTERM to rendezvous only; it stops the trainer's group in order, systemd cleans up after
    assert service["KillMode"] == "mixed"
    stop_grace = JoinConfig(expect=1).stop_grace
    assert int(service["TimeoutStopSec"]) >= stop_grace + 10
    assert {"130", "143"} <= set(service["SuccessExitStatus"].split())


def test_hardening_that_does_not_break_training():
    service = unit()["Service"]
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["PrivateTmp"] == "yes"
    assert service["ProtectKernelTunables"] == "yes"
    assert set(service["RestrictAddressFamilies"].split()) == {"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"}
    for breaks_training in ("ProtectHome", "PrivateNetwork", "PrivateDevices", "DevicePolicy",
                            "ProtectClock", "MemoryDenyWriteExecute", "SystemCallFilter", "IPAddressDeny"):
        assert breaks_training not in service, breaks_training


def test_the_example_config_is_valid():
    values = parse_config_file(EXAMPLE.read_text(), str(EXAMPLE))
    settings = build_settings(values)
    assert settings.join.expect == Size(3, 3) and settings.join.job == "resnet"
    assert settings.join.command[1:3] == ("-m", "trainer")
    # every commented-out key is a real option too
    commented = "\n".join(
        line.lstrip("# ") for line in EXAMPLE.read_text().splitlines()
        if line.startswith("# ") and " = " in line and not line.startswith("# command")
    )
    parse_config_file(commented, "commented-out")


def test_idle_connections_cannot_exhaust_the_descriptors():
    assert int(unit()["Service"]["LimitNOFILE"]) >= 65536
