"""Whether another worker's TensorFlow port is blocked: only a port that stays silent (not
refused) for the whole window after this node's own worker listens."""

from __future__ import annotations

from rendezvous.core.failure import Failure, recognized
from rendezvous.core.known_failures import TF_PORT_BLOCKED
from rendezvous.core.reach import Knock, Reach, blocked_reason

A, B = "10.0.0.1:2222", "10.0.0.3:2222"


def test_a_port_silent_for_the_window_after_ours_listens_is_blocked():
    reach = Reach(10.0).saw(Knock.REFUSED, {A: Knock.SILENT, B: Knock.REFUSED}, now=0.0)
    assert reach.blocked(100.0) is None  # our own worker does not listen yet: not a TensorFlow job (yet)
    reach = reach.saw(Knock.OPEN, {A: Knock.SILENT, B: Knock.OPEN}, now=5.0)
    assert reach.to_knock((A, B)) == (A,)  # B answered: not knocked at again
    assert reach.blocked(14.9) is None
    assert reach.blocked(15.0) == A


def test_a_refused_or_open_knock_starts_the_window_again():
    reach = Reach(10.0).saw(Knock.OPEN, {A: Knock.SILENT}, now=0.0)
    reach = reach.saw(Knock.OPEN, {A: Knock.REFUSED}, now=8.0)  # its host answered: nothing listens yet
    reach = reach.saw(Knock.OPEN, {A: Knock.SILENT}, now=9.0)
    assert reach.blocked(18.0) is None and reach.blocked(19.0) == A
    assert Reach(10.0).saw(Knock.OPEN, {A: Knock.OPEN}, now=0.0).blocked(100.0) is None


def test_a_command_that_is_no_tensorflow_worker_is_never_failed():
    """Nothing listens on this node's TensorFlow port (torchrun, a shell script): the other
    ports may be filtered, but nobody needs them."""
    reach = Reach(10.0)
    for now in range(100):
        reach = reach.saw(Knock.REFUSED, {A: Knock.SILENT}, now=float(now))
    assert reach.blocked(100.0) is None
    assert Reach(0.0).saw(Knock.OPEN, {A: Knock.SILENT}, now=0.0).blocked(1e9) is None  # 0: never


def test_the_reason_is_recognized_with_its_fix():
    reason = blocked_reason(A, "rank 0, 10.0.0.1 (aaaa)", 60.0)
    failure = Failure(node_id="b", address="10.0.0.3", rank=1, exit_code=6, reason=reason, tail=("hanging",))
    assert recognized(failure).known == TF_PORT_BLOCKED.key
    assert reason in recognized(failure).headline()
