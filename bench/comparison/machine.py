"""The machine and the software a result was measured on. Versions come from the installed
distributions' metadata: nothing here imports torch or TensorFlow."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]

#: (shown as, distributions to try in order)
PACKAGES = (
    ("python", ()),
    ("rendezvous", ("tf-rendezvous",)),
    ("torch", ("torch",)),
    ("tensorflow", ("tensorflow-cpu", "tensorflow")),
    ("grpcio", ("grpcio",)),
    ("zeroconf", ("zeroconf",)),
)


def first_line_value(text: str, key: str) -> Optional[str]:
    """`model name : X` -> 'X' for the first line whose key is `key` (/proc/cpuinfo, meminfo)."""
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def describe_machine() -> dict:
    mem_kib = first_line_value(_read("/proc/meminfo"), "MemTotal")
    mem_gib = round(int(mem_kib.split()[0]) / 2**20, 1) if mem_kib else None
    return {
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "kernel": platform.release(),
        "cpu": first_line_value(_read("/proc/cpuinfo"), "model name") or platform.processor() or "unknown",
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def git_revision() -> Optional[str]:
    """The checked-out commit, with '+dirty' when tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (head + ("+dirty" if dirty else "")) if head else None


def versions() -> dict:
    found: dict[str, Optional[str]] = {}
    for shown, dists in PACKAGES:
        if shown == "python":
            found[shown] = platform.python_version()
            continue
        found[shown] = None
        for dist in dists:
            try:
                version = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
            found[shown] = version if dist == dists[-1] or len(dists) == 1 else f"{version} ({dist})"
            break
    revision = git_revision()
    if revision:  # the agents run the checkout's code (`python -m rendezvous` from it)
        found["rendezvous"] = f"{found['rendezvous'] or 'not installed, the checkout'} (git {revision})"
    return found
