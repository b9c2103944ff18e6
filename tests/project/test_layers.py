"""The package's layers, read from the source with `ast` (nothing is imported): which package
may import which, what the pure core may not touch, who handles protobuf, and how big a
module or a class may grow. Each package's `__init__` docstring says what it may import;
`LAYERS` below says the same, and a test keeps the two in step."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Iterator, NamedTuple

import pytest

from paths import REPO

PACKAGE = REPO / "rendezvous"
MAX_MODULE_LINES = 450
MAX_CLASS_LINES = 300
MAX_TOP_LEVEL_MODULES = 5

ADAPTERS = frozenset({"config", "coordinator", "discovery", "host", "launch", "observe"})
#: A unit is a subpackage, or one module of the top level ("rendezvous" is its __init__).
UNITS = frozenset({"rendezvous", "__main__", "errors", "core", "daemon", "cli", "v1", "script"} | ADAPTERS)

#: The units each unit may import besides itself.
LAYERS: dict[str, frozenset[str]] = {
    "core": frozenset({"errors"}),
    "config": frozenset({"core", "errors"}),
    "host": frozenset({"core", "config", "errors"}),
    "launch": frozenset({"core", "config", "host", "errors"}),
    "observe": frozenset({"core", "config", "errors"}),
    "coordinator": UNITS - {"daemon", "cli", "__main__"},
    "discovery": UNITS - {"daemon", "cli", "__main__", "v1"},
    "daemon": UNITS - {"cli", "__main__", "v1"},
    "cli": UNITS - {"__main__", "v1"},
    # protoc's output (protos/rendezvous/v1): it imports only itself, protobuf and grpc
    "v1": frozenset(),
    "errors": frozenset(),
    "rendezvous": frozenset({"errors"}),
    "__main__": UNITS - {"v1"},
    # what training scripts import: the standard library only, so that it loads in milliseconds
    # beside TensorFlow (tests/unit/script checks what importing it loads)
    "script": frozenset(),
}
#: The only units that may touch protobuf, its generated messages included.
PROTOBUF_UNITS = frozenset({"coordinator", "v1"})
GENERATED = frozenset({"v1"})  # no size limits: its size is protoc's
#: Modules that run as bare scripts: nothing of the package may load in them.
SCRIPTS = frozenset({"rendezvous/launch/gate.py", "rendezvous/launch/_warm.py"})

#: The standard library the core may not use: sockets, clocks, processes, threads, asyncio.
CORE_FORBIDDEN = frozenset({
    "asyncio", "socket", "socketserver", "ssl", "select", "selectors", "time", "datetime",
    "subprocess", "threading", "multiprocessing", "signal",
})
#: The standard library's private modules under other Pythons' names (core/digest.py
#: tries CPython 3.12's `_sha2`, then 3.10/3.11's `_sha256`).
OTHER_PYTHONS_STDLIB = frozenset({"_sha2", "_sha256"})
ENVIRONMENT_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})


class Violation(NamedTuple):
    path: str  # relative to the repository, e.g. rendezvous/core/round.py
    rule: str
    detail: str  # the imported module, the class, or "" for the module itself
    message: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.path, self.rule, self.detail


def unit_of_module(name: str) -> str:
    parts = name.split(".")
    return "rendezvous" if len(parts) == 1 else parts[1]


def unit_of_path(path: str) -> str:
    parts = Path(path).with_suffix("").parts  # ("rendezvous", ...)
    if len(parts) == 2:
        return "rendezvous" if parts[1] == "__init__" else parts[1]
    return parts[1]


def module_name(path: str) -> str:
    parts = list(Path(path).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST, guarded: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node with whether it only runs for a type checker (`if TYPE_CHECKING:`)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _type_checking(child.test):
            yield child, guarded
            for node in child.body:
                yield node, True
                yield from _statements(node, True)
            for node in child.orelse:
                yield node, guarded
                yield from _statements(node, guarded)
            continue
        yield child, guarded
        yield from _statements(child, guarded)


def imports(path: str, tree: ast.AST, known: frozenset[str]) -> Iterator[tuple[int, str, bool]]:
    """(line, absolute module name, only for a type checker) of every import in a module,
    relative ones resolved, `importlib.import_module("...")` and `__import__("...")` included;
    `from package import submodule` gives the submodule too (`known` names the modules)."""
    package = module_name(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    for node, guarded in _statements(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, guarded
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            yield node.lineno, name, guarded
            for alias in node.names:
                if f"{name}.{alias.name}" in known:
                    yield node.lineno, f"{name}.{alias.name}", guarded
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value, guarded


def _environment_reads(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES:
            yield node.lineno, node.attr
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            for alias in node.names:
                if alias.name in ENVIRONMENT_NAMES:
                    yield node.lineno, alias.name


def check_module(path: str, source: str, known: frozenset[str] = frozenset()) -> list[Violation]:
    """Every rule `path` (relative to the repository) breaks with this source."""
    found: list[Violation] = []

    def flag(rule: str, detail: str, line: int, why: str) -> None:
        found.append(Violation(path, rule, detail, f"{path}:{line}: {why}"))

    unit = unit_of_path(path)
    if unit not in LAYERS:
        flag("no-layer", "", 1, f"{unit!r} is in no layer: give it a row in LAYERS and a docstring "
             "in its __init__ saying what it may import")
        return found
    tree = ast.parse(source, path)
    allowed = LAYERS[unit] | {unit}
    for line, name, guarded in imports(path, tree, known):
        top = name.split(".")[0]
        if top == "rendezvous":
            if path in SCRIPTS:
                flag("script", name, line, f"imports {name}: it runs as a bare script, "
                     "nothing of the package may load in it")
            elif unit_of_module(name) not in allowed:
                flag("import", name, line, f"{unit} imports {name}; it may import "
                     f"{', '.join(sorted(LAYERS[unit])) or 'only itself'}")
        elif (name == "google.protobuf" or name.startswith("google.protobuf.")) \
                and unit not in PROTOBUF_UNITS:
            flag("protobuf", name, line, f"{unit} imports {name}: only "
                 f"{', '.join(sorted(PROTOBUF_UNITS))} may touch protobuf")
        elif unit == "core" and top in CORE_FORBIDDEN:
            flag("core-io", name, line, f"the core imports {name}: it opens no socket, reads "
                 "no clock, starts nothing and does not touch asyncio")
        elif unit == "core" and not guarded and name != "__future__" and \
                top not in sys.stdlib_module_names and top not in OTHER_PYTHONS_STDLIB:
            flag("core-library", name, line, f"the core imports {name}: it uses the standard "
                 "library only")
    if unit == "core":
        for line, name in _environment_reads(tree):
            flag("environment", name, line, f"the core reads the environment ({name}): pass "
                 "the value in")
    if unit not in GENERATED:
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            flag("module-size", "", 1, f"{lines} lines, more than {MAX_MODULE_LINES}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    flag("class-size", node.name, node.lineno,
                         f"class {node.name} is {size} lines, more than {MAX_CLASS_LINES}")
    return found


def check_tree(sources: dict[str, str]) -> list[Violation]:
    """Every rule the package breaks, given each module's source by its repository path."""
    known = frozenset(module_name(path) for path in sources)
    found = [v for path, source in sorted(sources.items()) for v in check_module(path, source, known)]
    top = sorted(path for path in sources if len(Path(path).parts) == 2)
    if len(top) > MAX_TOP_LEVEL_MODULES:
        found.append(Violation("rendezvous", "top-level", "", f"rendezvous/ holds {len(top)} modules "
                               f"({', '.join(top)}), more than {MAX_TOP_LEVEL_MODULES}: the top level "
                               "keeps the entry points and the error tree, the rest goes in a layer"))
    return found


def package_sources() -> dict[str, str]:
    return {path.relative_to(REPO).as_posix(): path.read_text()
            for path in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in path.parts}


#: Rules today's code may break while a change under way removes the cause, each with its
#: reason; test_every_known_exception_is_still_needed fails once a cause is gone, so that
#: its line here goes too. None today.
KNOWN: dict[tuple[str, str, str], str] = {}


def test_the_package_keeps_its_layers():
    broken = [v for v in check_tree(package_sources()) if v.key not in KNOWN]
    assert not broken, "\n".join(v.message for v in broken)


def test_every_known_exception_is_still_needed():
    """An exception whose cause is gone must leave KNOWN, so none outlives its reason."""
    found = {v.key for v in check_tree(package_sources())}
    stale = [key for key in KNOWN if key not in found]
    assert not stale, f"no longer needed, remove from KNOWN: {stale}"


def _may_import(docstring: str) -> tuple[set[str], set[str]] | None:
    """The units a package's docstring allows ("May import: `rendezvous.x`, ...") and those it
    forbids ("never `x` or `y`"), or None when it says neither."""
    allowed = re.search(r"May import:(.*?)(?:;|\.\s|\.$)", docstring, re.S)
    never = re.search(r"never ((?:`\w+`(?:,\s*|\s+or\s+)?)+)", docstring)
    if allowed is None and never is None:
        return None
    named = {unit_of_module(name) for name in re.findall(r"`([\w.]+)`", allowed.group(1))} \
        if allowed else set()
    return named, set(re.findall(r"`(\w+)`", never.group(1))) if never else set()


@pytest.mark.parametrize("unit", sorted(UNITS - {"rendezvous", "__main__", "errors", "v1"}))
def test_each_package_docstring_says_what_the_rules_say(unit):
    docstring = " ".join((ast.get_docstring(ast.parse((PACKAGE / unit / "__init__.py").read_text()))
                          or "").split())
    said = _may_import(docstring)
    if unit == "daemon":
        assert "only `cli` imports this package" in docstring
        assert {u for u, may in LAYERS.items() if "daemon" in may and u != "daemon"} == {"cli", "__main__"}
        return
    if unit == "cli":
        assert "it may import everything, nothing imports it" in docstring
        assert {u for u, may in LAYERS.items() if "cli" in may and u != "cli"} == {"__main__"}
        assert LAYERS["cli"] == UNITS - {"__main__", "v1"}  # protobuf stays in coordinator
        return
    if said is None:
        assert unit in ("coordinator", "discovery")  # bound by the adapters' rule only
        assert not LAYERS[unit] & {"daemon", "cli"}
        return
    allowed, never = said
    if allowed:
        assert allowed - {unit} == set(LAYERS[unit]), docstring
    assert not never & LAYERS[unit], docstring


def test_every_subpackage_is_a_unit():
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages <= UNITS


# The checker itself: each rule flags a module made to break it.

KNOWN_MODULES = frozenset({"rendezvous", "rendezvous.daemon", "rendezvous.daemon.node", "rendezvous.cli"})
CLASS_TOO_BIG = "class Big:\n" + "    x = 1\n" * MAX_CLASS_LINES


@pytest.mark.parametrize("path, source, rule, detail", [
    ("rendezvous/core/x.py", "import asyncio\n", "core-io", "asyncio"),
    ("rendezvous/core/x.py", "from time import monotonic\n", "core-io", "time"),
    ("rendezvous/core/x.py", "def f():\n    import socket\n", "core-io", "socket"),
    ("rendezvous/core/x.py", "import grpc\n", "core-library", "grpc"),
    ("rendezvous/core/x.py", "from zeroconf import Zeroconf\n", "core-library", "zeroconf"),
    ("rendezvous/core/x.py", "import os\nA = os.environ['A']\n", "environment", "environ"),
    ("rendezvous/core/x.py", "import os\nA = os.getenv('A')\n", "environment", "getenv"),
    ("rendezvous/core/x.py", "from os import environ\n", "environment", "environ"),
    ("rendezvous/core/x.py", "from ..daemon import node\n", "import", "rendezvous.daemon"),
    ("rendezvous/core/x.py", "from ..config.options import Timings\n", "import",
     "rendezvous.config.options"),
    ("rendezvous/core/x.py", "from google.protobuf import message\n", "protobuf",
     "google.protobuf"),
    ("rendezvous/config/x.py", "from ..host import ports\n", "import", "rendezvous.host"),
    ("rendezvous/host/x.py", "from rendezvous.cli.main import main\n", "import", "rendezvous.cli.main"),
    ("rendezvous/host/x.py", "from .. import daemon\n", "import", "rendezvous.daemon"),
    ("rendezvous/observe/__init__.py", "from ..daemon.node import Node\n", "import",
     "rendezvous.daemon.node"),
    ("rendezvous/launch/x.py", "from ..observe import notify\n", "import", "rendezvous.observe"),
    ("rendezvous/discovery/x.py", "from ..v1 import rendezvous_pb2\n", "import", "rendezvous.v1"),
    ("rendezvous/observe/x.py", "import google.protobuf.message\n", "protobuf",
     "google.protobuf.message"),
    ("rendezvous/coordinator/x.py", "import importlib\nimportlib.import_module('rendezvous.daemon')\n",
     "import", "rendezvous.daemon"),
    ("rendezvous/cli/x.py", "from ..v1 import rendezvous_pb2\n", "import", "rendezvous.v1"),
    ("rendezvous/launch/gate.py", "from ..core import peer\n", "script", "rendezvous.core"),
    ("rendezvous/script/x.py", "from ..core.progress import Progress\n", "import", "rendezvous.core.progress"),
    ("rendezvous/script/x.py", "from .. import errors\n", "import", "rendezvous"),
    ("rendezvous/core/x.py", "x = 1\n" * (MAX_MODULE_LINES + 1), "module-size", ""),
    ("rendezvous/core/x.py", CLASS_TOO_BIG, "class-size", "Big"),
    ("rendezvous/plugins/x.py", "", "no-layer", ""),
])
def test_the_checker_flags_a_module_that_breaks_a_rule(path, source, rule, detail):
    assert (path, rule, detail) in {v.key for v in check_module(path, source, KNOWN_MODULES)}


@pytest.mark.parametrize("path, source", [
    ("rendezvous/core/x.py", "from __future__ import annotations\nimport json, re\n"
     "from ..errors import ConfigError\nfrom .peer import Peer\n"),
    ("rendezvous/core/x.py", "from typing import TYPE_CHECKING\n"
     "if TYPE_CHECKING:\n    from typing_extensions import dataclass_transform\n"),
    ("rendezvous/core/x.py", "class Fits:\n" + "    x = 1\n" * (MAX_CLASS_LINES - 1)
     + "x = 1\n" * (MAX_MODULE_LINES - MAX_CLASS_LINES)),
    ("rendezvous/coordinator/x.py", "from google.protobuf import message\nfrom ..v1 import a\n"),
    ("rendezvous/daemon/x.py", "import asyncio, time, os\nos.environ.get('A')\nfrom ..host import ports\n"),
    ("rendezvous/v1/x_pb2.py", "from google.protobuf import descriptor\n" + CLASS_TOO_BIG * 2),
])
def test_the_checker_passes_a_module_that_keeps_the_rules(path, source):
    assert check_module(path, source, KNOWN_MODULES) == []


def test_the_checker_flags_a_crowded_top_level():
    sources = {f"rendezvous/{name}.py": "" for name in ("__init__", "__main__", "errors")}
    assert not check_tree(sources)
    sources.update({f"rendezvous/{name}.py": "" for name in ("a", "b", "c")})
    assert "top-level" in {v.rule for v in check_tree(sources)}
