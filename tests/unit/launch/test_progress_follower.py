"""Following a real progress file: only complete new lines, the newest valid one wins, junk
and huge lines are skipped with one warning."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import signal
import threading
import time

from rendezvous.config.timings import Timings
from rendezvous.coordinator import CoordinatorService, fetch_status
from rendezvous.coordinator.server import add_lenient_servicer, bind_server
from rendezvous.core.peer import Peer
from rendezvous.core.round import Policy
from rendezvous.core.progress import MAX_LINE, Progress
from rendezvous.core.size import Size
from rendezvous.core.status import NodeStatus
from rendezvous.core.view import Target
from rendezvous.launch.follower import MAX_READ, ProgressFollower, create_progress_file


def follower(tmp_path):
    seen: list[Progress] = []
    path = create_progress_file(tmp_path, "abc")
    return ProgressFollower(path, 0.01, seen.append), path, seen


def append(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_the_newest_complete_line_is_the_progress(tmp_path):
    follow, path, seen = follower(tmp_path)
    assert path.parent == tmp_path and path.read_text() == "" and path.name.startswith("abc-progress-")
    follow.read()
    assert seen == [] and follow.latest is None
    append(path, '{"step": 1}\n{"step": 2}\n{"step": 3')
    follow.read()
    assert seen == [Progress(step=2)]
    append(path, '0}\n')
    follow.read()
    follow.read()  # nothing new: no second call
    assert seen == [Progress(step=2), Progress(step=30)] and follow.latest == Progress(step=30)


def test_junk_and_huge_lines_are_skipped_with_one_warning(tmp_path, caplog):
    follow, path, seen = follower(tmp_path)
    append(path, 'oops\n{"step": 1}\n' + "x" * (5 * MAX_LINE) + '\n[1]\n{"epoch": -2}\n')
    with caplog.at_level(logging.WARNING):
        follow.read()
        append(path, '{"loss": "high"}\n{"step": 2}\n' + '{"step": 3, "pad": "' + "y" * MAX_LINE + '"}\n')
        follow.read()
    assert seen == [Progress(step=1), Progress(step=2)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "warned once" in warnings[0] and str(path) in warnings[0]


def test_a_writer_far_ahead_is_read_from_its_latest_lines(tmp_path):
    follow, path, seen = follower(tmp_path)
    append(path, "".join(f'{{"step": {i}}}\n' for i in range(3 * MAX_READ // 12)))
    follow.read()
    assert seen[-1] == Progress(step=3 * MAX_READ // 12 - 1)


def test_polling_until_closed_removes_the_file(tmp_path):
    async def scenario():
        follow, path, seen = follower(tmp_path)
        follow.start()
        append(path, '{"epoch": 1}\n')
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        await follow.close()
        return path, seen

    path, seen = asyncio.run(scenario())
    assert seen == [Progress(epoch=1)] and not path.exists()


def test_a_fifo_put_in_place_of_the_file_is_never_opened_for_reading(tmp_path, caplog):
    """A plain open() of a FIFO blocks until a writer comes: the daemon hung in it for ever.
    Here a writer comes only for a reader that waits in open(), and writes a line that a
    reader of the FIFO would take for progress."""
    follow, path, seen = follower(tmp_path)
    path.unlink()
    os.mkfifo(path)
    done = threading.Event()

    def writer_for_a_blocked_reader():
        while not done.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO while nobody reads
            except OSError:
                time.sleep(0.001)
                continue
            try:
                os.write(fd, b'{"step": 99}\n')
            finally:
                os.close(fd)

    helper = threading.Thread(target=writer_for_a_blocked_reader)
    helper.start()
    try:
        with caplog.at_level(logging.WARNING):
            follow.read()
            follow.read()
    finally:
        done.set()
        helper.join()
    assert seen == [] and follow.latest is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "not a regular file" in warnings[0] and str(path) in warnings[0]


def test_a_symbolic_link_or_a_directory_is_not_followed(tmp_path, caplog):
    for replace in ("link", "directory"):
        follow, path, seen = follower(tmp_path)
        target = tmp_path / f"elsewhere-{replace}.jsonl"
        target.write_text('{"step": 5}\n')
        path.unlink()
        if replace == "link":
            path.symlink_to(target)
        else:
            path.mkdir()
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            follow.read()
            follow.read()
        assert seen == []
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and str(path) in warnings[0], warnings


def test_a_file_replaced_by_a_regular_one_is_read_again(tmp_path):
    follow, path, seen = follower(tmp_path)
    append(path, '{"step": 1}\n{"step": 2}\n')
    follow.read()
    replacement = tmp_path / "new.jsonl"
    replacement.write_text('{"epoch": 3}\n')
    replacement.replace(path)
    follow.read()
    assert seen == [Progress(step=2), Progress(epoch=3)]


def test_a_report_after_junk_and_a_3_mb_line_is_read(tmp_path):
    """Terminal escapes, NUL bytes, NaN and 3 MB of junk, the last of it on the report's own
    line: the report is the progress, read at once or as the writer goes."""
    junk = b"\x1b[31mred\x1b[0m\n\x00\x00\x00\n" + b'{"loss": NaN}\n' + b"x" * (3 << 20)
    report = b'\x1b[2K{"epoch": 3, "step": 7, "loss": 0.5}\x1b[0m\n'
    for pieces in ([junk + report], [junk[:100], junk[100:1 << 20], junk[1 << 20:], report]):
        follow, path, seen = follower(tmp_path)
        for piece in pieces:
            with open(path, "ab") as f:
                f.write(piece)
            follow.read()
        assert seen[-1] == Progress(epoch=3, step=7, loss=0.5), pieces
        path.unlink()


def test_a_writer_far_ahead_in_one_endless_line_is_never_read_whole(tmp_path, caplog):
    """No newline in the latest MAX_READ bytes: nothing of that line is taken for progress,
    and the reader resumes at the line after it."""
    follow, path, seen = follower(tmp_path)
    append(path, '{"step": 1}\n' + "x" * (3 * MAX_READ))
    with caplog.at_level(logging.WARNING):
        follow.read()
        append(path, 'y}\n{"step": 2}\n')
        follow.read()
    assert seen == [Progress(step=2)]


def test_hostile_numbers_reach_the_coordinator_through_a_real_status_call(tmp_path, caplog):
    """An epoch of 2**64 or 1e300 made every Status call fail with a ValueError from protobuf:
    such lines are now malformed, and the valid line before them is the progress."""
    follow, path, seen = follower(tmp_path)
    append(path, '{"epoch": 4, "epochs": 9, "loss": 1e300, "metrics": {"\\ud800": 1}}\n'
                 '{"epoch": 18446744073709551616}\n{"epoch": 1e300}\n')
    with caplog.at_level(logging.WARNING):
        follow.read()
    me = Peer("abcdef012345", ipaddress.ip_address("127.0.0.1"), 1, 2)

    async def scenario():
        service = CoordinatorService(
            me, "j", Size.fixed(1), lambda: Target(me.endpoint, me),
            lambda: NodeStatus(node=me, job="j", expect=Size.fixed(1), progress=follow.latest), Timings(),
            liveness_timeout=5.0, policy=Policy(max_restarts=3), settle=0.0,
        )
        server, port = bind_server("127.0.0.1", 0)
        add_lenient_servicer(service, server)
        await server.start()
        try:
            return await fetch_status(f"127.0.0.1:{port}", 30.0)
        finally:
            await server.stop(None)

    status = asyncio.run(scenario())
    assert status.progress == Progress(epoch=4, epochs=9, loss=1e300, metrics=(("?", 1.0),))
    assert "epoch must be a whole number" in caplog.text


def test_a_daemon_whose_command_puts_a_fifo_there_still_obeys_sigterm(tmp_path):
    """The daemon blocked in open() of the FIFO for ever: SIGTERM did nothing, only SIGKILL
    ended it, and the other nodes lost the round."""
    from peers import DEFAULT_TIMEOUT, join_argv, start_peer

    # mkfifo beside it, then rename: the follower never finds the path missing (its one warning would
    # then say so, not that the path is not a regular file)
    command = ["sh", "-c", 'mkfifo "$RENDEZVOUS_PROGRESS_FILE.f" && mv -f "$RENDEZVOUS_PROGRESS_FILE.f" "$RENDEZVOUS_PROGRESS_FILE" && exec sleep 600']
    peer = start_peer(join_argv(1, f"fifo-{os.urandom(3).hex()}", tmp_path, "127.0.0.2", ["--discovery", "unicast"],
                                command), tmp_path, "fifo")
    try:
        # The follower polls every Timings.progress_poll: it has looked at the FIFO once it
        # says so; one blocked in open() never does, and the deadline only ends that wait.
        deadline = time.monotonic() + DEFAULT_TIMEOUT
        while "not a regular file" not in peer.log:
            assert peer.proc.poll() is None and time.monotonic() < deadline, peer.log
            time.sleep(Timings.progress_poll / 5)
        peer.proc.send_signal(signal.SIGTERM)
        assert peer.wait() == 143, peer.log
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()
            peer.proc.wait()
    assert "warned once" in peer.log
