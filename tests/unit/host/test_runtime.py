"""Daemon registrations for `rendezvous status`: where they go, what is trusted, cleanup."""

from __future__ import annotations

import json
import os
import subprocess
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
        register(registration, [tmp_path])
        (tmp_path / f"{registration.node_id}-progress-x1y2.jsonl").write_text("")
    remove_stale([tmp_path], R.netns, lambda pid: pid == R.pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "abcdef000002-progress-x1y2.jsonl", "abcdef000002.json",
        "abcdef012345-progress-x1y2.jsonl", "abcdef012345.json",
    ]
