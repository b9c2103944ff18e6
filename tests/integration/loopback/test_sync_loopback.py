"""--sync-dir with real `rendezvous join` processes on 127.0.0.x, a directory per node."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

import pytest

from patience import HANG
from peers import join_argv, start_peer
from test_restart_loopback import ADDRESSES, FAST, wait_for_log
from paths import SUPPORT

COMMAND = (SUPPORT / "sync_command.py")


@pytest.fixture
def job() -> str:
    return f"sync-{secrets.token_hex(4)}"


def start(tmp_path: Path, job: str, index: int, options=(), mode: str = "", env=None, out: str = "out",
          corrupt: int = 0):
    """Node `index` on ADDRESSES[index] (0 is the chief), syncing tmp_path/dir-<index>; with
    `corrupt`, its source flips a byte in each of the first that many chunks it serves."""
    root, out = tmp_path / f"dir-{index}", tmp_path / out
    out.mkdir(exist_ok=True)
    argv = join_argv(3, job, out, address=ADDRESSES[index], options=[*FAST, "--sync-dir", str(root), *options],
                     command=[sys.executable, str(COMMAND), str(root), str(out), mode])
    if corrupt:
        assert argv[1:3] == ["-m", "rendezvous"], argv
        argv = [argv[0], str(SUPPORT / "corrupt_chunks.py"), str(corrupt), *argv[3:]]
    return start_peer(argv, tmp_path, f"peer-{index}", extra_env=env)


def put(root: Path, files: dict[str, str], mtime: int) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
        os.utime(root / path, (mtime, mtime))


def listing(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def records(tmp_path: Path, round_: int, out: str = "out") -> list[dict]:
    found = [json.loads(p.read_text()) for p in (tmp_path / out).glob(f"*-{round_}.json")]
    return sorted(found, key=lambda r: r["rank"])


NEWEST = {"chief/checkpoint": "ckpt-3\n", "chief/ckpt-3.data": "weights after epoch 3\n"}


def test_an_empty_and_a_stale_directory_get_the_newest_copy_and_the_chiefs_after_the_job(tmp_path, job):
    put(tmp_path / "dir-1", {"chief/checkpoint": "ckpt-1\n", "old-worker/x": "stale\n"}, 1_600_000_000)
    put(tmp_path / "dir-2", NEWEST, 1_700_000_000)
    peers = [start(tmp_path, job, i, mode="chief-writes") for i in range(3)]  # dir-0 does not exist
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert "newest content" in peers[0].log, peers[0].log
    assert f"from {ADDRESSES[2]}: 100%" in peers[0].log and f"from {ADDRESSES[2]}: 100%" in peers[1].log
    started = records(tmp_path, 1)
    assert all(r["files"] == started[0]["files"] for r in started) and started[0]["files"].keys() == NEWEST.keys()
    # after the job: the chief's last copy everywhere (its new file, no stale one)
    final = [listing(tmp_path / f"dir-{i}") for i in range(3)]
    assert final[0] == final[1] == final[2] and "chief/final.txt" in final[0], final
    assert "chief of the round that completed" in peers[0].log


def test_after_a_failure_the_previous_chiefs_copy_wins_over_newer_ones(tmp_path, job):
    peers = [start(tmp_path, job, i, ["--max-restarts", "1"], mode="round-1-fails") for i in range(3)]
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert "round 2 starts" in peer.log
    assert "chief of the previous round" in peers[0].log, peers[0].log
    second = records(tmp_path, 2)
    assert [sorted(r["files"]) for r in second] == [["chief/ckpt-1"]] * 3, second


def test_after_every_daemon_was_killed_the_chiefs_copy_still_wins(tmp_path, job):
    """A power cut: the chief's checkpoint and a newer throw-away copy elsewhere. Started
    again, no daemon remembers the last round in memory, but each kept its chief beside its
    directory."""
    first = [start(tmp_path, job, i, mode="round-1-hangs") for i in range(3)]
    deadline = time.monotonic() + HANG
    while not (tmp_path / "dir-2" / "workertemp_2" / "ckpt-1").exists():
        assert time.monotonic() < deadline, first[0].log
        time.sleep(0.05)
    for peer in first:
        peer.proc.kill()
        peer.proc.wait()
    again = [start(tmp_path, f"{job}-again", i, out="out-again") for i in range(3)]
    for peer in again:
        assert peer.wait() == 0, peer.log
    assert "chief of the previous round" in again[0].log, again[0].log
    assert [sorted(r["files"]) for r in records(tmp_path, 1, "out-again")] == [["chief/ckpt-1"]] * 3


def test_a_corrupted_chunk_fails_the_round_and_the_next_one_syncs(tmp_path, job):
    put(tmp_path / "dir-2", NEWEST, 1_700_000_000)
    stale = {"chief/checkpoint": "ckpt-1\n"}
    put(tmp_path / "dir-1", stale, 1_600_000_000)
    # the first chunk the source (node 2, the newest copy) sends
    peers = [start(tmp_path, job, i, ["--max-restarts", "1"], corrupt=1 if i == 2 else 0) for i in range(3)]
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert "corrupted in transit" in peer.log and "round 2 starts" in peer.log, peer.log
    assert records(tmp_path, 1) == []  # no command ran with a half-synced directory
    assert len({json.dumps(r["files"]) for r in records(tmp_path, 2)}) == 1


def test_a_corrupted_transfer_leaves_the_directory_as_it_was(tmp_path, job):
    put(tmp_path / "dir-2", NEWEST, 1_700_000_000)
    stale = {"chief/checkpoint": "ckpt-1\n"}
    put(tmp_path / "dir-1", stale, 1_600_000_000)
    before = listing(tmp_path / "dir-1")
    peers = [start(tmp_path, job, i, ["--max-restarts", "0"], corrupt=100 if i == 2 else 0) for i in range(3)]
    for peer in peers:
        assert peer.wait() == 6, peer.log
    assert "corrupted in transit" in peers[0].log
    assert listing(tmp_path / "dir-1") == before
    assert not (tmp_path / "dir-0").exists()
    assert sorted(os.listdir(tmp_path)) == sorted(["dir-1", "dir-2", "out", "run", *(f"peer-{i}.log" for i in range(3))])


def test_a_directory_over_the_limit_ends_the_job_naming_its_size(tmp_path, job):
    put(tmp_path / "dir-1", {"big": "x" * 5000}, 1_700_000_000)
    peers = [start(tmp_path, job, i, ["--sync-max-bytes", "4096"]) for i in range(3)]
    for peer in peers:
        assert peer.wait() == 6, peer.log
        assert "holds 5.0 kB (5000 bytes), more than --sync-max-bytes 4096" in peer.log, peer.log
    assert records(tmp_path, 1) == []


def leftovers(tmp_path: Path) -> list[str]:
    """What a copy put beside the directories and left there, but for the chief's name."""
    return [n for n in os.listdir(tmp_path) if ".rendezvous-" in n and not n.endswith(".rendezvous-chief")]


def start_a_big_copy(tmp_path: Path, job: str, mib: int, options: list[str]) -> list:
    """Two nodes running `true`, the second holding `mib` MiB in its --sync-dir that the
    first, with an empty one, pulls before the start."""
    (tmp_path / "dir-1").mkdir()
    with open(tmp_path / "dir-1" / "big", "wb") as f:
        f.write(os.urandom(1 << 20) * mib)
    return [
        start_peer(join_argv(2, job, tmp_path / "out", address=ADDRESSES[i], command=["true"],
                             options=[*options, "--sync-dir", str(tmp_path / f"dir-{i}")]),
                   tmp_path, f"peer-{i}")
        for i in range(2)
    ]


def test_an_abort_while_a_member_pulls_ends_the_round_without_waiting_for_the_transfer(tmp_path, job):
    """The source freezes (SIGSTOP) while the coordinator's own member pulls its copy: the
    coordinator aborts the round after the liveness timeout, and its member acts on that at
    once, cancelling the pull, instead of when the frozen stream fails (HTTP/2 keepalive,
    5 s + 5 s here). Thawed, the source syncs in round 2 and the job completes."""
    options = ["--liveness-timeout", "1.5", "--timings", "keepalive=5,suspect-after=1,end-grace=0.5"]
    peers = start_a_big_copy(tmp_path, job, 400, options)  # a transfer of a second or more
    wait_for_log(peers[0], f"from {ADDRESSES[1]}: 0%")
    peers[1].proc.send_signal(signal.SIGSTOP)
    try:
        wait_for_log(peers[0], "round 1 ended")
    finally:
        peers[1].proc.send_signal(signal.SIGCONT)
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert "fetching from" not in peers[0].log, peers[0].log  # cancelled, not failed
    assert listing(tmp_path / "dir-0") == listing(tmp_path / "dir-1")
    assert leftovers(tmp_path) == []  # no staging directory of the cancelled pull


def test_timeout_is_for_the_peers_to_come_not_for_the_copy_after_the_freeze(tmp_path, job):
    """--timeout 2 and a copy that takes longer than that once the round is frozen: the job
    starts when the copy is done (it ended with 3, "no rendezvous within --timeout: saw 2
    of 2 peers ... 0 never appeared", in the middle of the copy)."""
    peers = start_a_big_copy(tmp_path, job, 800, ["--timeout", "2"])  # hashed twice and sent: well over 2 s
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert f"from {ADDRESSES[1]}: 100%" in peers[0].log, peers[0].log
    assert listing(tmp_path / "dir-0") == listing(tmp_path / "dir-1")


def test_a_member_killed_during_its_pull_clears_what_it_left_when_it_is_back(tmp_path, job):
    """kill -9 of the daemon that pulls its copy leaves its staging directory beside DIR, as
    big as what it had fetched; started again, it removes that, syncs, and the job runs."""
    options = ["--liveness-timeout", "1.5", "--timings", "keepalive=5,suspect-after=1,end-grace=0.5"]
    peers = start_a_big_copy(tmp_path, job, 400, options)

    def staged() -> list[Path]:
        return [p for p in tmp_path.glob(".dir-0.rendezvous-*") if (p / "big").exists()]

    deadline = time.monotonic() + HANG
    while not staged():
        assert time.monotonic() < deadline and peers[0].proc.poll() is None, peers[0].log
        time.sleep(0.01)
    peers[0].proc.kill()
    peers[0].proc.wait()
    assert staged()  # what the kill left
    again = start_peer(list(peers[0].proc.args), tmp_path, "peer-0-again")
    for peer in (again, peers[1]):
        assert peer.wait() == 0, peer.log
    assert listing(tmp_path / "dir-0") == listing(tmp_path / "dir-1")
    assert leftovers(tmp_path) == [], again.log


def test_a_chief_frozen_during_the_copy_after_the_job_fails_the_job_on_the_member(tmp_path, job):
    """The copy of the chief's DIR after the job is part of it: a member that loses the
    coordinator (the chief, frozen) while it pulls that copy ends with 6 and says its DIR
    may not be the chief's, instead of 0 and 'lost the coordinator after the command
    succeeded'. Its DIR is left as it was, and the chief fails the job too."""
    options = ["--liveness-timeout", "1.5", "--timings", "keepalive=5,suspect-after=1,end-grace=0.5"]
    put(tmp_path / "dir-1", {"mine": "stale\n"}, 1_600_000_000)
    peers = []
    for i in range(2):
        root = tmp_path / f"dir-{i}"
        chief_writes = f'if [ "$RENDEZVOUS_RANK" = 0 ]; then head -c {400 << 20} /dev/urandom > "{root}/big"; fi'
        argv = join_argv(2, job, tmp_path / "out", address=ADDRESSES[i], command=["sh", "-c", chief_writes],
                         options=[*options, "--sync-dir", str(root)])
        peers.append(start_peer(argv, tmp_path, f"peer-{i}"))
    wait_for_log(peers[1], f"from {ADDRESSES[0]}: 0%")
    peers[0].proc.send_signal(signal.SIGSTOP)
    try:
        assert peers[1].wait() == 6, peers[1].log
    finally:
        peers[0].proc.send_signal(signal.SIGCONT)
    assert peers[0].wait() == 6, peers[0].log
    assert "before it said every --sync-dir holds the chief's copy (this one may not)" in peers[1].log
    assert listing(tmp_path / "dir-1") == {"mine": hashlib.sha256(b"stale\n").hexdigest()}
    assert leftovers(tmp_path) == []
