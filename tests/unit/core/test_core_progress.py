"""The progress contract: one JSON line read into a Progress, lines cut from a byte stream,
and how progress is shown."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.coordinator import _wire
from rendezvous.core.progress import (
    MAX_LINE, Progress, describe, parse_progress, parse_progress_line, progress_to_dict, split_lines,
)


def test_a_full_line():
    line = '{"epoch": 12, "epochs": 60, "step": 5400, "loss": 0.84, "images_per_s": 2310.4, "metrics": {"accuracy": 0.9}}'
    assert parse_progress(line) == Progress(
        epoch=12, epochs=60, step=5400, loss=0.84, images_per_s=2310.4, metrics=(("accuracy", 0.9),)
    )


def test_every_key_is_optional_and_unknown_keys_are_ignored():
    assert parse_progress('{"step": 3, "lr_schedule": "cosine"}') == Progress(step=3)
    assert parse_progress("{}").is_empty


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_unknown(value):
    progress = parse_progress(f'{{"loss": {value}, "images_per_s": {value}, "metrics": {{"a": {value}, "b": 1}}}}')
    assert progress == Progress(metrics=(("b", 1.0),))


def test_a_whole_float_is_a_whole_number():
    assert parse_progress('{"epoch": 3.0}').epoch == 3


@pytest.mark.parametrize(
    "line, problem",
    [
        ("not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"epoch": -1}', "epoch must be a whole number"),
        ('{"step": 2.5}', "step must be a whole number"),
        ('{"epoch": true}', "epoch must be a whole number"),
        ('{"loss": "low"}', "loss must be a number"),
        ('{"metrics": [1]}', "metrics must be an object"),
        ('{"metrics": {"a": "b"}}', "metric 'a' must be a number"),
        ("[" * 100000, "not JSON"),
    ],
)
def test_malformed_lines_say_what_is_wrong(line, problem):
    with pytest.raises(ValueError, match=problem):
        parse_progress(line)


@pytest.mark.parametrize("value", ["18446744073709551616", "1e300", "1" + "0" * 4000, "1e400"])
def test_whole_numbers_beyond_the_wires_uint64_are_malformed(value):
    """Such an epoch made every Status call of the daemon fail with a ValueError from protobuf."""
    with pytest.raises(ValueError, match="epoch must be a whole number") as raised:
        parse_progress(f'{{"epoch": {value}, "step": 1}}')
    assert len(str(raised.value)) < 200
    assert parse_progress('{"epoch": 18446744073709551615}').epoch == 2**64 - 1


def test_numbers_a_double_cannot_hold_are_unknown_and_names_are_utf_8():
    huge = "1" + "0" * 400  # an integer beyond a double: float() raised OverflowError
    progress = parse_progress(f'{{"loss": {huge}, "images_per_s": -{huge}, "metrics": {{"a": {huge}, "\\ud800x": 2}}}}')
    assert progress == Progress(metrics=(("?x", 2.0),))
    message = _wire.progress_to_pb(progress)
    message.SerializeToString()  # a lone surrogate raised UnicodeEncodeError here
    assert _wire.progress_from_pb(message) == progress


@pytest.mark.parametrize(
    "line",
    ['{"epoch": 18446744073709551615, "epochs": 18446744073709551615, "step": 0, "loss": 1e300, "images_per_s": -1e300}',
     '{"step": 7, "metrics": {"\\udfff": 1e308, "b": -0.0}}'],
)
def test_every_valid_line_crosses_the_wire_unchanged(line):
    progress = parse_progress(line)
    assert _wire.progress_from_pb(_wire.progress_to_pb(progress)) == progress


_NUMBERS = st.one_of(st.integers(), st.floats(), st.integers(min_value=-(10**400), max_value=10**400))


@given(st.dictionaries(st.sampled_from(["epoch", "epochs", "step", "loss", "images_per_s"]), _NUMBERS),
       st.dictionaries(st.text(max_size=80), _NUMBERS, max_size=20))
def test_a_line_is_either_malformed_or_fits_the_wire(known, metrics):
    line = json.dumps({**known, "metrics": metrics})
    try:
        progress = parse_progress(line)
    except ValueError:
        return
    _wire.progress_to_pb(progress).SerializeToString()


def test_metrics_are_bounded():
    many = {f"{'m' * 100}{i:02d}": i for i in range(40)}
    metrics = parse_progress(json.dumps({"metrics": many})).metrics
    assert len(metrics) == 16 and all(len(name) == 64 for name, _ in metrics)


def test_complete_lines_only():
    lines, rest, cut = split_lines(b"", b'{"step": 1}\n{"step": 2}\n{"ste')
    assert lines == [b'{"step": 1}', b'{"step": 2}'] and rest == b'{"ste' and not cut
    lines, rest, cut = split_lines(rest, b'p": 3}\n')
    assert lines == [b'{"step": 3}'] and rest == b"" and not cut


VALID = b'{"epoch": 3, "epochs": 9, "step": 7, "loss": 0.5}'


@pytest.mark.parametrize("junk, after", [
    (b"\x1b[32m", b"\x1b[0m"),  # coloured
    (b"\x1b[2K\r", b""),  # a progress bar's "clear the line"
    (b"\x00" * 100, b"\x00"),  # NUL padding
    (b"NaN NaN {not json} [1, 2] ", b"  "),
    (b'{"epoch": 1} ', b""),  # an object, then another: the last counts
    (b"x" * (MAX_LINE - len(VALID)), b""),  # the end of a cut line
])
def test_a_report_after_junk_on_its_line_counts(junk, after):
    assert parse_progress_line(junk + VALID + after) == Progress(epoch=3, epochs=9, step=7, loss=0.5)


@pytest.mark.parametrize("line", [b"\x1b[31mred\x1b[0m", b"\x00\x00", b"NaN", b"{" * MAX_LINE, b'{"epoch": 1} x',
                                  b'x{"epoch": "three"}', b'{"step": -1}', b'[{"step": 1}]'])
def test_a_line_without_a_report_at_its_end_is_none(line):
    with pytest.raises(ValueError):
        parse_progress_line(line)


def test_a_line_that_is_one_object_is_read_as_it_is():
    with pytest.raises(ValueError, match="step must be a whole number"):
        parse_progress_line(b'{"step": -1}')
    assert parse_progress_line(b' {"step": 1}\r') == Progress(step=1)


def test_huge_lines_are_cut_and_never_held_whole():
    lines, rest, cut = split_lines(b"", b"x" * (3 * MAX_LINE))
    assert lines == [] and len(rest) == MAX_LINE + 1 and cut
    lines, rest, cut = split_lines(rest, b"y" * MAX_LINE + b'\n{"step": 4}\n')
    assert [len(line) for line in lines] == [MAX_LINE, 11] and cut and rest == b""


@given(st.lists(st.binary(max_size=3 * MAX_LINE), max_size=6))
def test_splitting_in_chunks_is_the_end_of_every_complete_line(chunks):
    pending, found = b"", []
    for chunk in chunks:
        lines, pending, _ = split_lines(pending, chunk)
        found += lines
    complete = b"".join(chunks).split(b"\n")[:-1]
    assert found == [line[-MAX_LINE:] for line in complete]
    assert len(pending) <= MAX_LINE + 1


@pytest.mark.parametrize(
    "progress, text",
    [
        (Progress(epoch=12, epochs=60, loss=0.8412, images_per_s=2310.4), "epoch 12/60, loss 0.841, 2,310 img/s"),
        (Progress(epoch=3), "epoch 3"),
        (Progress(step=50, loss=1e-5), "step 50, loss 1e-05"),
        (Progress(), ""),
    ],
)
def test_described(progress, text):
    assert describe(progress) == text


def test_json_has_no_nan_and_the_wire_keeps_everything():
    progress = parse_progress('{"epoch": 2, "loss": NaN, "metrics": {"acc": 0.5}}')
    assert "NaN" not in json.dumps(progress_to_dict(progress), allow_nan=False)
    assert _wire.progress_from_pb(_wire.progress_to_pb(progress)) == progress
    full = Progress(epoch=1, epochs=2, step=3, loss=0.5, images_per_s=9.0, metrics=(("a", 1.0), ("b", 2.0)))
    assert _wire.progress_from_pb(_wire.progress_to_pb(full)) == full
    sent_nan = _wire.progress_to_pb(Progress(step=1))
    sent_nan.loss = math.nan
    assert _wire.progress_from_pb(sent_nan) == Progress(step=1)
