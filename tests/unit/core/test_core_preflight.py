"""Tests of rendezvous.core.preflight: which differences between members refuse the round,
which are warnings, and what the messages say."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.peer import Peer
from rendezvous.core.preflight import (
    ALLOWABLE,
    ALWAYS_FATAL,
    Fingerprint,
    Mismatch,
    Verdict,
    compare,
    describe_gpus,
    major_minor,
)
from rendezvous.core.record import replace


def peer(address: str, node_id: str, port: int = 7000) -> Peer:
    return Peer(node_id=node_id, address=ipaddress.ip_address(address), port=port, tf_port=9000)


A = peer("10.0.0.10", "aaaaaaaa")
B = peer("10.0.0.11", "bbbbbbbb")
C = peer("10.0.0.12", "cccccccc")
D = peer("10.0.0.13", "dddddddd")
DIGEST = "ab" * 32
OTHER_DIGEST = "cd" * 32
BASE = Fingerprint("3.11.9", "2.21.0", ("NVIDIA H100",) * 8, {"train.py": DIGEST})


def like(**changes) -> Fingerprint:
    return replace(BASE, **changes)


def odd_third(fingerprint: Fingerprint, allowed=frozenset()) -> Verdict:
    """A and B run BASE, C runs `fingerprint`."""
    return compare([(A, BASE), (B, BASE), (C, fingerprint)], frozenset(allowed))


def messages(differences) -> list[str]:
    return [d.message for d in differences]


def test_the_same_fingerprint_everywhere_passes():
    verdict = compare([(A, BASE), (B, BASE), (C, like())])
    assert verdict == Verdict()
    assert not verdict.refused


def test_one_node_alone_passes():
    assert compare([(A, BASE)]) == Verdict()
    assert compare([]) == Verdict()


def test_a_gpu_count_that_differs_names_the_odd_node_and_both_counts():
    verdict = odd_third(like(gpus=("NVIDIA H100",) * 4))
    assert verdict.refused
    assert verdict.reason == "preflight: 10.0.0.12 has 4 GPUs, the others 8"
    assert [d.kind for d in verdict.fatal] == [Mismatch.GPU_COUNT]


def test_the_gpu_count_is_refused_even_when_everything_is_allowed():
    verdict = odd_third(like(gpus=()), allowed=set(Mismatch))
    assert messages(verdict.fatal) == ["10.0.0.12 has 0 GPUs, the others 8"]
    assert verdict.warnings == ()


def test_one_gpu_is_singular():
    assert odd_third(like(gpus=("NVIDIA H100",))).reason == "preflight: 10.0.0.12 has 1 GPU, the others 8"


def test_a_tensorflow_major_minor_difference_is_always_refused_and_shows_full_versions():
    verdict = odd_third(like(tensorflow="2.20.1"), allowed=set(Mismatch))
    assert messages(verdict.fatal) == ["10.0.0.12 has TensorFlow 2.20.1, the others 2.21.0"]
    assert [d.kind for d in verdict.fatal] == [Mismatch.TENSORFLOW]  # not again as a patch level


def test_a_node_without_tensorflow_differs_in_major_minor():
    assert odd_third(like(tensorflow=None)).reason == "preflight: 10.0.0.12 has no TensorFlow, the others 2.21.0"
    verdict = compare([(A, like(tensorflow=None)), (B, like(tensorflow=None)), (C, BASE)])
    assert verdict.reason == "preflight: 10.0.0.12 has TensorFlow 2.21.0, the others none"


def test_no_tensorflow_anywhere_is_no_difference():
    assert compare([(A, like(tensorflow=None)), (B, like(tensorflow=None))]) == Verdict()


def test_a_tensorflow_patch_level_is_refused_by_default_and_a_warning_when_allowed():
    refused = odd_third(like(tensorflow="2.21.1"))
    assert refused.reason == (
        "preflight: 10.0.0.12 has TensorFlow 2.21.1, the others 2.21.0 "
        "(allow with --allow-mismatch tensorflow-patch)"
    )
    allowed = odd_third(like(tensorflow="2.21.1"), {Mismatch.TENSORFLOW_PATCH})
    assert not allowed.refused
    assert allowed.warning_lines() == (
        "preflight: 10.0.0.12 has TensorFlow 2.21.1, the others 2.21.0 (allowed by --allow-mismatch tensorflow-patch)",
    )


@pytest.mark.parametrize("kind, changed, message", [
    (Mismatch.PYTHON, like(python="3.11.4"), "10.0.0.12 has Python 3.11.4, the others 3.11.9"),
    (Mismatch.GPU_MODEL, like(gpus=("NVIDIA A100",) * 8), "10.0.0.12 has GPUs 8x NVIDIA A100, the others 8x NVIDIA H100"),
    (Mismatch.SAME_FILE, like(files={"train.py": OTHER_DIGEST}),
     f"10.0.0.12 has train.py with SHA-256 {OTHER_DIGEST[:12]}, the others {DIGEST[:12]}"),
    (Mismatch.SAME_FILE, like(files={"train.py": None}), f"10.0.0.12 has no readable train.py, the others {DIGEST[:12]}"),
    (Mismatch.SAME_FILE, like(files={}), f"10.0.0.12 has no --same-file train.py, the others {DIGEST[:12]}"),
])
def test_other_differences_refuse_by_default_and_warn_when_allowed(kind, changed, message):
    refused = odd_third(changed)
    assert [(d.kind, d.message) for d in refused.fatal] == [(kind, f"{message} (allow with --allow-mismatch {kind.value})")]
    allowed = odd_third(changed, {kind})
    assert allowed.fatal == ()
    assert messages(allowed.warnings) == [message]
    other = next(k for k in Mismatch if k not in ALWAYS_FATAL and k is not kind)
    assert odd_third(changed, {other}).refused  # only its own kind allows it


def test_gpu_models_compare_apart_from_their_count():
    assert [d.kind for d in odd_third(like(gpus=("NVIDIA H100",) * 4)).fatal] == [Mismatch.GPU_COUNT]
    both = odd_third(like(gpus=("NVIDIA A100",) * 4))
    assert messages(both.fatal) == [
        "10.0.0.12 has 4 GPUs, the others 8",
        "10.0.0.12 has GPUs 4x NVIDIA A100, the others 8x NVIDIA H100 (allow with --allow-mismatch gpu-model)",
    ]
    mixed = odd_third(like(gpus=("NVIDIA A100",) * 4 + ("NVIDIA H100",) * 4), {Mismatch.GPU_MODEL})
    assert messages(mixed.warnings) == ["10.0.0.12 has GPUs 4x NVIDIA A100 + 4x NVIDIA H100, the others 8x NVIDIA H100"]


def test_several_differences_are_all_named_fatal_first_then_warnings():
    changed = like(python="3.10.2", gpus=("NVIDIA H100",) * 4, files={"train.py": OTHER_DIGEST})
    verdict = odd_third(changed, {Mismatch.PYTHON})
    assert [d.kind for d in verdict.fatal] == [Mismatch.GPU_COUNT, Mismatch.SAME_FILE]
    assert [d.kind for d in verdict.warnings] == [Mismatch.PYTHON]
    assert verdict.reason.startswith("preflight: 10.0.0.12 has 4 GPUs, the others 8; 10.0.0.12 has train.py")


def test_without_a_majority_every_group_is_named():
    verdict = compare([(A, BASE), (B, BASE), (C, like(gpus=("NVIDIA H100",) * 4)), (D, like(gpus=("NVIDIA H100",) * 4))])
    assert verdict.reason == "preflight: 10.0.0.10, 10.0.0.11 have 8 GPUs; 10.0.0.12, 10.0.0.13 have 4 GPUs"


def test_two_odd_nodes_are_named_together():
    four = like(gpus=("NVIDIA H100",) * 4)
    verdict = compare([(A, BASE), (B, four), (C, BASE), (D, four), (peer("10.0.0.14", "eeeeeeee"), BASE)])
    assert verdict.reason == "preflight: 10.0.0.11, 10.0.0.13 have 4 GPUs, the others 8"


def test_three_values_name_each_minority():
    verdict = compare([(A, BASE), (B, BASE), (C, like(gpus=("NVIDIA H100",) * 4)), (D, like(gpus=("NVIDIA H100",) * 2))])
    assert verdict.reason == "preflight: 10.0.0.12 has 4 GPUs, 10.0.0.13 has 2 GPUs, the others 8"


def test_the_others_can_hold_several_patch_levels():
    verdict = compare([(A, BASE), (B, like(tensorflow="2.21.1")), (C, like(tensorflow="2.20.0"))], {Mismatch.TENSORFLOW_PATCH})
    assert messages(verdict.fatal) == ["10.0.0.12 has TensorFlow 2.20.0, the others 2.21.0 or 2.21.1"]


def test_nodes_sharing_an_address_are_named_by_endpoint():
    here = peer("127.0.0.1", "aaaaaaaa", 7001)
    there = peer("127.0.0.1", "bbbbbbbb", 7002)
    verdict = compare([(here, BASE), (there, like(gpus=()))])
    assert verdict.reason == "preflight: 127.0.0.1:7001 has 8 GPUs; 127.0.0.1:7002 has 0 GPUs"


def test_files_named_only_on_some_nodes_are_compared_on_all():
    verdict = compare([(A, like(files={"a.py": DIGEST})), (B, like(files={"b.py": DIGEST}))])
    assert messages(verdict.fatal) == [
        f"10.0.0.10 has a.py with SHA-256 {DIGEST[:12]}; 10.0.0.11 has no --same-file a.py (allow with --allow-mismatch same-file)",
        f"10.0.0.10 has no --same-file b.py; 10.0.0.11 has b.py with SHA-256 {DIGEST[:12]} (allow with --allow-mismatch same-file)",
    ]


def test_allowable_kinds_are_every_kind_but_the_always_fatal_ones():
    assert set(ALLOWABLE) == {k.value for k in Mismatch} - {k.value for k in ALWAYS_FATAL}
    assert ALWAYS_FATAL == {Mismatch.TENSORFLOW, Mismatch.GPU_COUNT, Mismatch.GPU_OPTION, Mismatch.DATA_NETWORK}


def test_descriptions():
    assert describe_gpus(()) == "none"
    assert describe_gpus(("H100", "A100", "H100")) == "1x A100 + 2x H100"
    assert BASE.describe() == "Python 3.11.9, TensorFlow 2.21.0, GPUs 8x NVIDIA H100"
    assert like(tensorflow=None, gpus=()).describe() == "Python 3.11.9, no TensorFlow, GPUs none"
    assert major_minor("2.21.0") == "2.21"
    assert major_minor("3") == "3"
    assert major_minor(None) is None


versions = st.sampled_from(["2.20.0", "2.21.0", "2.21.1", None])
fingerprints = st.builds(
    Fingerprint,
    python=st.sampled_from(["3.10.4", "3.11.9"]),
    tensorflow=versions,
    gpus=st.lists(st.sampled_from(["A100", "H100"]), max_size=3).map(tuple),
    files=st.dictionaries(st.just("t.py"), st.sampled_from([DIGEST, OTHER_DIGEST, None]), max_size=1),
)


@given(st.lists(fingerprints, min_size=1, max_size=5), st.sets(st.sampled_from(list(Mismatch))))
def test_a_round_is_refused_exactly_when_a_difference_is_not_allowed(prints, allowed):
    members = [(peer(f"10.0.0.{i + 1}", f"{i + 1:08x}"), f) for i, f in enumerate(prints)]
    verdict = compare(members, frozenset(allowed))
    assert all(d.kind in ALWAYS_FATAL or d.kind not in allowed for d in verdict.fatal)
    assert all(d.kind in allowed and d.kind not in ALWAYS_FATAL for d in verdict.warnings)
    if all(f == prints[0] for f in prints):
        assert verdict == Verdict()
    counts = {f.gpu_count for f in prints}
    tensorflows = {major_minor(f.tensorflow) for f in prints}
    assert verdict.refused >= (len(counts) > 1 or len(tensorflows) > 1)
    for d in verdict.fatal + verdict.warnings:
        assert "10.0.0." in d.message
