"""The cause that travels with a failure: scrubbing, the stderr tail, the error file, the
lines every node shows, and how the coordinator's round and the member's machine carry it."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core import job as jobs
from rendezvous.core.failure import (
    MAX_TAIL_BYTES,
    MAX_TAIL_LINES,
    Failure,
    bounded,
    failure_to_dict,
    parse_error_file,
    scrub,
    tail_lines,
)
from rendezvous.core.member import Aborted, RoundEnd, step
from rendezvous.core.round import RoundPhase, finished
from rendezvous.core.status import NodeStatus, describe_status, status_line, status_to_dict

from test_core_member import released
from test_core_round import A, B, released_round

TRACEBACK = b"""epoch 3/10\r\x1b[2K[====>   ] 40%\rloss 0.3
Traceback (most recent call last):
  File "train.py", line 12, in <module>
\tload(7)
RuntimeError: shard 7 is corrupt

"""


def failure(**changes) -> Failure:
    values = dict(node_id="bbbbbbbb", address="10.0.0.10", rank=1, exit_code=1,
                  tail=tail_lines(TRACEBACK))
    return Failure(**{**values, **changes})


def test_the_tail_is_the_last_lines_scrubbed_blank_ends_dropped():
    assert tail_lines(TRACEBACK) == (  # what a carriage return overwrote is gone, as on a terminal
        "loss 0.3", "Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
        "    load(7)", "RuntimeError: shard 7 is corrupt",
    )


def test_scrub_leaves_no_control_character_and_cuts_long_lines():
    assert scrub("\x1b[31mred\x1b[0m \x07bell\x00 \x9b") == "red ?bell? ?"
    assert scrub("a" * 2000) == "a" * 1000 + "..."
    assert scrub("50%\r100%\r") == "100%"


@settings(max_examples=200)
@given(st.binary(max_size=3 * MAX_TAIL_BYTES), st.booleans())
def test_any_stream_gives_a_bounded_printable_tail(data, cut):
    lines = tail_lines(data, cut)
    assert len(lines) <= MAX_TAIL_LINES
    assert sum(len(line.encode()) for line in lines) <= 3 * MAX_TAIL_BYTES  # U+FFFD for a bad byte
    assert all(ch.isprintable() for line in lines for ch in line)


def test_a_cut_stream_drops_its_first_partial_line():
    assert tail_lines(b"end of a long line\nwhole\n", cut=True) == ("whole",)
    data = b"x" * (MAX_TAIL_BYTES + 10) + b"\nlast\n"
    assert tail_lines(data) == ("last",)


def test_many_lines_keep_the_last_forty():
    data = b"".join(b"line %d\n" % i for i in range(100))
    assert tail_lines(data) == tuple(f"line {i}" for i in range(60, 100))


def test_the_headline_names_node_rank_ending_and_the_last_line():
    assert failure().headline() == (
        "node bbbbbbbb (10.0.0.10), rank 1, exited with code 1: RuntimeError: shard 7 is corrupt")
    killed = failure(exit_code=137, signal="SIGKILL", tail=())
    assert killed.headline() == "node bbbbbbbb (10.0.0.10), rank 1, killed by SIGKILL (exit 137)"
    stopped = failure(exit_code=6, reason="command stopped (SIGSTOP) for 5.1 s", rank=None, tail=())
    assert stopped.headline().endswith("no rank, failed with exit code 6 (command stopped (SIGSTOP) for 5.1 s)")
    assert failure(exit_code=6, reason="command stopped", signal="SIGSTOP").cause == "command stopped"
    assert failure().details()[-1] == "RuntimeError: shard 7 is corrupt"


def test_the_error_file_gives_type_message_and_traceback():
    data = json.dumps({"type": "ValueError", "message": "label 12\nout of range",
                       "traceback": ["Traceback (most recent call last):\n", "ValueError: label 12\n"]}).encode()
    report = parse_error_file(data)
    assert report is not None
    assert (report.error_type, report.message) == ("ValueError", "label 12\nout of range")
    assert report.traceback == ("Traceback (most recent call last):", "ValueError: label 12")
    shown = failure(error_type=report.error_type, message=report.message, tail=report.traceback, from_error_file=True)
    assert shown.cause == "ValueError: label 12"
    assert shown.details() == ("out of range", "Traceback (most recent call last):", "ValueError: label 12")
    assert failure_to_dict(shown)["source"] == "error file"


def test_junk_in_the_error_file_is_no_error():
    for junk in (b"", b"not json", b"[1, 2]", b'{"other": 1}', b'{"type": "", "message": " "}', b"\xff\xfe"):
        assert parse_error_file(junk) is None, junk
    hostile = parse_error_file(json.dumps({"type": "E\x1b[2J" * 100, "message": 5, "traceback": {"a": 1}}).encode())
    assert hostile is not None and len(hostile.error_type) <= 203 and "\x1b" not in hostile.error_type
    assert hostile.message == "5"


def test_bounded_scrubs_and_cuts_whatever_came_from_the_network():
    sent = failure(node_id="\x1b]0;title\x07x", tail=tuple("\x1b[1m" + "y" * 5000 for _ in range(500)),
                   rank=-3, message="m\x00" * 5000)
    shown = bounded(sent)
    assert shown.rank is None and shown.node_id == "x"
    assert len(shown.tail) <= MAX_TAIL_LINES and sum(len(line) + 1 for line in shown.tail) <= MAX_TAIL_BYTES
    assert all(ch.isprintable() for text in (*shown.tail, *shown.message.splitlines()) for ch in text)


def test_a_failure_goes_with_the_abort_named_after_the_member_that_sent_it():
    state = released_round()
    rank_of_b = state.membership.rank_of(B.node_id)
    sent = failure(node_id="forged", address="1.2.3.4", rank=99)
    result = finished(state, B.node_id, 1, failure=sent)
    assert result.state.phase is RoundPhase.ABORTED
    assert result.state.abort_reason.endswith("command exited with code 1: RuntimeError: shard 7 is corrupt")
    carried = result.state.failure
    assert (carried.node_id, carried.address, carried.rank) == (B.node_id, "10.0.0.10", rank_of_b)
    board = jobs.aborted(jobs.Board(), result.state.abort_reason, carried)
    view = jobs.job_view(result.state, board, A, 0.0)
    assert view.last_failure == carried
    assert jobs.for_round(board, 2).last_failure == carried  # kept across rounds
    assert f"last failure: node {B.node_id} (10.0.0.10), rank {rank_of_b}" in jobs.job_table(view)
    assert jobs.job_to_dict(view)["last_failure"]["cause"] == "RuntimeError: shard 7 is corrupt"


def test_a_failure_without_a_cause_aborts_as_before():
    result = finished(released_round(), B.node_id, 3)
    assert result.state.failure is None and result.state.abort_reason.endswith("command exited with code 3")


def test_the_member_ends_its_round_with_the_failure_the_coordinator_sent():
    result = step(released(), Aborted("x", 1, failure=failure()), 0.0)
    assert isinstance(result.action, RoundEnd) and result.action.failure == failure()


def test_status_shows_the_last_failure():
    status = NodeStatus(node=A, job="j", expect=jobs.Size.fixed(3), failure=failure())
    assert "last failure  node bbbbbbbb (10.0.0.10), rank 1, exited with code 1" in describe_status(status)
    assert "      RuntimeError: shard 7 is corrupt" in describe_status(status)
    assert status_to_dict(status)["failure"]["tail"][-1] == "RuntimeError: shard 7 is corrupt"
    assert status_line(status) == (
        "waiting for peers 1/3; last failure: 10.0.0.10 rank 1: RuntimeError: shard 7 is corrupt")


def test_an_abort_without_a_failed_command_clears_the_jobs_last_failure():
    board = jobs.aborted(jobs.Board(), "rank 1 failed", failure())
    assert jobs.aborted(board, "a member was lost").last_failure is None


def test_a_command_killed_by_a_signal_has_the_signal_as_its_cause_and_its_tail_as_context():
    """TensorFlow logs `failed call to cuInit` at its start on a machine without a GPU: a
    trainer killed by SIGKILL later must not be said to have failed of that."""
    tail = ("I0000 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
            "E0000 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit")
    killed = failure(exit_code=137, signal="SIGKILL", tail=tail)
    assert killed.cause == "killed by SIGKILL"
    assert "cuInit" not in killed.headline()
    assert killed.headline() == "node bbbbbbbb (10.0.0.10), rank 1, killed by SIGKILL (exit 137)"
    assert killed.details() == tail
    assert failure_to_dict(killed)["cause"] == "killed by SIGKILL"
