"""Modules that the daemon's libraries import and the daemon does not use, loaded on first use.

:func:`defer` puts a stand-in into ``sys.modules`` (and onto its package): ``import name``
and ``from package import name`` bind the stand-in without running the module, and the
first read of any of its attributes imports the real module, which every later read goes
to. What runs changes only in when it runs, never in what it does.

The `rendezvous` command's process defers (rendezvous.cli.startup):

- ``google.protobuf.internal.python_message``: protobuf's pure-Python message classes, which
  its descriptor pool and builder import even where its C implementation (upb) builds the
  messages; with them text_format, the pure-Python codec, pickle and their regular
  expressions, about 9 ms of a daemon's CPU before it is ready. Protobuf in pure-Python mode
  reads the module, and so loads it, when the first message class is built.
- ``ifaddr``: zeroconf imports it and reads it only for ``InterfaceChoice.All`` and IPv6
  interfaces; its import runs ``ldconfig -p`` and imports ``platform`` (about 7 ms). The
  daemon lists the machine's addresses itself (rendezvous.host.interfaces).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

_loading = threading.RLock()


class _Deferred(types.ModuleType):
    """The stand-in: an empty module whose missing attributes are the real module's."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(_load(self.__name__), attr)

    def __dir__(self) -> list[str]:
        return dir(_load(self.__name__))


def _load(name: str) -> types.ModuleType:
    with _loading:
        module = sys.modules.get(name)
        if module is None or isinstance(module, _Deferred):
            sys.modules.pop(name, None)
            module = importlib.import_module(name)  # also puts it onto its package
    return module


def defer(name: str) -> None:
    """Defer `name`'s import until an attribute of it is read; nothing if it is imported
    already or cannot be found (its import then fails where it is, as it would have)."""
    if name in sys.modules or importlib.util.find_spec(name) is None:
        return
    stand_in = _Deferred(name)
    package, _, child = name.rpartition(".")
    if package:
        setattr(importlib.import_module(package), child, stand_in)
    sys.modules[name] = stand_in
