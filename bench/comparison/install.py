"""The programs the agents run, installed as users install them: a wheel of this checkout in
a venv of its own, started through the console scripts.

An editable install (`pip install -e`, what scripts/setup makes) runs setuptools' import hook
at every interpreter start: 24 ms of CPU on these machines, 8% of what a rendezvous agent uses
until its command starts and 1% of what a torchrun agent uses. A wheel's install runs none and
comes with its bytecode compiled. The venv sees the packages of the interpreter that runs the
benchmark (grpcio, torch, TensorFlow) through a .pth file of plain paths, which runs no code,
and torchrun's console script is written into it as well: both tools start the same way.
"""

from __future__ import annotations

import importlib.util
import site
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[2]

#: How the agents were installed, for the report's header.
INSTALLED_AS = ("rendezvous and torchrun started through their console scripts, from a venv holding a "
                "wheel of this checkout (as users install it, not the editable checkout)")


class InstallError(RuntimeError):
    """The checkout could not be installed; the message has pip's or venv's output."""


@dataclass(frozen=True)
class Programs:
    python: str  # the venv's interpreter (the trainer; restart_bench's nodes)
    rendezvous: str  # rendezvous's console script in the venv
    torchrun: Optional[str]  # torchrun's console script in the venv, or None ...
    torchrun_missing: Optional[str] = None  # ... and why


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise InstallError(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def install(workdir: Path) -> Programs:
    """Build and install this checkout into `workdir`/venv; offline, in a few seconds."""
    venv = workdir / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).strip())
    (purelib / "benchmark-packages.pth").write_text("".join(f"{path}\n" for path in site.getsitepackages()))
    # With setuptools at hand the wheel is built here, needing no package index.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
          "--disable-pip-version-check", *isolation, str(REPO)])
    torchrun, missing = _torchrun_script(python)
    return Programs(str(python), str(venv / "bin" / "rendezvous"), torchrun, missing)


def _torchrun_script(python: Path) -> tuple[Optional[str], Optional[str]]:
    """torchrun's console script, as pip would have written it into the venv."""
    if importlib.util.find_spec("torch") is None:
        return None, "torch is not installed (pip install -e '.[bench]' installs torch 2.13.0 CPU)"
    source = Path(sys.executable).with_name("torchrun")
    if not source.exists():
        return None, f"torch is installed but {source} is missing"
    _, body = source.read_text().split("\n", 1)
    target = python.with_name("torchrun")
    target.write_text(f"#!{python}\n{body}")
    target.chmod(0o755)
    return str(target), None
