"""Log output: plain single lines without control characters, JSON lines, and the live
progress line on a terminal."""

from __future__ import annotations

import io
import ipaddress
import json
import logging
import os
import pty
import re
import secrets
import subprocess
import sys
import time

import pytest

from patience import HANG
from peers import run_join

from rendezvous.config.join import LogConfig
from rendezvous.observe.console import (
    ERASE_LINE,
    NOISY_LOGGERS,
    Console,
    ConsoleHandler,
    JsonFormatter,
    PlainFormatter,
    fit,
    format_time,
    one_line,
    setup_logging,
)
from rendezvous.core.advert import Phase
from rendezvous.core.peer import Peer
from rendezvous.core.status import NodeStatus
from rendezvous.core.tf_config import Membership
from rendezvous.core.size import Size

PLAIN_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d\d\d rendezvous (DEBUG|INFO|WARNING|ERROR|CRITICAL) [^\x00-\x1f\x7f-\x9f]*$")


def record(message="hello %s", args=("world",), level=logging.INFO, exc_info=None, name="rendezvous.daemon.node"):
    rec = logging.LogRecord(name, level, __file__, 1, message, args, exc_info)
    rec.created = 1700000000.123456
    rec.msecs = 123.456
    return rec


# --------------------------------------------------------------------------
# Pure formatting
# --------------------------------------------------------------------------


def test_one_line_joins_lines_and_drops_control_characters():
    assert one_line("a\nb\n\n  c") == "a | b |   c"
    assert "\x1b" not in one_line("\x1b[31mred\x1b[0m") and "red" in one_line("\x1b[31mred\x1b[0m")
    assert one_line("bell\x07 cr\r nul\x00 c1\x9b") == "bell  cr |  nul  c1"  # CR breaks a line too


def test_format_time_is_utc_iso8601_with_milliseconds():
    assert format_time(0) == "1970-01-01T00:00:00.000Z"
    assert format_time(1700000000.123456) == "2023-11-14T22:13:20.123Z"


def test_plain_formatter_makes_one_line_even_from_a_traceback():
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        rec = record("failed: %s", ("x\x1b[2Jy",), logging.ERROR, exc_info=sys.exc_info())
    line = PlainFormatter().format(rec)
    assert "\n" not in line and "\x1b" not in line
    assert PLAIN_LINE.match(line), line
    assert " rendezvous ERROR failed: x [2Jy | Traceback (most recent call last): | " in line
    assert line.endswith("ValueError: bad | thing")


def test_json_formatter_fields_and_context():
    context: dict[str, str] = {}
    formatter = JsonFormatter(context)
    entry = json.loads(formatter.format(record()))
    assert entry == {"time": "2023-11-14T22:13:20.123Z", "level": "INFO", "logger": "rendezvous.daemon.node", "message": "hello world"}
    context.update(node="abcdef012345", job="resnet")
    entry = json.loads(formatter.format(record("line\nbreak", ())))
    assert entry["node"] == "abcdef012345" and entry["job"] == "resnet" and entry["message"] == "line\nbreak"
    try:
        1 / 0
    except ZeroDivisionError:
        entry = json.loads(formatter.format(record(exc_info=sys.exc_info(), level=logging.ERROR)))
    assert entry["level"] == "ERROR" and "ZeroDivisionError" in entry["exception"]


def test_fit_cuts_to_the_terminal_width():
    assert fit("short", 80) == "short"
    assert fit("x" * 100, 20) == "x" * 16 + "..."
    assert len(fit("x" * 100, 20)) < 20
    assert fit("a\x1b[2Jb", 80) == "a [2Jb"


# --------------------------------------------------------------------------
# The live line and the progress reporter
# --------------------------------------------------------------------------

A = Peer("aaaaaaaaaaaa", ipaddress.ip_address("10.0.0.1"), 1000, 2000)
B = Peer("bbbbbbbbbbbb", ipaddress.ip_address("10.0.0.2"), 1000, 2000)


def waiting(*seen):
    seen = seen or (B,)
    return NodeStatus(node=B, job="j", expect=Size.fixed(2), seen=seen, following=min(seen))


def running():
    return NodeStatus(node=B, job="j", expect=Size.fixed(2), phase=Phase.RUNNING, seen=(A, B), membership=Membership.freeze("j", 1, [A, B]))


def test_the_live_line_stays_below_log_lines():
    stream = io.StringIO()
    handler = ConsoleHandler(stream, width=lambda: 200)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.handle(record("before", ()))
    handler.show("1/2 peers seen")
    handler.show("1/2 peers seen")  # unchanged: not redrawn
    handler.handle(record("during", ()))
    handler.show("2/2 peers seen")
    handler.clear()
    handler.clear()
    handler.handle(record("after", ()))
    assert stream.getvalue() == (
        "before\n"
        f"{ERASE_LINE}1/2 peers seen"
        f"{ERASE_LINE}during\n1/2 peers seen"
        f"{ERASE_LINE}2/2 peers seen"
        f"{ERASE_LINE}"
        "after\n"
    )


def test_console_on_a_terminal_draws_the_waiting_progress_then_clears_it():
    stream = io.StringIO()
    console = Console(ConsoleHandler(stream, width=lambda: 200), live=True)
    console.update(waiting())
    console.update(waiting(A, B))
    console.update(running())
    text = stream.getvalue()
    assert f"{ERASE_LINE}job 'j': 1/2 peers seen: 10.0.0.2 (bbbbbbbbbbbb) [coordinator]" in text
    assert f"{ERASE_LINE}job 'j': 2/2 peers seen: 10.0.0.1 (aaaaaaaaaaaa) [coordinator], 10.0.0.2 (bbbbbbbbbbbb)" in text
    assert text.endswith(ERASE_LINE)
    assert console.context == {"node": "bbbbbbbbbbbb", "job": "j"}


def test_console_elsewhere_logs_each_new_progress_once(caplog):
    caplog.set_level(logging.INFO)
    console = Console(ConsoleHandler(io.StringIO()), live=False)
    for status in (waiting(), waiting(), waiting(A, B), running(), running()):
        console.update(status)
    lines = [r.getMessage() for r in caplog.records if r.name == "rendezvous.observe.console"]
    assert lines == [
        "job 'j': 1/2 peers seen: 10.0.0.2 (bbbbbbbbbbbb) [coordinator]",
        "job 'j': 2/2 peers seen: 10.0.0.1 (aaaaaaaaaaaa) [coordinator], 10.0.0.2 (bbbbbbbbbbbb)",
    ]


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def logging_restored():
    """setup_logging configures the process's loggers: the root's handlers and level, and
    the libraries' levels; put them back after the test."""
    root = logging.getLogger()
    noisy = [logging.getLogger(name) for name in NOISY_LOGGERS]
    saved = root.handlers[:], root.level, [logger.level for logger in noisy]
    yield
    root.handlers[:], level, levels = saved
    root.setLevel(level)
    for logger, level in zip(noisy, levels):
        logger.setLevel(level)


@pytest.mark.parametrize(
    "config, tty, live, formatter",
    [
        (LogConfig(), True, True, PlainFormatter),
        (LogConfig(), False, False, PlainFormatter),
        (LogConfig(log_format="plain"), True, False, PlainFormatter),
        (LogConfig(log_format="json"), True, False, JsonFormatter),
        (LogConfig(quiet=True), True, False, PlainFormatter),
    ],
)
def test_setup_logging_chooses_the_live_line_only_for_auto_on_a_terminal(config, tty, live, formatter,
                                                                         logging_restored):
    root = logging.getLogger()
    console = setup_logging(config, FakeTTY() if tty else io.StringIO())
    assert console.live is live
    assert isinstance(root.handlers[0].formatter, formatter)
    assert root.level == (logging.WARNING if config.quiet else logging.INFO)


@pytest.mark.parametrize("config, traceback", [
    (LogConfig(), False), (LogConfig(log_format="json"), False), (LogConfig(verbose=1), False),
    (LogConfig(verbose=2), True),
])
def test_a_network_error_zeroconf_logs_is_one_line_without_its_traceback(config, traceback, logging_restored):
    """zeroconf logs the first socket error it meets as a warning with a traceback (a link
    went down): the message stays, the library's stack only with -vv; other tracebacks stay."""
    from zeroconf._logger import QuietLogger

    out = io.StringIO()
    setup_logging(config, out)
    try:
        raise OSError(101, f"Network is unreachable {secrets.token_hex(4)}")  # zeroconf logs each once
    except OSError as exc:
        QuietLogger.log_exception_warning("Error with socket 18 (('10.213.0.2', 5353))): %s", exc)
    try:
        raise ValueError("ours")
    except ValueError:
        logging.getLogger("rendezvous.daemon.node").exception("handling an event failed")
    zeroconf_line, ours = out.getvalue().splitlines()
    assert "Error with socket 18" in zeroconf_line and "Network is unreachable" in zeroconf_line
    assert ("Traceback" in zeroconf_line) is traceback
    assert "Traceback" in ours and "ValueError: ours" in ours


# --------------------------------------------------------------------------
# The real daemon
# --------------------------------------------------------------------------


def test_not_on_a_terminal_every_line_is_plain():
    result = run_join("--expect", "2", "--timeout", "1")
    assert result.returncode == 3
    lines = result.stderr.splitlines()
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    assert all(PLAIN_LINE.match(line) for line in lines[:-1]), lines
    assert "1/2 peers seen" in result.stderr
    assert lines[-1].startswith("rendezvous: error: no rendezvous within --timeout 1s")


def test_json_log_lines_carry_node_and_job():
    job = f"c-{secrets.token_hex(4)}"
    result = run_join("--expect", "1", "--log-format", "json", "--", "true", job=job)
    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in result.stderr.splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(e) for e in entries)
    assert any(e["message"] == "command exited with code 0" for e in entries)
    with_context = [e for e in entries if "node" in e]
    assert with_context and all(e["job"] == job for e in with_context)
    assert len({e["node"] for e in with_context}) == 1


def test_json_errors_are_json_too():
    result = run_join("--expect", "2", "--timeout", "0.5", "--log-format", "json")
    assert result.returncode == 3
    last = json.loads(result.stderr.splitlines()[-1])
    assert last["level"] == "ERROR" and "--timeout 0.5s" in last["message"]


def test_quiet_shows_no_progress():
    result = run_join("--expect", "2", "--timeout", "0.5", "-q")
    assert result.returncode == 3
    assert "peers seen" not in result.stderr.split("rendezvous: error:")[0]


def test_on_a_terminal_the_progress_is_one_live_line():
    controller, terminal = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RENDEZVOUS_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--timeout", "1.5",
         "--job", f"c-{secrets.token_hex(4)}", "--address", "127.0.0.2"],
        stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal, env=env,
    )
    os.close(terminal)
    output = b""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the terminal closed
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    assert proc.wait(timeout=HANG) == 3
    text = output.decode()
    assert "\r\x1b[Kjob '" in text and "1/2 peers seen" in text
    # the live line is erased before the error, not left behind or logged as a line
    last = text.rindex("peers seen")
    assert text.index(ERASE_LINE, last) < text.index("rendezvous: error: no rendezvous within")
    assert not re.search(r"rendezvous INFO job '.*peers seen", text), text


def test_the_json_log_carries_a_failure_on_the_line_that_reports_it():
    formatter = JsonFormatter({"node": "n"})
    record = logging.LogRecord("rendezvous.daemon.joiner", logging.ERROR, __file__, 1, "command failed: %s",
                               ("x",), None)
    record.failure = {"cause": "RuntimeError: shard 7 is corrupt", "tail": ["a"]}
    entry = json.loads(formatter.format(record))
    assert entry["message"] == "command failed: x" and entry["failure"]["cause"] == "RuntimeError: shard 7 is corrupt"
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
    assert "failure" not in json.loads(formatter.format(plain))
