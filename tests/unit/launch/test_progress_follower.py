"""Following a real progress file: only complete new lines, the newest valid one wins, junk
and huge lines are skipped with one warning."""

from __future__ import annotations

import asyncio
import logging

from rendezvous.core.progress import MAX_LINE, Progress
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
