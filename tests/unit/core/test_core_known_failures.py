"""The table of known failures: each entry recognized in the lines TensorFlow really prints
(copied from runs on TensorFlow 2.21), none in an ordinary error, and the fix carried from
the failing member to every line that shows the failure."""

from __future__ import annotations

import pytest

from rendezvous.coordinator._wire import failure_from_pb, failure_to_pb
from rendezvous.core import job as jobs
from rendezvous.core.failure import Failure, bounded, failure_to_dict, recognized
from rendezvous.core.known_failures import (
    KNOWN_FAILURES, SCRIPT_TF_CONFIG, STRATEGY_LATE, known_failure, recognize, tf_config_assignment)
from rendezvous.core.round import RoundPhase, finished

from test_core_round import A, B, released_round

# What each failure's stderr ends with (cut to the lines that matter).
SEEN = {
    "keras3-fit": [
        "    ValueError: Attempt to convert a value (PerReplica:{",
        "      0: <tf.Tensor: shape=(64, 28, 28), dtype=float32, numpy=",
        "}) with an unsupported type (<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.",
    ],
    "strategy-late": [
        '  File ".../tensorflow/python/eager/context.py", line 1083, in configure_collective_ops',
        '    raise RuntimeError("Collective ops must be configured at program startup")',
        "RuntimeError: Collective ops must be configured at program startup",
    ],
    "group-size": [
        "E0000 00:00:1796679953.826307   11305 worker.cc:436] Bad status from CompleteGroupDistributed: INTERNAL: "
        "Device /job:worker/replica:0/task:1/device:CPU:0 is joining a group with size3, but that group has size 2 "
        "(group_key=1)",
        "The error could be from a previous operation. Restart your program to reset.",
        "         [[{{node CollectiveReduceV2}}]] [Op:__inference_f_14]",
    ],
    "tf-port-in-use": [
        "E0000 00:00:1796679954.510412   11041 add_port.cc:83] Failed to add port to server: No address added out "
        "of total 1 resolved for '0.0.0.0:53867'",
        "E0000 00:00:1796679954.514055   11041 grpc_server_lib.cc:618] UNKNOWN: Could not start gRPC server",
        "tensorflow.python.framework.errors_impl.UnknownError: Could not start gRPC server",
    ],
}


def test_keras_3_is_recognized_by_the_last_line_alone():
    """The PerReplica value it prints is longer than the 40 lines kept: its first line is gone."""
    assert recognize(SEEN["keras3-fit"][-1:]).key == "keras3-fit"


@pytest.mark.parametrize("key", sorted(SEEN))
def test_each_failure_is_recognized_in_what_tensorflow_prints(key):
    assert recognize(SEEN[key], tf_port=53867).key == key


def test_every_entry_has_a_fix_and_a_link_into_troubleshooting():
    for known in (*KNOWN_FAILURES, SCRIPT_TF_CONFIG):
        assert known_failure(known.key) is known
        assert known.fix and "\n" not in known.fix
        assert known.link == f"docs/troubleshooting.md#{known.anchor}"


def test_an_ordinary_error_is_not_a_known_failure():
    assert recognize(["Traceback (most recent call last):", "RuntimeError: shard 7 is corrupt"]) is None
    assert recognize([]) is None
    assert known_failure("") is None and known_failure("from-a-newer-version") is None


def test_tensorflow_on_another_port_than_ours_means_the_script_set_its_own_tf_config():
    """The classic tutorial's TF_CONFIG (localhost:12345) in a script run by rendezvous: the
    clash it causes looks like a port in use, but the fix is to delete the script's lines."""
    clash = ["E0000 add_port.cc:83] Failed to add port to server: No address added out of total 1 resolved "
             "for '0.0.0.0:12345'", "UnknownError: Could not start gRPC server"]
    assert recognize(clash, tf_port=53867) is SCRIPT_TF_CONFIG
    assert recognize(clash, tf_port=12345).key == "tf-port-in-use"
    assert recognize(clash).key == "tf-port-in-use"  # without the port: only what the lines say
    started = ["I0000 grpc_server_lib.cc:467] Started server with target: grpc://localhost:12345", "Hanging"]
    assert recognize(started, tf_port=29631) is SCRIPT_TF_CONFIG
    assert recognize(["I0000 grpc_server_lib.cc:467] Started server with target: grpc://10.0.0.2:29631"],
                     tf_port=29631) is None


def failed(tail, **changes) -> Failure:
    values = dict(node_id="bbbbbbbb", address="10.0.0.10", rank=1, exit_code=1, tail=tuple(tail))
    return Failure(**{**values, **changes})


def test_the_fix_is_on_the_failure_line_in_the_json_and_survives_the_wire():
    failure = recognized(failed(SEEN["keras3-fit"]), tf_port=53867)
    assert failure.known == "keras3-fit"
    line = failure.headline()
    assert line.startswith("node bbbbbbbb (10.0.0.10), rank 1, exited with code 1: }) with an unsupported type")
    assert line.endswith("; fix: Keras 3's model.fit fails under MultiWorkerMirroredStrategy: pip install tf-keras, "
                         "set TF_USE_LEGACY_KERAS=1 before importing TensorFlow and use tf.keras (or a custom "
                         "training loop) (see docs/troubleshooting.md#known-keras3-fit)")
    shown = failure_to_dict(failure)
    assert (shown["known"], shown["link"]) == ("keras3-fit", "docs/troubleshooting.md#known-keras3-fit")
    assert shown["fix"].startswith("Keras 3's model.fit fails")
    assert failure_from_pb(failure_to_pb(failure)) == failure
    plain = failed(["RuntimeError: shard 7 is corrupt"])
    assert recognized(plain) == plain and "fix" not in plain.headline()
    assert failure_to_dict(plain)["fix"] is None


def test_a_key_this_version_does_not_know_shows_no_fix():
    failure = bounded(failed(["RuntimeError: x"], known="from-a-newer-version\x1b[31m"))
    assert failure.known_failure is None and failure.hint == ""
    assert "fix" not in failure.headline()


def test_a_signal_is_the_cause_even_when_the_tail_shows_a_known_failure():
    killed = recognized(failed(SEEN["tf-port-in-use"], exit_code=137, signal="SIGKILL"))
    assert killed.known == "" and killed.cause == "killed by SIGKILL"
    # a command stopped for too long carries a reason and a signal: the reason is its cause
    stopped = recognized(failed(SEEN["strategy-late"], exit_code=6, signal="SIGSTOP", reason="command stopped"))
    assert stopped.known == "strategy-late"


def test_status_job_and_its_json_carry_the_fix_the_failing_member_recognized():
    sent = recognized(failed(SEEN["strategy-late"]))
    result = finished(released_round(), B.node_id, 1, failure=sent)
    assert result.state.phase is RoundPhase.ABORTED and result.state.failure.known == "strategy-late"
    board = jobs.aborted(jobs.Board(), result.state.abort_reason, result.state.failure)
    view = jobs.job_view(result.state, board, A, 0.0)
    (line,) = [l for l in jobs.job_table(view).splitlines() if l.startswith("last failure:")]
    assert line.endswith(f"; fix: {STRATEGY_LATE.fix} (see docs/troubleshooting.md#known-strategy-late)")
    shown = jobs.job_to_dict(view)["last_failure"]
    assert (shown["known"], shown["fix"], shown["link"]) == ("strategy-late", STRATEGY_LATE.fix, STRATEGY_LATE.link)


def test_a_script_that_sets_tf_config_is_found_and_one_that_reads_it_is_not():
    tutorial = 'import json, os\n\nos.environ["TF_CONFIG"] = json.dumps(tf_config)\n'
    assert tf_config_assignment(tutorial) == (3, 'os.environ["TF_CONFIG"] = json.dumps(tf_config)')
    for sets in ["os.environ['TF_CONFIG']=x", 'environ.update(TF_CONFIG="{}")', 'os.environ.update({"TF_CONFIG": c})',
                 'os.putenv("TF_CONFIG", c)']:
        assert tf_config_assignment(sets) is not None, sets
    for fine in ['tf_config = json.loads(os.environ["TF_CONFIG"])', 'if os.environ["TF_CONFIG"] == old: pass',
                 'os.environ.setdefault("TF_CONFIG", c)', '# os.environ["TF_CONFIG"] = ... deleted', ""]:
        assert tf_config_assignment(fine) is None, fine


def test_the_abort_every_node_ends_with_carries_the_fix_once():
    """The abort's reason is the last line each node prints (`rendezvous: error: ...`)."""
    sent = recognized(failed(SEEN["keras3-fit"]))
    result = finished(released_round(), B.node_id, 1, failure=sent)
    assert result.state.abort_reason.count("; fix: ") == 1
    assert result.state.abort_reason.endswith("(see docs/troubleshooting.md#known-keras3-fit)")
    board = jobs.aborted(jobs.Board(), result.state.abort_reason, result.state.failure)
    view = jobs.job_view(result.state, board, A, 0.0)
    (line,) = [l for l in jobs.job_table(view).splitlines() if l.startswith("last failure:")]
    assert line.count("; fix: ") == 1
