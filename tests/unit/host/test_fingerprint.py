"""Tests of rendezvous.host.fingerprint: the interpreter a command runs, its versions read by a
real subprocess from package metadata, GPUs from a fake nvidia-smi, file digests."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_tools import fake_nvidia_smi, fake_tensorflow
from rendezvous.config.join import JoinConfig
from rendezvous.host.fingerprint import (
    command_interpreter, file_digest, list_gpus, probe_interpreter, take_fingerprint, visible_gpus,
)


@pytest.mark.parametrize("command, python, expected", [
    (["python3", "train.py"], None, "python3"),
    (["/opt/venv/bin/python3.11", "-m", "trainer"], None, "/opt/venv/bin/python3.11"),
    (["/usr/bin/env", "FOO=1", "python", "train.py"], None, "python"),
    (["python3", "train.py"], "/srv/py/bin/python", "/srv/py/bin/python"),
    (["sh", "-c", "true"], None, sys.executable),
    (["./no-such-script"], None, sys.executable),
    ([], None, sys.executable),
])
def test_the_commands_interpreter(command, python, expected):
    assert command_interpreter(command, python) == expected


@pytest.mark.parametrize("shebang", ["#!/opt/venv/bin/python3", "#!/usr/bin/env python3"])
def test_a_script_is_run_by_the_python_its_shebang_names(tmp_path, shebang):
    script = tmp_path / "train"
    script.write_text(f"{shebang}\nprint('hi')\n")
    assert command_interpreter([str(script)], None) == shebang[2:].split()[-1]
    other = tmp_path / "run.sh"
    other.write_text("#!/bin/sh\ntrue\n")
    assert command_interpreter([str(other)], None) == sys.executable


def test_the_tensorflow_version_comes_from_package_metadata_on_the_interpreters_path(tmp_path, monkeypatch):
    site = fake_tensorflow(tmp_path / "site", "2.20.1")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    wrapper = tmp_path / "python"  # another interpreter: asked in a subprocess
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    python, tensorflow = probe_interpreter(str(wrapper))
    assert python == ".".join(map(str, sys.version_info[:3]))
    assert tensorflow == "2.20.1"


def test_the_interpreter_running_rendezvous_is_read_without_a_subprocess(tmp_path, monkeypatch):
    site = fake_tensorflow(tmp_path / "site", "2.20.1")
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("started a probe"))
    assert probe_interpreter(sys.executable) == (".".join(map(str, sys.version_info[:3])), "2.20.1")


def test_other_tensorflow_distributions_count_too(tmp_path, monkeypatch):
    site = fake_tensorflow(tmp_path / "site", "2.19.0", "tensorflow-cpu")
    # -S: no site-packages, so the only TensorFlow is the fake one
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    assert probe_interpreter(str(wrapper))[1] == "2.19.0"


def test_egg_info_and_unrelated_tensorflow_packages(tmp_path):
    site = tmp_path / "site"
    for name in ("tensorflow_io_gcs_filesystem-0.37.1.dist-info", "tensorflow_estimator-2.15.0.dist-info",
                 "tensorflow-2.4.0-py3.8.egg-info"):
        (site / name).mkdir(parents=True)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    assert probe_interpreter(str(wrapper))[1] == "2.4.0"


def test_an_interpreter_without_tensorflow_has_none(tmp_path):
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH= exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    assert probe_interpreter(str(wrapper)) == (".".join(map(str, sys.version_info[:3])), None)


def test_an_interpreter_that_cannot_run_is_logged_not_fatal(tmp_path, caplog):
    assert probe_interpreter(str(tmp_path / "missing-python")) == ("unknown", None)
    assert "cannot read the Python and TensorFlow versions" in caplog.text


def test_gpus_come_from_nvidia_smi_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'bin', 4)}{os.pathsep}{os.environ['PATH']}")
    assert list_gpus() == ("NVIDIA H100 80GB HBM3",) * 4


def test_no_nvidia_smi_no_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert list_gpus() == ()


def test_a_failing_nvidia_smi_is_no_gpus(tmp_path, monkeypatch, caplog):
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert list_gpus() == ()
    assert "nvidia-smi did not list the GPUs" in caplog.text


def test_file_digest(tmp_path):
    path = tmp_path / "train.py"
    path.write_bytes(b"print('train')\n")
    assert file_digest(str(path)) == hashlib.sha256(b"print('train')\n").hexdigest()
    assert file_digest(str(tmp_path / "missing.py")) is None


def test_take_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'bin', 2, 'T4')}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    config = JoinConfig(expect=1, command=("sh", "-c", "true"), same_file=(str(script), "missing.py"))
    fingerprint = take_fingerprint(config)
    assert fingerprint.gpus == ("T4", "T4")
    assert fingerprint.files == {str(script): hashlib.sha256(b"pass\n").hexdigest(), "missing.py": None}
    assert fingerprint.python == ".".join(map(str, sys.version_info[:3]))


def hanging(path: Path) -> Path:
    """An executable that never answers (`exec`, so that killing it on the timeout ends it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexec sleep 3600\n")
    path.chmod(0o755)
    return path


def test_the_probes_give_up_after_the_configs_probe_timeout(tmp_path, monkeypatch, caplog):
    """A hanging interpreter and nvidia-smi hold the startup for timings.probe_timeout, not a
    constant: with it shrunk, the fingerprint is taken long before the default would allow."""
    from rendezvous.config.timings import Timings

    python = hanging(tmp_path / "python3")
    hanging(tmp_path / "bin" / "nvidia-smi")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    config = JoinConfig(expect=1, command=(str(python), "train.py"), timings=Timings(probe_timeout=0.2))
    started = time.monotonic()
    fingerprint = take_fingerprint(config)
    assert time.monotonic() - started < Timings().probe_timeout
    assert (fingerprint.python, fingerprint.tensorflow, fingerprint.gpus) == ("unknown", None, ())
    assert "cannot read the Python and TensorFlow versions" in caplog.text
    assert "nvidia-smi did not list the GPUs" in caplog.text


# -- --gpus: the GPUs the command can see ---------------------------------------------------


def test_visible_gpus_are_indices_and_models_narrowed_by_cuda_visible_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'bin', 8, 'A100')}{os.pathsep}{os.environ['PATH']}")
    assert visible_gpus() == (("A100",) * 8, tuple("01234567"))
    assert visible_gpus(inherited="6,2") == (("A100",) * 2, ("6", "2"))
    assert visible_gpus(inherited="") == ((), ())
    assert visible_gpus(inherited="1,12,3") == (("A100",), ("1",))


def test_uuids_in_cuda_visible_devices_find_their_model(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'bin', 2, 'T4', uuids=True)}{os.pathsep}{os.environ['PATH']}")
    assert list_gpus() == ("T4", "T4")
    assert visible_gpus(inherited="GPU-00000001") == (("T4",), ("GPU-00000001",))
    assert visible_gpus(inherited="GPU-ffff") == (("unknown",), ("GPU-ffff",))


def test_the_fingerprint_holds_the_devices_and_the_gpus_option(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{fake_nvidia_smi(tmp_path / 'bin', 4, 'T4')}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1,2")
    fingerprint = take_fingerprint(JoinConfig(expect=1, command=("sh", "-c", "true"), gpus="MIN"))
    assert (fingerprint.gpus, fingerprint.gpu_ids, fingerprint.gpu_option) == (("T4",) * 3, ("3", "1", "2"), "min")
    assert fingerprint.data_interface == ""  # the daemon adds it once it has chosen the data address
