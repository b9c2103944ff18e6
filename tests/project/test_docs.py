"""The documentation stays true: the README stays short, the generated pages are not stale,
every option of every subcommand is documented, every `rendezvous ...` command line in the
README and docs/ parses with the real argument parser (and the harmless ones run), and the
troubleshooting page names every warning and error the daemon logs."""

from __future__ import annotations

import argparse
import ast
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

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


# -- troubleshooting covers every logged warning and error --------------------------------------

_LEVELS = {"warning", "error", "exception", "critical"}
# Messages whose text is made elsewhere (logged as "%s"): the phrase the page must hold for each,
# by module and the function that logs it.
DYNAMIC = {
    "daemon/commandside.py:log_failure": "followed by lines indented by four spaces",
    "cli/main.py:_report_error": "rendezvous: error:",
    "coordinator/_guard.py:warn": "at most once per address and kind",
    "coordinator/_join.py:serve": "rejected %s: %s",
    "daemon/joiner.py:_confirm_list": "allowed by --allow-mismatch",
    "daemon/node.py:_main_loop": "round %d ended: %s; round %d starts",
    "daemon/presence.py:_name_left_out": "it is left out; give it an IPv4 address",
    "daemon/presence.py:_switch_family": "this node uses its IPv6 address",
    "daemon/presence.py:_hint_when_alone": "no peer seen for 10s",
    "daemon/resources.py:run_all": "could not %s",
    "discovery/__init__.py:deliver": "handling %s failed",
    "host/runtime.py:register": "refusing runtime directory",
    "host/runtime.py:_scan": "refusing runtime directory",
    "host/syncdir.py:attempt": "--sync-dir ...` errors",
    "host/syncdir.py:load_chief": "ignoring %s: %s",
    "observe/report.py:_each": "%s.%s failed",
}


def logged_messages() -> list[tuple[str, str]]:
    """(module:function, format string) of every warning and error logged in rendezvous/."""
    found = []
    for path in sorted((REPO / "rendezvous").rglob("*.py")):
        if "v1" in path.parts:
            continue
        where = str(path.relative_to(REPO / "rendezvous"))
        tree = ast.parse(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if node.func.attr in _LEVELS and ast.unparse(node.func.value) in ("log", "self._log", "logger"):
                    at = 0
                elif node.func.attr == "warn" and ast.unparse(node.func.value).endswith("_guard"):
                    at = 2
                else:
                    continue
                if len(node.args) > at:
                    arg = node.args[at]
                    text = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""
                    found.append((f"{where}:{function.name}", text))
    return sorted(set(found))


def _fragment(message: str) -> str:
    """The longest literal part of a %-format string."""
    return max(re.split(r"%[-#0 +]?\d*(?:\.\d+)?[sdrgf%]", message), key=len).strip()


def test_the_logged_messages_are_found():
    assert len(logged_messages()) >= 40


@pytest.mark.parametrize("where, message", logged_messages())
def test_troubleshooting_covers_every_logged_warning_and_error(where, message):
    page = " ".join(TROUBLESHOOTING.read_text().split())
    fragment = _fragment(message)
    if len(fragment.replace(" ", "")) >= 12:
        assert fragment in page, f"docs/troubleshooting.md does not explain {where}: {message!r}"
    else:
        assert where in DYNAMIC, f"{where} logs {message!r}: add what docs/troubleshooting.md says of it to DYNAMIC"
        assert DYNAMIC[where] in page, f"docs/troubleshooting.md does not explain {where} ({DYNAMIC[where]!r})"


def test_every_dynamic_entry_names_a_message_still_logged():
    logged = {where for where, _ in logged_messages()}
    assert not set(DYNAMIC) - logged, "entries of DYNAMIC whose message is gone"


def test_troubleshooting_lists_every_exit_status_of_the_error_tree():
    import rendezvous.errors as errors

    page = TROUBLESHOOTING.read_text()
    codes = {c.exit_code for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.RendezvousError)}
    for code in codes - {1}:  # 1: the base class, never raised itself
        assert re.search(rf"^\| [^|]*\b{code}\b[^|]* \|", page, re.M), f"exit status {code} is not in the table"
