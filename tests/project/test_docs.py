"""The documentation stays true: the README stays short, the generated pages are not stale,
every option of every subcommand is documented, every `rendezvous ...` command line in the
README and docs/ parses with the real argument parser (and the harmless ones run), and the
troubleshooting page names every warning and error the daemon logs."""

from __future__ import annotations

import argparse
import ast
import json
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from paths import REPO
from rendezvous import __version__
from rendezvous.cli.main import build_parser, split_command
from rendezvous.config.options import OPTIONS
from rendezvous.config.sources import file_key, variable_name

README = REPO / "README.md"
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference.md"
TROUBLESHOOTING = DOCS / "troubleshooting.md"
GENERATOR = runpy.run_path(str(REPO / "scripts" / "reference.py"))


def pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


# -- the README ------------------------------------------------------------------------------


def test_the_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_the_readme_holds_no_benchmark_history_nor_internal_counts():
    text = README.read_text()
    assert not re.search(r"\b\d+(\.\d+)?x\b", text), "ratios belong in docs/benchmarks.md"
    assert "calls" not in text and "benchmarks-history" not in text


def test_the_readme_keeps_the_demo_and_test_commands_that_ci_runs():
    """.ci/run runs `scripts/test`, the README's test command: both must stay."""
    text = README.read_text()
    assert re.search(r"^scripts/demo\s+#", text, re.M) and re.search(r"^scripts/test\s+#", text, re.M)
    assert re.search(r"^scripts/test -q", (REPO / ".ci" / "run").read_text(), re.M)


def test_the_guide_shows_the_readmes_script_which_a_training_test_runs():
    """tests/integration/training/test_readme_script.py runs the README's; the guide's is the same."""
    python = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
    assert python.findall(README.read_text())[0] == python.findall((DOCS / "guide" / "index.md").read_text())[0]


# -- generated pages -------------------------------------------------------------------------


def test_the_reference_is_not_stale():
    assert REFERENCE.read_text() == GENERATOR["render"](), "docs/reference.md is stale: run scripts/gen-reference"


def test_the_home_page_is_the_readme():
    assert (DOCS / "index.md").read_text() == GENERATOR["render_index"](), "docs/index.md is stale: run scripts/gen-reference"


def test_the_generator_script_writes_the_reference(tmp_path):
    out = tmp_path / "reference.md"
    subprocess.run([sys.executable, str(REPO / "scripts" / "reference.py"), str(out)], check=True, timeout=60)
    assert out.read_text() == REFERENCE.read_text()


def _section(text: str, subcommand: str) -> str:
    match = re.search(rf"^## `rendezvous {subcommand}`\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section for rendezvous {subcommand}"
    return match[1]


@pytest.mark.parametrize("subcommand", sorted(subparsers()))
def test_every_option_of_every_subcommand_is_in_the_reference(subcommand):
    section = _section(REFERENCE.read_text(), subcommand)
    for action in subparsers()[subcommand]._actions:
        for flag in action.option_strings:
            assert f"`{flag}`" in section, f"rendezvous {subcommand} {flag} is not in docs/reference.md"


def test_every_join_option_has_its_variable_and_key_in_the_reference():
    section = _section(REFERENCE.read_text(), "join")
    for option in OPTIONS:
        assert f"`{variable_name(option.name)}`" in section
        assert f"`{file_key(option.name)}`" in section


def test_every_exit_status_is_in_the_reference():
    text = REFERENCE.read_text()
    for name, parser in subparsers().items():
        if parser.epilog:
            assert parser.epilog.strip("\n") in text, name


def test_the_version_is_written_once():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert not re.search(r'^version\s*=\s*"', pyproject, re.M), "the version lives in rendezvous/__init__.py"
    assert 'version = {attr = "rendezvous.__version__"}' in pyproject
    out = subprocess.run([sys.executable, "-m", "rendezvous", "--version"], capture_output=True, text=True,
                         cwd=REPO, timeout=60)
    assert out.stdout.strip() == f"rendezvous {__version__}"
    assert f"## [{__version__}]" in (REPO / "CHANGELOG.md").read_text()


# -- command lines in the docs -----------------------------------------------------------------

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`(rendezvous (?:join|peers|status|stop)\b[^`]*)`")


def command_lines() -> list[tuple[str, str]]:
    """(where, command line) of every `rendezvous ...` in code blocks and inline code."""
    found = []
    for page in pages():
        text = page.read_text()
        name = page.relative_to(REPO)
        for block in _FENCE.findall(text):
            for line in block.splitlines():
                line = re.sub(r"^\$ ", "", line.strip())
                for part in re.split(r"&&|;|\|(?!\|)", line):
                    part = part.strip()
                    if part.startswith("sudo "):
                        part = part[5:]
                    if re.match(r"rendezvous (join|peers|status|stop)\b|rendezvous --", part):
                        found.append((str(name), part))
        for inline in _INLINE.findall(_FENCE.sub("", text)):
            found.append((str(name), re.split(r"\|(?!\|)", inline)[0].strip()))
    # `...` stands for options left out: not a command line to parse
    return [(where, line) for where, line in found if "..." not in line]


def test_the_docs_show_command_lines():
    assert len(command_lines()) >= 30


@pytest.mark.parametrize("where, line", command_lines())
def test_every_command_line_in_the_docs_parses(where, line):
    """Each with the real parser: flags that exist, values of the right form."""
    words = shlex.split(line, comments=True)[1:]
    options, command = split_command(words)
    if "--help" in options or "-h" in options or "--version" in options:
        return
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(options)
    except SystemExit:
        pytest.fail(f"{where}: `{line}` does not parse")
    assert not unknown, f"{where}: `{line}`: unknown {unknown}"
    if args.subcommand != "join":
        assert not command, f"{where}: `{line}`: {args.subcommand} takes no command"


@pytest.mark.parametrize("argv", [["--version"], ["join", "--help"], ["peers", "--help"], ["status", "--help"]])
def test_the_runnable_help_lines_run(argv):
    out = subprocess.run([sys.executable, "-m", "rendezvous", *argv], capture_output=True, text=True, cwd=REPO,
                         timeout=60)
    assert out.returncode == 0, out.stderr


def test_status_runs_as_the_docs_show_it(tmp_path):
    """`rendezvous status` with no daemon here: exit 7, as the troubleshooting page says."""
    env = {"PATH": "/usr/bin:/bin", "RENDEZVOUS_RUNTIME_DIR": str(tmp_path / "run")}
    out = subprocess.run([sys.executable, "-m", "rendezvous", "status", "--timeout", "1"], capture_output=True,
                         text=True, cwd=REPO, env=env, timeout=60)
    assert out.returncode == 7, (out.stdout, out.stderr)
    assert "| 7 |" in TROUBLESHOOTING.read_text()


# -- troubleshooting explains every message rendezvous can print ---------------------------------
#
# What a user sees at the default verbosity: every log call of level INFO and up (`log.info`,
# `.warning`, `.error`, `.exception`, `.critical`, `log.log(LEVEL, ...)`; DEBUG needs -v), every
# write to stderr (`print(..., file=sys.stderr)`, `sys.stderr.write`), and the message of every
# raised RendezvousError (the CLI prints it as `rendezvous: error: MESSAGE`).

_LEVELS = {"info", "warning", "error", "exception", "critical"}
_LOGGERS = ("log", "self._log", "logger")
# Messages whose text is made elsewhere (logged as "%s", raised from a variable): the phrase the
# page must hold for each, by module and the function that prints it.
DYNAMIC = {
    "daemon/commandside.py:log_failure": "followed by lines indented by four spaces",
    "cli/main.py:_report_error": "rendezvous: error:",
    "cli/show.py:show_status": "each one's reason joined by `; `",
    "config/options.py:check_value": "`--OPTION PROBLEM`",
    "config/sources.py:_read": "`RENDEZVOUS_VARIABLE PROBLEM, got VALUE`",
    "config/sources.py:_read_timings_table": "`FILE: key PROBLEM`",
    "config/sources.py:read_config_file": "`config file %s: %s`",
    "coordinator/client.py:_ask": "a job that needs a token (exit 4)",
    "daemon/resources.py:bind_resources": "`--port %d: ...`",
    "observe/console.py:update": "peers seen: ADDRESS (...) [coordinator], ...`",
    "coordinator/_guard.py:warn": "at most once per address and kind",
    "coordinator/_join.py:serve": "rejected %s: %s",
    "daemon/node.py:_round": "no rendezvous within --timeout %gs: saw 1 of 2 peers of job %r:",
    "config/slurm.py:read_step": "the variable's name, then what is wrong with its host list",
    "daemon/joiner.py:_confirm_list": "allowed by --allow-mismatch",
    "daemon/node.py:_main_loop": "round %d ended: %s; round %d starts",
    "daemon/presence.py:_name_left_out": "it is left out; give it an IPv4 address",
    "daemon/presence.py:_switch_family": "this node uses its IPv6 address",
    "daemon/presence.py:_hint_when_alone": "no peer seen for 10s",
    "daemon/presence.py:_held_by": "answers for this node's address",
    "daemon/viewholder.py:update": "also advertises this node's address and port",
    "daemon/resources.py:run_all": "could not %s",
    "discovery/__init__.py:deliver": "handling %s failed",
    "host/runtime.py:register": "refusing runtime directory",
    "host/runtime.py:_scan": "refusing runtime directory",
    "host/syncdir.py:attempt": "--sync-dir ...` errors",
    "host/syncdir.py:load_chief": "ignoring %s: %s",
    "observe/report.py:_each": "%s.%s failed",
}


def _error_classes() -> set[str]:
    """Names of RendezvousError and every class below it, wherever in rendezvous/ it is defined."""
    bases: dict[str, set[str]] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(b).rpartition(".")[2] for b in node.bases}
    found = {"RendezvousError"}
    while True:
        more = {name for name, of in bases.items() if of & found} - found
        if not more:
            return found
        found |= more


def _modules() -> list[Path]:
    return [p for p in sorted((REPO / "rendezvous").rglob("*.py")) if "v1" not in p.parts]


def _literal(node: ast.AST) -> str:
    """The text of a message argument, `%s` where a value goes: a string, an f-string, a sum."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "%s" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _literal(node.left) + ("%s" + _literal(node.right) if isinstance(node.op, ast.Add) else "")
    return ""


def _message(node: ast.AST, errors: set[str]) -> Optional[ast.AST]:
    """The message argument when NODE prints or raises one a user sees, else None."""
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        name = ast.unparse(node.exc.func).rpartition(".")[2]
        if name in errors:
            return node.exc.args[0] if node.exc.args else ast.Constant("")
        return None
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Name) and func.id == "print":
        if any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in node.keywords) and node.args:
            return node.args[0]
        return None
    if not isinstance(func, ast.Attribute):
        return None
    owner = ast.unparse(func.value)
    if owner in _LOGGERS and func.attr in _LEVELS and node.args:
        return node.args[0]
    if owner in _LOGGERS and func.attr == "log" and len(node.args) > 1:
        level = ast.unparse(node.args[0])
        return node.args[1] if "DEBUG" not in level else None
    if func.attr == "warn" and owner.endswith("_guard") and len(node.args) > 2:
        return node.args[2]
    if func.attr == "write" and owner == "sys.stderr" and node.args:
        return node.args[0]
    return None


def printed_messages() -> list[tuple[str, str]]:
    """(module:function, message with `%s` for values) of every message a user can see."""
    errors = _error_classes()
    found = []
    for path in _modules():
        where = str(path.relative_to(REPO / "rendezvous"))
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                message = _message(node, errors)
                if message is not None:
                    found.append((f"{where}:{function.name}", _literal(message)))
    return sorted(set(found))


_VALUE = re.compile(r"%[-#0 +]?\d*(?:\.\d+)?[sdrgf%]")


def _fragment(message: str) -> str:
    """The longest literal part of a message: what is left between its %-format values."""
    return max(_VALUE.split(message), key=len).strip()


def _explained(message: str, page: str) -> Optional[bool]:
    """Whether PAGE quotes MESSAGE: its longest literal part, or, when each part is short, all of
    them in order (values and `...` between them); None when too little of it is literal."""
    if len(_fragment(message).replace(" ", "")) >= 12:
        return _fragment(message) in page
    parts = [p.strip() for p in _VALUE.split(message) if p.strip()]
    if len("".join(parts).replace(" ", "")) < 12:
        return None
    return re.search(".{0,40}?".join(map(re.escape, parts)), page) is not None


def test_the_printed_messages_are_found():
    messages = printed_messages()
    assert len(messages) >= 150
    kinds = " ".join(text for _, text in messages)
    # one of each kind: a log line (INFO), a log.log line, a write to stderr, a raised error
    for text in ("members ready: releasing", "round %d of job %r aborted", "cannot write the error file",
                 "stop needs --job NAME"):
        assert text in kinds, text


@pytest.mark.parametrize("where, message", printed_messages())
def test_troubleshooting_explains_every_printed_message(where, message):
    page = " ".join(TROUBLESHOOTING.read_text().split())
    explained = _explained(message, page)
    if explained is not None:
        assert explained, f"docs/troubleshooting.md does not explain {where}: {message!r}"
    else:
        assert where in DYNAMIC, f"{where} prints {message!r}: add what docs/troubleshooting.md says of it to DYNAMIC"
        assert DYNAMIC[where] in page, f"docs/troubleshooting.md does not explain {where} ({DYNAMIC[where]!r})"


def test_every_dynamic_entry_names_a_message_still_printed():
    printed = {where for where, _ in printed_messages()}
    assert not set(DYNAMIC) - printed, "entries of DYNAMIC whose message is gone"


# -- the first job's page: a real run's output, which must still be what the code prints --------

FIRST_JOB = DOCS / "start" / "first-job.md"
_LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} rendezvous (?:INFO|WARNING|ERROR) (.*)$", re.M)


def _pattern(message: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in _VALUE.split(message)), re.S)


def test_the_first_job_page_was_generated_from_its_script():
    page = FIRST_JOB.read_text()
    generator = runpy.run_path(str(REPO / "scripts" / "firstjob.py"))
    assert "Generated by scripts/gen-reference --first-job" in page
    assert f"```python\n{generator['COMMAND'].rstrip()}\n```" in page, "first-job.md is stale: scripts/gen-reference --first-job"


def test_every_log_line_of_the_first_job_is_one_the_code_still_prints():
    """Cheap: no run. A message reworded, or one no longer logged, makes the page stale."""
    lines = _LOG_LINE.findall(FIRST_JOB.read_text())
    assert len(lines) >= 15
    formats = [_pattern(message) for _, message in printed_messages() if len(_fragment(message)) >= 3]
    for line in lines:
        assert any(f.fullmatch(line) for f in formats), \
            f"docs/start/first-job.md shows {line!r}, which no message of the code prints: scripts/gen-reference --first-job"


def test_the_first_jobs_json_has_the_keys_status_json_has_today():
    """`status --json` as the page shows it, against the keys the code writes for a daemon."""
    import ipaddress

    from rendezvous.core.peer import Peer
    from rendezvous.core.size import Size
    from rendezvous.core.status import NodeStatus, status_to_dict

    shown = json.loads(re.search(r"^\$ rendezvous status --json\n(.*?)^```", FIRST_JOB.read_text(), re.M | re.S)[1])
    node = Peer(node_id="5f0c2a81e6d3", address=ipaddress.ip_address("127.0.0.1"), port=29630, tf_port=29631)
    today = {"daemon_pid", *status_to_dict(NodeStatus(node=node, job="first", expect=Size.fixed(2)))}
    assert len(shown) == 2 and all(set(daemon) == today for daemon in shown), \
        "docs/start/first-job.md is stale: scripts/gen-reference --first-job"


def test_troubleshooting_lists_every_exit_status_of_the_error_tree():
    import rendezvous.errors as errors

    page = TROUBLESHOOTING.read_text()
    codes = {c.exit_code for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.RendezvousError)}
    for code in codes - {1}:  # 1: the base class, never raised itself
        assert re.search(rf"^\| [^|]*\b{code}\b[^|]* \|", page, re.M), f"exit status {code} is not in the table"
