"""Tests of rendezvous.core.admission.answer: the coordinator's whole answer to a Join, its
checks in their order. Every combination of what can be wrong with a Join is tried, and the
answer is the first check's in the order the protocol gives them."""

from __future__ import annotations

import itertools

import pytest

from rendezvous.core.admission import Answer, Header, JoinAsk, Refused, admit, answer
from rendezvous.core.advert import PROTOCOL_VERSION
from rendezvous.core.round import RejectReason, Round
from rendezvous.core.size import Size
from rendezvous.core.stopping import StopOrder
from rendezvous.core.view import Target
from test_core_admission import TWO, gathering, running
from test_core_round import A, B, C

STOP = StopOrder("10.0.0.1", "alice", "maintenance")

# What the round makes of a Join whose header, caller and stream are fine: (state, this
# node's target, the round asked for, the joiner's --expect), and the check that answers.
SITUATIONS = {
    "admitted": (lambda: gathering(A), Target(A.endpoint, A), 1, TWO),
    "elsewhere": (lambda: gathering(A), Target(C.endpoint, C), 1, TWO),
    "not known yet": (lambda: gathering(A), Target(A.endpoint, A), 5, TWO),
    "round out of range": (lambda: running(), Target(A.endpoint, A), 5, TWO),
    "expect unreadable": (lambda: gathering(A), Target(A.endpoint, A), 1, "expect_min 3 is above expect 2"),
    "expect differs": (lambda: gathering(A), Target(A.endpoint, A), 1, Size.fixed(3)),
}
PEERS = {"readable": B, "unreadable": "address 'x' is not an IP address", "elsewhere": B, "not allowed": B}


def allowed(peer: str) -> frozenset:
    """The hosts allowed in the job (--allow-host): every one but B's for "not allowed"."""
    return frozenset({A.address} if peer == "not allowed" else {A.address, B.address})


def ask(situation: str, job: str, peer: str) -> tuple[Round, Target, JoinAsk]:
    make, target, asked, expect = SITUATIONS[situation]
    source = "10.0.0.200" if peer == "elsewhere" else str(B.address)
    return make(), target, JoinAsk(Header(PROTOCOL_VERSION, job, asked), source, PEERS[peer], expect)


def expected(state: Round, ask: JoinAsk, situation: str, job: str, stopped: bool, peer: str, duplicate: bool) -> str:
    """Which check answers: the first that fails, in the protocol's order."""
    if job != "job":
        return "header"
    if stopped:
        return "stop"
    if peer != "readable":
        return "bad peer"
    if duplicate:
        return "duplicate"
    return situation


def kind(reply: Answer) -> str:
    if reply.refusal is not None:
        message = reply.refusal.message
        if message.startswith("bad peer"):
            return "bad peer"
        return "header" if "asked a node of job" in message else "round out of range"
    if reply.stop is not None:
        return "stop"
    if reply.duplicate:
        return "duplicate"
    if reply.redirection is not None:
        return "not known yet" if "not known here yet" in reply.redirection.reason else "elsewhere"
    if reply.rejection is not None:
        assert reply.rejection.reason is RejectReason.EXPECT_MISMATCH
        unreadable = SITUATIONS["expect unreadable"][3]
        return "expect unreadable" if str(unreadable) in reply.rejection.message else "expect differs"
    assert reply.steps
    return "admitted"


@pytest.mark.parametrize("situation,job,stopped,peer,duplicate", list(itertools.product(
    SITUATIONS, ("job", "other"), (False, True), PEERS, (False, True))))
def test_the_first_check_that_fails_answers(situation, job, stopped, peer, duplicate):
    state, target, join = ask(situation, job, peer)
    reply = answer(state, A, target, join, own=1, stopped=STOP if stopped else None,
                   streaming={B.node_id} if duplicate else set(), now=0.0, allowed=allowed(peer))
    assert kind(reply) == expected(state, join, situation, job, stopped, peer, duplicate)
    # exactly one reply, or the steps that admit
    replies = [reply.refusal, reply.rejection, reply.redirection, reply.stop, reply.duplicate or None]
    assert sum(r is not None for r in replies) + bool(reply.steps) == 1


def test_an_admitted_join_gets_the_steps_of_admit_and_its_peer():
    state, target, join = ask("admitted", "job", "readable")
    reply = answer(state, A, target, join, own=1, stopped=None, streaming=set(), now=2.0)
    assert reply.steps == admit(state, B, 1, TWO, 2.0)
    assert reply.peer == B and reply.warning is None


def test_what_a_refused_caller_is_warned_of():
    def warned(situation: str, peer: str, duplicate: bool = False):
        state, target, join = ask(situation, "job", peer)
        return answer(state, A, target, join, own=1, stopped=None,
                      streaming={B.node_id} if duplicate else set(), now=0.0, allowed=allowed(peer)).warning

    assert warned("admitted", "elsewhere") == (
        "bad peer", f"refused a Join from 10.0.0.200: it claims address {B.address} but connects from 10.0.0.200")
    assert warned("admitted", "not allowed") == ("bad peer", f"refused a Join from {B.address}: {B.address} is not "
                                                 "one of the hosts allowed in the job (--allow-host, or the Slurm "
                                                 "step's nodes)")
    assert warned("admitted", "unreadable") == ("bad peer", f"refused a Join from {B.address}: {PEERS['unreadable']}")
    assert warned("admitted", "readable", duplicate=True) == (
        "duplicate", f"refused a second stream for member {B.node_id} from {B.address}")
    kind_, text = warned("round out of range", "readable")
    assert kind_ == "round" and text.startswith(f"rejected {B.describe()}: round 5 is out of range")
    assert warned("expect differs", "readable")[0] == RejectReason.EXPECT_MISMATCH.value
    assert warned("expect unreadable", "readable") == (
        "expect_mismatch", f"rejected {B.describe()}: {B.describe()}: --expect {SITUATIONS['expect unreadable'][3]}")
    assert warned("elsewhere", "readable") is None and warned("not known yet", "readable") is None


def test_a_refused_header_names_the_version():
    state, target, join = ask("admitted", "job", "readable")
    old = JoinAsk(Header(PROTOCOL_VERSION + 1, "job", 1), join.source, B, TWO)
    reply = answer(state, A, target, old, own=1, stopped=STOP, streaming=set(), now=0.0)
    assert reply.refusal.reason is Refused.VERSION_MISMATCH and reply.warning is None


def test_a_join_from_outside_the_allowed_hosts_is_a_bad_peer():
    """--allow-host (or the Slurm step's nodes): checked with the address, before the round;
    no hosts named lets every address in."""
    state, target, join = ask("admitted", "job", "not allowed")
    reply = answer(state, A, target, join, own=1, stopped=None, streaming=set(), now=0.0, allowed=allowed("not allowed"))
    assert reply.refusal.reason is Refused.BAD_REQUEST and not reply.steps
    assert reply.refusal.message == (f"bad peer: {B.address} is not one of the hosts allowed in the job "
                                     "(--allow-host, or the Slurm step's nodes)")
    assert answer(state, A, target, join, own=1, stopped=None, streaming=set(), now=0.0).steps
