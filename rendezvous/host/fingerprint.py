"""Takes this node's `Fingerprint` for the preflight, once at startup.

The Python and TensorFlow versions are those of the interpreter the command runs: asked of
that interpreter in a small subprocess that reads the names of the installed packages'
metadata directories on its path, so that neither this daemon nor the probe imports
TensorFlow (seconds, and GPU initialisation). GPUs come from
`nvidia-smi` when it is on PATH, narrowed to the `CUDA_VISIBLE_DEVICES` this daemon has. Each `--same-file` is hashed here.

Nothing here fails the node: what cannot be read is logged and left out (or recorded as
unreadable), and the comparison at the freeze then names it.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from typing import Optional, Sequence

from ..config.join import JoinConfig
from ..config.timings import Timings
from ..core.digest import sha256
from ..core.gpus import VISIBLE, GpuPolicy, visible_devices
from ..core.preflight import Fingerprint

log = logging.getLogger(__name__)

# The distributions TensorFlow ships as; the first one found on the interpreter's path counts.
TENSORFLOW_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                            "tensorflow-macos", "tf-nightly")
# Reads the directory names of the installed distributions' metadata on a path
# (tensorflow-2.21.0.dist-info), as importlib.metadata would find them, without importing
# importlib.metadata: that import alone costs more than the interpreter's start. The same
# source runs here (for the interpreter running rendezvous) and in the probe (for another).
_FIND_TENSORFLOW = f"""
import os, re
_names = "|".join(n.replace("-", "[-_.]") for n in {TENSORFLOW_DISTRIBUTIONS!r})
_pattern = re.compile(r"(?:" + _names + r")-([^-]+?)(?:-py[0-9.]+)?\\.(?:dist|egg)-info", re.IGNORECASE)
def find_tensorflow(path):
    for entry in path:
        try:
            listed = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in listed:
            found = _pattern.fullmatch(name)
            if found:
                return found.group(1)
    return None
"""
_PROBE = _FIND_TENSORFLOW + """
import sys
print("%d.%d.%d" % sys.version_info[:3], find_tensorflow(sys.path) or "")
"""
_PYTHON_NAME = re.compile(r"python[0-9.]*")


def _is_python(word: str) -> bool:
    return bool(_PYTHON_NAME.fullmatch(os.path.basename(word)))


def _shebang_interpreter(path: str) -> Optional[str]:
    """The python a script names in its `#!` line (a console script of a venv), if any."""
    found = shutil.which(path) if os.sep not in path else path
    try:
        with open(found or path, "rb") as script:
            first = script.readline(512)
    except OSError:
        return None
    words = first[2:].decode(errors="replace").split() if first.startswith(b"#!") else []
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
    return words[0] if words and _is_python(words[0]) else None


def command_interpreter(command: Sequence[str], python: Optional[str]) -> str:
    """The interpreter `command` runs: `--python`, else its first word when that is a
    python (`/usr/bin/env python3 ...` too) or a script whose `#!` names one, else the one
    running rendezvous (the bundled trainer's)."""
    if python:
        return python
    words = list(command)
    if words and os.path.basename(words[0]) == "env":
        words = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
    if words and _is_python(words[0]):
        return words[0]
    return (_shebang_interpreter(words[0]) if words else None) or sys.executable


def find_tensorflow(path: Sequence[str]) -> Optional[str]:
    """The version of the first TensorFlow distribution installed on `path`, or None."""
    namespace: dict[str, object] = {}
    exec(_FIND_TENSORFLOW, namespace)
    return namespace["find_tensorflow"](path)  # type: ignore[operator]


def probe_interpreter(interpreter: str, timeout: float = Timings.probe_timeout) -> tuple[str, Optional[str]]:
    """(Python version, TensorFlow version or None) of `interpreter`, which runs with this
    daemon's environment, as the command will; ("unknown", None) if it cannot tell, or
    cannot within `timeout` (a slow disk or a hanging interpreter must not hold the startup).

    The interpreter running rendezvous is read here: the command inherits this process's
    environment, so it finds what this process finds on `sys.path` (another interpreter
    start would cost the daemon's startup 30-60 ms of CPU)."""
    if interpreter == sys.executable:
        return "%d.%d.%d" % sys.version_info[:3], find_tensorflow(sys.path)
    try:
        done = subprocess.run([interpreter, "-c", _PROBE], capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        python, _, tensorflow = done.stdout.strip().partition(" ")
        if done.returncode != 0 or not python:
            raise ValueError(done.stderr.strip() or f"exit status {done.returncode}")
        return python, tensorflow or None
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        log.warning("preflight: cannot read the Python and TensorFlow versions of %s: %s", interpreter, exc)
        return "unknown", None


def _read_gpus(timeout: float) -> list[tuple[str, str]]:
    """(model name, UUID or '') of every GPU of the machine, in nvidia-smi's index order;
    none without nvidia-smi, or if it takes longer than `timeout`."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        done = subprocess.run([smi, "--query-gpu=name,uuid", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("preflight: nvidia-smi did not list the GPUs: %s", exc)
        return []
    found = []
    for line in filter(None, (raw.strip() for raw in done.stdout.splitlines())):
        name, _, uuid = line.rpartition(",")
        found.append((name.strip(), uuid.strip()) if name and uuid.strip().startswith("GPU-") else (line, ""))
    return found


def visible_gpus(timeout: float = Timings.probe_timeout,
                 inherited: Optional[str] = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The GPUs this node's command can see: their model names, and their names in
    `CUDA_VISIBLE_DEVICES` (indices, or the entries of the `inherited` one)."""
    found = _read_gpus(timeout)
    devices = visible_devices(inherited, len(found))

    def model(entry: str) -> str:
        if entry.isdigit():
            return found[int(entry)][0]
        return next((name for name, uuid in found if uuid and uuid.startswith(entry)), "unknown")

    return tuple(model(d) for d in devices), devices


def list_gpus(timeout: float = Timings.probe_timeout) -> tuple[str, ...]:
    """One model name per GPU, from nvidia-smi; none without it, or if it takes longer than
    `timeout`."""
    return tuple(name for name, _ in _read_gpus(timeout))


def file_digest(path: str) -> Optional[str]:
    """The SHA-256 of a file's content in hex; None if it cannot be read."""
    hashed = sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                hashed.update(chunk)
    except OSError as exc:
        log.warning("preflight: cannot read --same-file %s: %s", path, exc.strerror or exc)
        return None
    return hashed.hexdigest()


def take_fingerprint(config: JoinConfig) -> Fingerprint:
    """This node's fingerprint; blocks (subprocesses, file reads): run it off the loop."""
    timeout = config.timings.probe_timeout
    python, tensorflow = probe_interpreter(command_interpreter(config.command, config.python), timeout)
    files = {path: file_digest(path) for path in config.same_file}
    models, devices = visible_gpus(timeout, os.environ.get(VISIBLE))
    fingerprint = Fingerprint(python=python, tensorflow=tensorflow, gpus=models, files=files, gpu_ids=devices,
                              gpu_option=GpuPolicy.parse(config.gpus).describe())
    log.debug("preflight: this node runs %s", fingerprint.describe())
    return fingerprint

