"""Log output for terminals, journald and log shippers.

`--log-format auto` (the default): on a terminal, plain lines plus one live progress line
while waiting for peers, redrawn as they come and go; anywhere else (journald, a file, a
pipe) plain lines only, with a new line each time the progress changes. `plain`: plain lines
only. `json`: one JSON object per line, with the node id and job once they are known.

Plain lines are always single lines without control characters, ANSI codes included:
messages can quote text that came from the network.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
import threading
from datetime import datetime, timezone
from typing import IO, Callable, Optional

from ..config.join import LogConfig
from ..core.advert import Phase
from ..core.status import NodeStatus, progress_line, status_line
from .report import Reporter

log = logging.getLogger(__name__)

PLAIN_FORMAT = "%(asctime)s.%(msecs)03d rendezvous %(levelname)s %(message)s"
PLAIN_DATE_FORMAT = "%H:%M:%S"
ERASE_LINE = "\r\033[K"
# C0 and C1 controls: ESC (ANSI sequences), CR, BEL, ... and line breaks.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
NOISY_LOGGERS = ("zeroconf", "grpc", "asyncio")
# Libraries that log an error of the network (a socket that cannot send while a link is
# down) as a warning with its traceback, on purpose, the first time they meet it.
QUIET_TRACEBACKS = ("zeroconf",)


def one_line(text: str) -> str:
    """Multi-line text (a traceback) as one line, without control characters."""
    lines = [_CONTROLS.sub(" ", line).rstrip() for line in text.splitlines()]
    return " | ".join(line for line in lines if line.strip())


def format_time(created: float) -> str:
    """ISO 8601 in UTC with milliseconds: 2025-03-01T08:14:45.102Z."""
    stamp = datetime.fromtimestamp(created, tz=timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


class PlainFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT, PLAIN_DATE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return one_line(super().format(record))


class JsonFormatter(logging.Formatter):
    """One object per line: time, level, logger, message, then `context` (node, job), and
    a failed command's `failure` (node, rank, exit code, cause, tail) on the line that reports it."""

    def __init__(self, context: Optional[dict[str, str]] = None) -> None:
        super().__init__()
        self.context = context if context is not None else {}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": format_time(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **self.context,
        }
        failure = getattr(record, "failure", None)
        if isinstance(failure, dict):
            entry["failure"] = failure
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def fit(text: str, width: int) -> str:
    """Cut a live line to the terminal width: a wrapped line cannot be erased with \\r."""
    text = _CONTROLS.sub(" ", text)
    if width <= 4 or len(text) < width:
        return text
    return text[: width - 4] + "..."


class ConsoleHandler(logging.StreamHandler):
    """Writes log records; on a terminal it can keep one live line below them."""

    def __init__(self, stream: IO[str], width: Callable[[], int] = lambda: shutil.get_terminal_size().columns) -> None:
        super().__init__(stream)
        self._width = width
        self._live: Optional[str] = None
        self._live_lock = threading.RLock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._live_lock:
            if self._live is None:
                super().emit(record)
                return
            self.stream.write(ERASE_LINE)
            super().emit(record)
            self.stream.write(self._live)
            self.flush()

    def show(self, text: str) -> None:
        with self._live_lock:
            line = fit(text, self._width())
            if line != self._live:
                self._live = line
                self.stream.write(ERASE_LINE + line)
                self.flush()

    def clear(self) -> None:
        with self._live_lock:
            if self._live is not None:
                self._live = None
                self.stream.write(ERASE_LINE)
                self.flush()


class Console(Reporter):
    """Shows the waiting progress: as the live line on a terminal, else as a log line each
    time it changes; on a terminal also the training's progress while the command runs.
    Also tells the JSON formatter the node id and job."""

    def __init__(self, handler: Optional[ConsoleHandler] = None, live: bool = False,
                 context: Optional[dict[str, str]] = None) -> None:
        self.handler = handler
        self.live = live and handler is not None
        self.context = context if context is not None else {}
        self._last: Optional[str] = None
        self._stopping = False

    def update(self, status: NodeStatus) -> None:
        self.context["node"] = status.node.node_id
        self.context["job"] = status.job
        if self.live and status.phase is Phase.RUNNING and status.progress and not self._stopping:
            assert self.handler is not None
            self.handler.show(status_line(status))  # the training's progress, below its output
            return
        if status.phase is not Phase.WAITING or self._stopping:
            self._clear()
            return
        text = progress_line(status)
        if self.live:
            assert self.handler is not None
            self.handler.show(text)
        elif text != self._last:
            log.info("%s", text)
        self._last = text

    def _clear(self) -> None:
        if self.live and self.handler is not None:
            self.handler.clear()

    def stopping(self) -> None:
        self._stopping = True  # peers leaving during the shutdown are no news
        self._clear()

    def close(self) -> None:
        self._clear()


class WithoutTraceback(logging.Filter):
    """Drops the traceback of the records of the QUIET_TRACEBACKS libraries: their message
    says what failed ("Error with socket ...: Network is unreachable"); a stack of their
    internals reads as if the daemon had crashed. -vv keeps it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name.partition(".")[0] in QUIET_TRACEBACKS:
            record.exc_info = None
            record.exc_text = None
        return True


def setup_logging(config: LogConfig, stream: Optional[IO[str]] = None) -> Console:
    """Configure the root logger once, for the whole process; return the progress reporter."""
    stream = stream if stream is not None else sys.stderr
    level = logging.WARNING if config.quiet else logging.DEBUG if config.verbose else logging.INFO
    handler = ConsoleHandler(stream)
    context: dict[str, str] = {}
    if config.log_format == "json":
        handler.setFormatter(JsonFormatter(context))
    else:
        handler.setFormatter(PlainFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if config.verbose < 2:
        for noisy in NOISY_LOGGERS:
            logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
        handler.addFilter(WithoutTraceback())
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    live = config.log_format == "auto" and is_tty and level <= logging.INFO
    return Console(handler, live=live, context=context)
