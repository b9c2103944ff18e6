"""The package as published: its metadata, its long description, and a daemon-only install of
the built wheel in a fresh virtualenv on every supported Python on this machine."""

from __future__ import annotations

import email.parser
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from peers import start_peer
from rendezvous import __version__
from rendezvous.config._compat import tomllib
from paths import REPO

ROOT = REPO
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def copy_project(dest: Path) -> Path:
    """What a build reads, without the checkout's virtualenvs and caches."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    for package in ("rendezvous", "trainer"):
        shutil.copytree(ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def supported_pythons() -> list[tuple[str, str]]:
    """(version, path) of every supported Python that scripts/setup can find here, and this one."""
    found = subprocess.run([ROOT / "scripts" / "pythons"], capture_output=True, text=True, check=True)
    pythons = [tuple(line.split(" ", 1)) for line in found.stdout.splitlines()]
    this = "%d.%d" % sys.version_info[:2]
    if this not in {version for version, _ in pythons}:
        pythons.append((this, getattr(sys, "_base_executable", sys.executable)))
    return pythons


def test_metadata_builds_without_deprecation_warnings(tmp_path):
    import setuptools  # the test extra installs one new enough to build this project

    assert int(setuptools.__version__.split(".")[0]) >= 77, setuptools.__version__
    project = copy_project(tmp_path / "project")
    out = tmp_path / "metadata"
    out.mkdir()
    code = (
        "import sys; from setuptools import build_meta; "
        "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code, str(out)],
        cwd=project, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "deprecated" not in result.stderr.lower(), result.stderr
    metadata = (out / result.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()


def test_classifiers_name_the_pythons_that_setup_looks_for():
    setup_looks_for = re.search(r'^supported="([^"]*)"', (ROOT / "scripts" / "pythons").read_text(), re.M)
    classified = [
        c.rsplit(" :: ", 1)[1] for c in PYPROJECT["project"]["classifiers"]
        if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert classified == ["3.10", "3.11", "3.12", "3.13"]
    assert setup_looks_for[1].split() == classified[::-1]
    assert PYPROJECT["project"]["requires-python"] == f">={classified[0]}"


# ------------------------------------------------------------------------------------------
# The built distributions (python -m build, as for publishing)
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dist")
    project = copy_project(root / "project")
    out = root / "dist"
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(project)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    [path] = dist.glob("*.whl")
    return path


@pytest.mark.install
def test_long_description_renders_on_the_package_index(dist):
    files = sorted(str(p) for p in dist.iterdir())
    assert [Path(f).name for f in files] == [
        f"tf_rendezvous-{__version__}-py3-none-any.whl", f"tf_rendezvous-{__version__}.tar.gz"
    ]
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


@pytest.mark.install
def test_wheel_metadata(wheel):
    with zipfile.ZipFile(wheel) as zf:
        info = f"tf_rendezvous-{__version__}.dist-info"
        metadata = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
        top_level = {name.split("/")[0] for name in zf.namelist() if not name.startswith(info)}
    assert metadata["Name"] == "tf-rendezvous"
    assert metadata["Version"] == __version__
    assert metadata["Requires-Python"] == ">=3.10"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert sorted(metadata.get_all("Provides-Extra")) == ["bench", "docs", "test", "trainer"]
    requires = metadata.get_all("Requires-Dist")
    assert 'tensorflow==2.21.*; extra == "trainer"' in requires
    assert 'zeroconf==0.154.*; python_version >= "3.11"' in requires
    assert 'tomli==2.*; python_version < "3.11"' in requires
    assert "Homepage, https://github.com/tf-rendezvous/tf-rendezvous" in metadata.get_all("Project-URL")
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "rendezvous = rendezvous.__main__:main" in entry_points
    assert top_level == {"rendezvous", "trainer"}


# ------------------------------------------------------------------------------------------
# A daemon-only install of the wheel on each Python
#
# These run once for each supported Python that scripts/setup finds on this machine (the ids
# name them), and never skip: a Python that is absent has no test at all, rather than a skipped
# one that reads as a pass. scripts/setup says which Pythons it found; on the project's
# machines that is 3.10 to 3.13.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=supported_pythons(), ids=lambda p: p[0])
def installed(request, wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv on one Python with the wheel alone (no extras): its bin directory."""
    version, python = request.param
    venv = tmp_path_factory.mktemp(f"venv-py{version}")
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    result = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return venv / "bin"


def without_pythonpath(env) -> dict[str, str]:
    """The installed packages, not the checkout's (the commands also run outside it)."""
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}


def run_installed(argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=without_pythonpath(os.environ), capture_output=True, text=True, timeout=60)


@pytest.mark.install
def test_installed_command_prints_its_version(installed, tmp_path):
    result = run_installed([installed / "rendezvous", "--version"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"rendezvous {__version__}"


@pytest.mark.install
def test_installed_daemon_runs_a_two_peer_job_on_loopback(installed, tmp_path):
    job = f"t-{secrets.token_hex(4)}"
    out = tmp_path / "out"
    out.mkdir()
    record = 'printf "%s\\n" "$TF_CONFIG" > "$0/$RENDEZVOUS_RANK"'
    peers = [
        start_peer(
            [installed / "rendezvous", "join", "--expect", "2", "--job", job, "--address", address,
             "--timeout", "40", "--", "sh", "-c", record, str(out)],
            tmp_path, f"peer-{address}",
            popen=lambda argv, env, **kw: subprocess.Popen(argv, env=without_pythonpath(env), cwd=tmp_path, **kw),
        )
        for address in ("127.0.0.3", "127.0.0.2")
    ]
    for peer in peers:
        assert peer.wait() == 0, peer.log
    configs = [json.loads((out / rank).read_text()) for rank in ("0", "1")]
    assert configs[0]["cluster"] == configs[1]["cluster"]
    assert [w.split(":")[0] for w in configs[0]["cluster"]["worker"]] == ["127.0.0.2", "127.0.0.3"]
    assert [c["task"]["index"] for c in configs] == [0, 1]


@pytest.mark.install
def test_trainer_without_its_extra_names_the_package_to_install(installed, tmp_path):
    result = run_installed([installed / "python", "-m", "trainer", "--epochs", "1"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "is not installed" in result.stderr
    assert "pip install 'tf-rendezvous[trainer]'" in result.stderr
    assert "pip install '.[trainer]' from a checkout" in result.stderr
