"""--prewarm: which commands can start warm, and the interpreter that waits for them.

A command is a Python interpreter running a script or a module (`python train.py ...`,
`python3 -u -m trainer ...`), or a script whose `#!` line names one (a venv's console
script, such as the bundled trainer's). For such a command the gate starts the same
interpreter, with the same options, early: `<python> <options> -c <bootstrap> ...`
(rendezvous/launch/_warm.py). It imports the --prewarm modules and waits; at the release
the gate sends it the round's environment and it runs the script or module as `__main__`.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Optional, Sequence

from ..core.record import record

AUTO_MODULES = ("tensorflow",)  # the default, imported only where the interpreter finds it
# The bundled trainer's default: its own modules (its choice of Keras sets TF_USE_LEGACY_KERAS
# and TF_CPP_MIN_LOG_LEVEL before it imports TensorFlow) and scikit-learn's digits loader,
# none of which runs a TensorFlow op when imported.
TRAINER_MODULES = ("trainer._keras", "trainer.train", "trainer.cli", "sklearn.datasets")
BOOTSTRAP = (Path(__file__).with_name("_warm.py")).read_text()

_PYTHON_NAME = re.compile(r"python[0-9.]*")
# Python's options that take a value (`-W error`, `-Wdefault`); `-c` and `-m` end the options.
_WITH_VALUE = frozenset("WX")
_LONG_WITH_VALUE = frozenset({"--check-hash-based-pycs"})  # `--check-hash-based-pycs=always` is one word
_LONG_FLAGS = frozenset({"--help-env", "--help-xoptions", "--help-all"})


@record
class WarmPlan:
    """How a command starts warm: `interpreter` (the python and its options, from the
    command or its `#!` line), `mode` ("file" or "module"), `target` (the script's path or
    the module's name), `rest` (the index in the command of the first argument after the
    script or module: sys.argv[1:]) and `shown` (the command line `ps` shows for the plain
    start)."""

    interpreter: tuple[str, ...]
    mode: str
    target: str
    rest: int
    shown: tuple[str, ...]

    def argv(self, modules: Sequence[str], optional: bool, release: str, status: str, gate: str,
             low: bool = False) -> list[str]:
        """The warm interpreter's command line: the bootstrap with its arguments, then the
        shown command line, whose room in memory the bootstrap writes that line over. `low`:
        a spare, which imports at the lowest CPU and I/O priority until the round waits for it."""
        wanted = ",".join(("?" + m if optional else m) for m in modules)
        return [*self.interpreter, "-c", BOOTSTRAP, release, status, gate, str(int(low)),
                self.mode, self.target, str(self.rest), wanted, *self.shown]


def is_python(word: str) -> bool:
    return bool(_PYTHON_NAME.fullmatch(os.path.basename(word)))


def _split_options(words: Sequence[str]) -> Optional[tuple[list[str], str, str, int]]:
    """In `words` (a python's arguments, after the interpreter): (the options, mode, target,
    index of the first argument after the script or module), or None for `-c`, `-`, stdin,
    `--help` and the like."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            i += 1
            break
        if word.startswith("--"):
            if word in _LONG_FLAGS:
                return None
            i += 2 if word in _LONG_WITH_VALUE else 1
            continue
        if word == "-" or not word.startswith("-"):
            break
        for j, letter in enumerate(word[1:], 1):
            if letter == "c":
                return None
            if letter == "m":
                options = list(words[:i]) + (["-" + word[1:j]] if j > 1 else [])
                name = word[j + 1:]
                if name:
                    return options, "module", name, i + 1
                return (options, "module", words[i + 1], i + 2) if i + 1 < len(words) else None
            if letter in _WITH_VALUE:
                if j == len(word) - 1:
                    i += 1  # the value is the next word
                break
        i += 1
    if i >= len(words) or words[i] == "-":
        return None
    return list(words[:i]), "file", words[i], i + 1


def _shebang(path: str) -> Optional[tuple[str, ...]]:
    """The python (and its one option, if any) that a script's `#!` line names."""
    try:
        with open(path, "rb") as script:
            first = script.readline(512)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env" and len(words) == 2 and is_python(words[1]):
        return tuple(words)
    if words and is_python(words[0]) and len(words) <= 2:
        return tuple(words)
    return None


def plan(command: Sequence[str]) -> Optional[WarmPlan]:
    """How `command` starts warm, or None when it cannot (not a Python running a script or
    a module)."""
    if not command:
        return None
    if is_python(command[0]):
        found = _split_options(command[1:])
        if found is None:
            return None
        options, mode, target, rest = found
        return WarmPlan((command[0], *options), mode, target, rest + 1, tuple(command))
    script = command[0] if os.sep in command[0] else shutil.which(command[0])
    interpreter = _shebang(script) if script else None
    if interpreter is None or script is None:
        return None
    # the kernel runs `#!` scripts as `<interpreter> [<its argument>] <script path> args...`
    return WarmPlan(interpreter, "file", script, 1, interpreter + (script,) + tuple(command[1:]))


def modules_for(prewarm: Optional[str], command: Sequence[str] = ()) -> tuple[tuple[str, ...], bool]:
    """--prewarm's modules for `command`, and whether they are optional (the default's:
    imported only when the interpreter finds them). `none`: nothing, the plain start."""
    if prewarm is None or prewarm == "auto":
        found = plan(command) if command else None
        if found is not None and found.mode == "module" and found.target == "trainer":
            return TRAINER_MODULES, True
        return AUTO_MODULES, True
    if prewarm == "none":
        return (), False
    return tuple(m.strip() for m in prewarm.split(",") if m.strip()), False
