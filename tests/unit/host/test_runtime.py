"""Daemon registrations for `rendezvous status`: where they go, what is trusted, cleanup."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from rendezvous.core.record import asdict
from pathlib import Path

import pytest

from rendezvous.host.runtime import (
    SYSTEM_DIRECTORY,
    Registration,
    candidate_directories,
    current_netns,
    find_registrations,
    live_registrations,
    parse_registration,
    pid_alive,
    process_state,
    register,
    remove_stale,
    unregister,
)

R = Registration(node_id="abcdef012345", pid=os.getpid(), job="resnet", endpoint="10.0.0.9:41234", netns=4026531840)


def test_directories_by_precedence():
    assert candidate_directories({"RENDEZVOUS_RUNTIME_DIR": "/x"}, 0) == [Path("/x")]
    assert candidate_directories({}, 0) == [SYSTEM_DIRECTORY, Path("/tmp/rendezvous-0")]
    # the unit's RuntimeDirectory=rendezvous: systemd sets RUNTIME_DIRECTORY for a non-root user
    assert candidate_directories({"RUNTIME_DIRECTORY": "/run/rendezvous"}, 998)[0] == Path("/run/rendezvous")
    assert candidate_directories({"RUNTIME_DIRECTORY": "/run/a:/run/b"}, 998)[0] == Path("/run/a")
    assert candidate_directories({"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000) == [
        Path("/run/user/1000/rendezvous"), Path("/tmp/rendezvous-1000"), SYSTEM_DIRECTORY,
    ]


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[]", "{}", json.dumps({**asdict(R), "pid": "x"}), json.dumps({**asdict(R), "pid": 0}),
     json.dumps({k: v for k, v in asdict(R).items() if k != "netns"})],
)
def test_junk_is_not_a_registration(text):
    assert parse_registration(text) is None


def test_register_find_unregister(tmp_path):
    directory = tmp_path / "run"
    path = register(R, [directory])
    assert path == directory / "abcdef012345.json"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    (directory / "junk.json").write_text("{")
    assert find_registrations([directory, tmp_path / "absent"]) == [R]
    unregister(path)
    unregister(path)  # twice is fine
    unregister(None)
    assert find_registrations([directory]) == []


def test_register_falls_through_to_the_next_directory(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert register(R, [blocked / "run", tmp_path / "ok"]) == tmp_path / "ok" / "abcdef012345.json"
    assert register(R, [blocked / "run"]) is None
    assert "`rendezvous status` will not find this daemon" in caplog.text


def test_only_live_daemons_of_this_network_namespace():
    other_ns = Registration("bbbbbbbbbbbb", os.getpid(), "j", "10.0.0.2:1", 1)
    dead = Registration("cccccccccccc", 999999999, "j", "10.0.0.3:1", R.netns)
    found = live_registrations([dead, other_ns, R], R.netns, lambda pid: pid != 999999999)
    assert found == [R]


def test_pid_alive_and_netns():
    assert pid_alive(os.getpid())
    assert not pid_alive(2**22 + 12345)
    assert current_netns() == os.stat("/proc/self/ns/net").st_ino


def test_a_daemon_killed_but_not_yet_reaped_is_not_alive():
    """A zombie still takes signal 0; `rendezvous status` right after a kill -9 said the
    daemon 'did not answer' instead of dropping its note."""
    child = subprocess.Popen(["true"])
    try:
        while process_state(child.pid) != b"Z":
            time.sleep(0.01)
        assert not pid_alive(child.pid)
    finally:
        child.wait()


def test_a_file_that_is_not_utf_8_or_too_long_is_ignored(tmp_path):
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe{" + b" " * 10)
    (tmp_path / "huge.json").write_bytes(json.dumps(asdict(R)).encode() + b" " * 10_000)
    assert find_registrations([tmp_path]) == []


def test_notes_and_progress_files_of_dead_daemons_of_this_namespace_are_removed(tmp_path):
    dead = Registration("abcdef000001", 999_999, "j", "10.0.0.1:1", R.netns)
    elsewhere = Registration("abcdef000002", 999_998, "j", "10.0.0.1:2", R.netns + 1)
    for registration in (R, dead, elsewhere):
        register(registration, [tmp_path], alive=lambda pid: True)
        (tmp_path / f"{registration.node_id}-progress-x1y2.jsonl").write_text("")
    remove_stale([tmp_path], R.netns, lambda pid: pid == R.pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "abcdef000002-progress-x1y2.jsonl", "abcdef000002.json",
        "abcdef012345-progress-x1y2.jsonl", "abcdef012345.json",
    ]


def note(directory: Path, name: str, **fields) -> Path:
    path = directory / name
    path.write_text(json.dumps({**asdict(R), **fields}) + "\n")
    return path


@pytest.mark.parametrize(
    "fields",
    [{"pid": 1e309}, {"pid": 2**80}, {"pid": True}, {"pid": "123"}, {"pid": 12.0}, {"netns": -1},
     {"netns": 2**64}, {"node_id": "../d1victim/**/*"}, {"node_id": "*"}, {"node_id": "ABCDEF012345"},
     {"job": "../x"}, {"job": 5}, {"endpoint": "unix:/run/x.sock"}, {"endpoint": "host.example:1"}],
)
def test_every_field_of_a_note_is_checked(fields):
    """pid 1e309 or 2**80 made `status` die with an OverflowError traceback."""
    assert parse_registration(json.dumps({**asdict(R), **fields})) is None


def test_a_bad_note_is_skipped_with_one_warning_naming_it(tmp_path, caplog):
    register(R, [tmp_path])
    bad = note(tmp_path, "abcdef000009.json", node_id="abcdef000009", pid=1e309)
    renamed = note(tmp_path, "abcdef000008.json")  # R's note under another node's name
    with caplog.at_level(logging.WARNING):
        assert find_registrations([tmp_path]) == [R]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert str(renamed) in warnings[0]  # in the order of their names
    assert str(bad) in warnings[1] and "pid" in warnings[1]


def test_a_fifo_or_a_link_in_place_of_a_note_is_not_read(tmp_path, caplog):
    os.mkfifo(tmp_path / "abcdef000007.json")  # a plain open() would wait for a writer
    (tmp_path / "abcdef000006.json").symlink_to(note(tmp_path, "elsewhere"))
    with caplog.at_level(logging.WARNING):
        assert find_registrations([tmp_path]) == []
    assert "not a regular file" in caplog.text and "symbolic link" in caplog.text


def test_junk_node_ids_of_dead_notes_never_name_a_file_to_remove(tmp_path):
    """A dead note whose node_id was `../d1victim/**/*` removed a file outside the
    directory, and `*` every progress file in it."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    victim = tmp_path / "d1victim" / "deep"
    victim.mkdir(parents=True)
    (victim / "precious-progress-x.jsonl").write_text("keep")
    (victim.parent / "precious").write_text("keep")
    note(run, "a.json", node_id="../d1victim/**/*", pid=999_999)
    note(run, "b.json", node_id="*", pid=999_999)
    note(run, "abcdef000001.json", node_id="abcdef000001", pid=999_999)  # really dead
    progress = ["abcdef012345-progress-k3j_2x.jsonl", "abcdef000001x-progress-a.jsonl",
                "abcdef000001-progress-../x.jsonl".replace("/", "_"), "abcdef000001-progress-ab12.jsonl"]
    for name in progress:
        (run / name).write_text("")
    remove_stale([run], R.netns, lambda pid: pid == R.pid)
    assert (victim / "precious-progress-x.jsonl").exists() and (victim.parent / "precious").exists()
    assert sorted(p.name for p in run.iterdir()) == sorted(["a.json", "b.json", *progress[:3]])


def test_a_directory_another_user_owns_is_refused_naming_owner_mode_and_fix(tmp_path, caplog):
    """`status` read its directory in the shared /tmp whatever user had made it."""
    foreign = tmp_path / "rendezvous-0"
    foreign.mkdir(mode=0o700)
    register(R, [foreign])
    os.chown(foreign, 65534, 65534)
    with caplog.at_level(logging.WARNING):
        assert find_registrations([foreign]) == []
        assert register(R, [foreign]) is None
    assert f"refusing runtime directory {foreign}: owned by" in caplog.text
    assert "uid 65534" in caplog.text and "mode 0700" in caplog.text and "RENDEZVOUS_RUNTIME_DIR" in caplog.text


def test_a_directory_others_may_write_to_is_refused_and_a_readable_one_tightened(tmp_path, caplog):
    loose = tmp_path / "loose"
    loose.mkdir()
    register(R, [loose])
    loose.chmod(0o777)
    with caplog.at_level(logging.WARNING):
        assert find_registrations([loose]) == []
        assert register(R, [loose]) is None
    assert f"chmod 700 {loose}" in caplog.text and "mode 0777" in caplog.text
    loose.chmod(0o755)  # as earlier versions made it: `status` refuses, a daemon tightens it
    assert find_registrations([loose]) == []
    assert register(R, [loose]) == loose / "abcdef012345.json"
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700 and find_registrations([loose]) == [R]


def test_a_new_directory_is_made_0700(tmp_path):
    register(R, [tmp_path / "new"])
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700


def test_the_service_directory_may_be_readable_by_all(tmp_path, monkeypatch):
    """systemd makes RuntimeDirectory= 0755 for the service user: every user's `status` reads it."""
    service = tmp_path / "service"
    service.mkdir(mode=0o755)
    service.chmod(0o755)
    monkeypatch.setenv("RUNTIME_DIRECTORY", str(service))
    register(R, [service])
    os.chown(service, 65534, 65534)
    assert find_registrations([service]) == [R]
    service.chmod(0o775)
    assert find_registrations([service]) == []


def test_a_starting_daemon_removes_the_notes_of_daemons_killed_with_sigkill(tmp_path):
    """Such notes stayed until someone ran `status`."""
    dead = Registration("abcdef000001", 999_999, "j", "10.0.0.1:1", R.netns)
    register(dead, [tmp_path], alive=lambda pid: True)
    (tmp_path / "abcdef000001-progress-x1y2.jsonl").write_text("")
    register(R, [tmp_path], alive=lambda pid: pid == R.pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["abcdef012345.json"]


def test_status_on_a_junk_note_ends_with_a_message_not_a_traceback(tmp_path):
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    bad = note(run, "abcdef000009.json", node_id="abcdef000009", pid=1e309)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RENDEZVOUS_")}
    result = subprocess.run(
        [sys.executable, "-m", "rendezvous", "status"], capture_output=True, text=True, timeout=60,
        env={**env, "RENDEZVOUS_RUNTIME_DIR": str(run)}, stdin=subprocess.DEVNULL,
    )
    assert "Traceback" not in result.stderr and str(bad) in result.stderr, result.stderr
    assert "no rendezvous daemon runs on this machine" in result.stderr and bad.exists()


def test_a_link_another_user_made_in_place_of_the_directory_is_refused(tmp_path, caplog):
    """In a shared /tmp its owner could point it elsewhere between a check and a write."""
    mine = tmp_path / "mine"
    register(R, [mine])
    link = tmp_path / "rendezvous-0"
    link.symlink_to(mine)
    assert find_registrations([link]) == [R]  # a link of this user's own is followed
    os.lchown(link, 65534, 65534)
    with caplog.at_level(logging.WARNING):
        assert find_registrations([link]) == []
    assert f"refusing runtime directory {link}: a symbolic link of" in caplog.text and "uid 65534" in caplog.text


def test_a_note_names_the_daemons_token_file_never_the_secret_and_older_notes_still_read():
    with_token = Registration(**{**asdict(R), "token_file": "/etc/rendezvous/token"})
    assert parse_registration(json.dumps(asdict(with_token))) == with_token
    older = {k: v for k, v in asdict(R).items() if k != "token_file"}  # written before the field
    assert parse_registration(json.dumps(older)) == R
    assert parse_registration(json.dumps({**asdict(R), "token_file": 3})) is None


def test_the_error_file_directories_of_dead_daemons_are_removed_never_through_a_link(tmp_path):
    """A daemon killed with -9 left `<node>-error-XXXX` (launch.errorfile) beside its note."""
    run, outside = tmp_path / "run", tmp_path / "outside"
    run.mkdir(mode=0o700)
    outside.mkdir()
    (outside / "keep").write_text("")
    dead = Registration("abcdef000001", 999_999, "j", "10.0.0.1:1", R.netns)
    for registration in (R, dead):
        register(registration, [run], alive=lambda pid: True)
        (run / f"{registration.node_id}-error-k3j_9x2a").mkdir()
        (run / f"{registration.node_id}-error-k3j_9x2a" / "error.json").write_text("{}")
    (run / "abcdef000001-error-k3j_9x2a" / "link").symlink_to(outside)
    (run / "abcdef000001-error-linked").symlink_to(outside)  # not a directory of its own: left
    remove_stale([run], R.netns, lambda pid: pid == R.pid)
    assert sorted(p.name for p in run.iterdir()) == [
        "abcdef000001-error-linked", "abcdef012345-error-k3j_9x2a", "abcdef012345.json"]
    assert os.listdir(outside) == ["keep"]


def test_a_note_whose_pid_a_later_process_took_is_removed():
    """pid reuse: the pid runs, but a process that started after the note was written."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        run = Path(directory)
        register(R, [run], alive=lambda pid: True)  # R.pid is this process, started before the note
        assert remove_stale([run], R.netns, pid_alive) == [R]
        long_ago = time.time() - 3600
        os.utime(run / f"{R.node_id}.json", (long_ago, long_ago))  # written before this process started
        assert remove_stale([run], R.netns, pid_alive) == [] and os.listdir(run) == []
