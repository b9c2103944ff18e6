"""--output-dir never follows a symbolic link, at any level of DIR/<job> nor as a round's
file, and refuses a directory another user can write to, naming its owner: at the start (a
real Launcher fails before its command) and at each round (the link put there after the
start: the output goes to the terminal only, nothing is written through it)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from rendezvous.errors import ConfigError
from rendezvous.launch.launcher import Launcher
from rendezvous.launch.outdir import open_job_dir
from rendezvous.launch.output import OutputSettings, check_output_dir

NOBODY = 65534


def prepare(directory: Path, job: str = "j") -> None:
    async def scenario():
        await Launcher(output=OutputSettings(directory, job)).prepare(["true"])

    asyncio.run(scenario())


def run_round(directory: Path, job: str = "j", between=lambda: None):
    """One round's command through a real Launcher, `between` its start (which checks DIR)
    and the round: the file its output went to, or None."""

    async def scenario():
        launcher = Launcher(output=OutputSettings(directory, job, 1 << 20, 2))
        await launcher.arm(["sh", "-c", "echo written"], {})
        between()
        path = launcher.record_output(round=1, rank=0)
        launcher.fire(time.time())
        assert await launcher.wait() == 0
        return path

    return asyncio.run(scenario())


def test_a_job_directory_that_is_a_link_is_refused_at_the_start_and_nothing_is_written_through_it(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "j").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=r"out/j is a symbolic link, and --output-dir follows none"):
        prepare(tmp_path / "out")
    assert os.listdir(elsewhere) == []


def test_a_link_anywhere_in_dir_is_refused_naming_it(tmp_path):
    real = tmp_path / "real"
    (real / "deeper").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(ConfigError, match=r"/link is a symbolic link"):
        prepare(tmp_path / "link" / "deeper" / "out")
    with pytest.raises(OSError, match=r"/link is a symbolic link"):
        check_output_dir(tmp_path / "link", "j")
    assert not (real / "deeper" / "out").exists() and not (real / "j").exists()


def test_a_job_directory_swapped_for_a_link_after_the_start_gets_no_output(tmp_path, caplog):
    out = tmp_path / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def swap():
        (out / "j").rmdir()
        (out / "j").symlink_to(elsewhere)

    assert run_round(out, between=swap) is None
    assert os.listdir(elsewhere) == []
    assert "out/j is a symbolic link" in caplog.text and "goes to the terminal only" in caplog.text


def test_a_round_file_that_is_a_link_gets_no_output(tmp_path, caplog):
    out = tmp_path / "out"
    target = tmp_path / "target"
    target.write_text("kept")
    assert run_round(out, between=lambda: (out / "j" / "round-1.0.log").symlink_to(target)) is None
    assert target.read_text() == "kept"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_job_directory_of_another_user_that_anyone_can_write_is_refused_naming_its_owner(tmp_path):
    out = tmp_path / "out"
    (out / "j").mkdir(parents=True)
    os.chown(out / "j", NOBODY, NOBODY)
    os.chmod(out / "j", 0o777)
    with pytest.raises(ConfigError, match=rf"out/j is owned by \w+ \(uid {NOBODY}\) with mode 0777: another user "
                                          "can write to it"):
        prepare(out)
    assert os.listdir(out / "j") == []
    os.chmod(out / "j", 0o755)  # still another user's: they can write to it
    with pytest.raises(ConfigError, match=rf"owned by \w+ \(uid {NOBODY}\) with mode 0755"):
        prepare(out)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_job_directory_given_to_another_user_after_the_start_gets_no_output(tmp_path, caplog):
    out = tmp_path / "out"

    def give():
        os.chown(out / "j", NOBODY, NOBODY)
        os.chmod(out / "j", 0o777)

    assert run_round(out, between=give) is None
    assert os.listdir(out / "j") == []
    assert f"(uid {NOBODY}) with mode 0777" in caplog.text


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_an_output_dir_of_another_user_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, NOBODY, NOBODY)
    with pytest.raises(ConfigError, match=rf"out is owned by \w+ \(uid {NOBODY}\)"):
        prepare(out)
    assert not (out / "j").exists()


def test_a_group_or_world_writable_job_directory_is_refused_a_sticky_dir_is_not(tmp_path):
    out = tmp_path / "out"
    (out / "j").mkdir(parents=True)
    os.chmod(out / "j", 0o775)
    with pytest.raises(OSError, match=r"with mode 0775: another user can write to it"):
        check_output_dir(out, "j")
    os.chmod(out / "j", 0o755)
    os.chmod(out, 0o1777)  # as /tmp: nobody removes what is not theirs
    check_output_dir(out, "j")
    os.chmod(out, 0o777)
    with pytest.raises(OSError, match=r"with mode 0777"):
        check_output_dir(out, "j")


def test_the_job_directory_is_made_and_written_as_before(tmp_path):
    out = tmp_path / "a" / "b"
    fd = open_job_dir(out, "j")
    os.close(fd)
    assert (out / "j").is_dir()
    assert run_round(out) == str(out / "j" / "round-1.0.log")
    assert (out / "j" / "round-1.0.log").read_text() == "written\n"
