"""rendezvous.cli.deferred: a deferred module runs at the first read of one of its attributes,
once, and is then the module every importer sees."""

from __future__ import annotations

import importlib
import sys
import threading

import pytest

from rendezvous.cli import deferred


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `pkg_<test>` with a module `mod` that counts its runs in `RUNS`, and a
    top-level module `top_<test>` that does the same."""
    name = f"pkg_{tmp_path.name.replace('-', '_')}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    counter = "import builtins\nbuiltins.RUNS = getattr(builtins, 'RUNS', 0) + 1\nVALUE = 42\n"
    (tmp_path / name / "mod.py").write_text(counter)
    (tmp_path / f"top_{name}.py").write_text(counter)
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins

    monkeypatch.setattr(builtins, "RUNS", 0, raising=False)
    yield name
    for key in [key for key in sys.modules if name in key]:
        del sys.modules[key]


def runs() -> int:
    import builtins

    return builtins.RUNS


def test_importing_a_deferred_module_runs_nothing_until_an_attribute_is_read(package):
    deferred.defer(f"{package}.mod")
    parent = importlib.import_module(package)
    mod = importlib.import_module(f"{package}.mod")
    exec(f"from {package} import mod as again", {})
    assert runs() == 0
    assert mod.VALUE == 42
    assert runs() == 1
    assert mod.VALUE == 42 and runs() == 1
    real = sys.modules[f"{package}.mod"]
    assert real is not mod and real.VALUE == 42
    assert parent.mod is real  # later importers get the real module


def test_a_top_level_module_too(package):
    name = f"top_{package}"
    deferred.defer(name)
    module = importlib.import_module(name)
    assert runs() == 0
    assert "VALUE" in dir(module)
    assert runs() == 1


def test_an_imported_module_is_left_as_it_is(package):
    real = importlib.import_module(f"{package}.mod")
    deferred.defer(f"{package}.mod")
    assert sys.modules[f"{package}.mod"] is real
    assert runs() == 1


def test_a_missing_module_still_fails_where_it_is_imported(package):
    deferred.defer(f"{package}.missing")
    with pytest.raises(ModuleNotFoundError, match="missing"):
        importlib.import_module(f"{package}.missing")


def test_threads_reading_it_at_once_run_it_once(package):
    deferred.defer(f"{package}.mod")
    mod = importlib.import_module(f"{package}.mod")
    start = threading.Barrier(8)
    values = []

    def read():
        start.wait()
        values.append(mod.VALUE)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert values == [42] * 8
    assert runs() == 1
