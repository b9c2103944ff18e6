"""pyproject.toml: the license is an SPDX expression, so building the package prints no
setuptools deprecation banner."""

from __future__ import annotations

import shutil
import subprocess
import sys
from rendezvous._compat import tomllib
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_expression():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"


def test_the_build_needs_a_setuptools_that_reads_spdx_licenses():
    assert "setuptools>=77" in PYPROJECT["build-system"]["requires"]


def test_metadata_builds_without_deprecation_warnings(tmp_path):
    import setuptools  # the test extra installs one new enough to build this project

    assert int(setuptools.__version__.split(".")[0]) >= 77, setuptools.__version__
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for package in ("rendezvous", "trainer"):
        shutil.copytree(ROOT / package, project / package, ignore=shutil.ignore_patterns("__pycache__"))
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
