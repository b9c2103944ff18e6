"""Tests of rendezvous.core.view: a peer's view of its job and whom it joins."""

from __future__ import annotations

import math
import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rendezvous.core.advert import Advert, Phase
from rendezvous.core.peer import Peer
from rendezvous.core.view import Gone, Hinted, PeerView, Seen, Target, conflicts, describe_missing
from rendezvous.core.size import Size
from rendezvous.core.record import FrozenError, replace

ip = ipaddress.ip_address


def peer(address: str, node_id: str, port: int = 7000, tf_port: int = 9000) -> Peer:
    return Peer(node_id=node_id, address=ip(address), port=port, tf_port=tf_port)


def advert(address: str, node_id: str, *, job: str = "job", expect: int = 3, port: int = 7000, **kw) -> Advert:
    return Advert(peer=peer(address, node_id, port=port), job=job, expect=Size.fixed(expect), **kw)


ME = advert("10.0.0.10", "aaaaaaaa")
LOW = advert("10.0.0.9", "bbbbbbbb")
HIGH = advert("10.0.0.100", "cccccccc")


def view(*others: Advert, me: Advert = ME) -> PeerView:
    """The view after seeing `others`, each confirmed by its Status."""
    v = PeerView(me)
    for a in others:
        v = seen(v, a)
    return v


def seen(v: PeerView, a: Advert) -> PeerView:
    """An advert, seen and confirmed."""
    return v.seen(a).confirm(a)


# --------------------------------------------------------------------------
# seen / gone / with_me
# --------------------------------------------------------------------------


def test_a_new_view_holds_only_me():
    v = PeerView(ME)
    assert v.others == {}
    assert v.adverts == [ME]
    assert v.peers == [ME.peer]


def test_seen_adds_a_peer_of_the_same_job():
    v = view(LOW)
    assert v.others == {"bbbbbbbb": LOW}
    assert v.adverts == [ME, LOW]


def test_seen_is_immutable():
    v = PeerView(ME)
    v2 = v.seen(LOW)
    assert v.others == {}
    assert v2 is not v
    with pytest.raises(FrozenError):
        v.me = LOW  # type: ignore[misc]


def test_seen_ignores_other_jobs():
    v = PeerView(ME)
    assert v.seen(advert("10.0.0.1", "dddddddd", job="other")) is v


def test_seen_ignores_my_own_advert():
    v = PeerView(ME)
    assert v.seen(ME) is v
    assert v.seen(ME.with_phase(Phase.FROZEN, "10.0.0.9:7000")) is v


def test_seen_updates_an_advert_in_place():
    frozen = LOW.with_phase(Phase.FROZEN, LOW.peer.endpoint)
    v = view(LOW, HIGH).seen(frozen)
    assert v.others["bbbbbbbb"] == frozen
    assert len(v.others) == 2


def test_seen_updates_a_moved_peer():
    moved = advert("10.0.0.50", "bbbbbbbb")
    v = view(LOW).seen(moved)
    assert v.others == {"bbbbbbbb": moved}
    assert v.peers == [ME.peer, moved.peer]


def test_gone_removes_a_peer():
    v = view(LOW, HIGH).gone("bbbbbbbb")
    assert set(v.others) == {"cccccccc"}


def test_gone_of_an_unknown_peer_is_the_same_view():
    v = view(LOW)
    assert v.gone("dddddddd") is v
    assert v.gone(ME.node_id) is v


def test_a_hint_introduces_a_node_this_view_does_not_know():
    v = view().hinted(LOW)
    assert v.others == {"bbbbbbbb": LOW} and v.unconfirmed(0.0) == [LOW]  # a hint, like any advert


def test_a_hint_never_changes_what_a_known_node_claims():
    v = view(LOW)
    assert v.hinted(replace(LOW, phase=Phase.FROZEN)) is v


def test_a_hint_never_brings_back_a_node_that_said_goodbye_but_discovery_does():
    v = view(LOW).gone("bbbbbbbb")
    assert v.hinted(LOW) is v  # its last Status request, arriving after its goodbye
    assert v.seen(LOW).others == {"bbbbbbbb": LOW}
    assert v.seen(LOW).hinted(HIGH).others == {"bbbbbbbb": LOW, "cccccccc": HIGH}


def test_apply_takes_in_what_discovery_reports():
    v = PeerView(ME).apply(Seen(LOW)).apply(Seen(HIGH)).apply(Gone("bbbbbbbb"))
    assert v == PeerView(ME).seen(LOW).seen(HIGH).gone("bbbbbbbb")
    assert v.apply(Hinted(LOW)) is v  # it said goodbye: its late request brings it back not
    assert PeerView(ME).apply(Hinted(LOW)) == PeerView(ME).hinted(LOW)


def test_apply_of_what_changes_nothing_is_the_same_view():
    v = view(LOW)
    for event in (Seen(LOW), Hinted(replace(LOW, phase=Phase.FROZEN)), Gone("dddddddd"), Seen(advert("10.0.0.1", "dddddddd", job="other"))):
        assert v.apply(event) is v, event


@given(st.lists(st.tuples(st.sampled_from(["seen", "gone", "hinted"]), st.sampled_from([LOW, HIGH, ME])), max_size=12))
def test_apply_is_the_event_s_own_method(events):
    applied = called = PeerView(ME)
    for kind, a in events:
        event = Gone(a.node_id) if kind == "gone" else Seen(a) if kind == "seen" else Hinted(a)
        applied = applied.apply(event)
        called = called.gone(a.node_id) if kind == "gone" else getattr(called, kind)(a)
        assert applied == called


def test_a_node_known_only_from_a_hint_is_dropped_when_it_does_not_answer():
    hinted = view().hinted(LOW)
    assert hinted.unanswered("bbbbbbbb").others == {}
    assert hinted.unanswered("bbbbbbbb").hinted(LOW).others == {"bbbbbbbb": LOW}  # it may answer later
    confirmed = hinted.confirm(LOW)
    assert confirmed.unconfirmed(0.0) == []
    # confirmed once: a late answer is forgiven once, a second silence in a row drops it
    assert confirmed.unanswered("bbbbbbbb").others == {"bbbbbbbb": LOW}
    assert confirmed.unanswered("bbbbbbbb").unanswered("bbbbbbbb").others == {}
    assert confirmed.unanswered("bbbbbbbb").confirm(LOW).unanswered("bbbbbbbb").others == {"bbbbbbbb": LOW}
    heard = confirmed.seen(LOW)  # discovery heard of it too: the same advert, no longer a hint
    assert heard.others == {"bbbbbbbb": LOW} and heard.unanswered("bbbbbbbb") is heard
    assert view(LOW).unanswered("bbbbbbbb").others == {"bbbbbbbb": LOW}


def test_a_hint_of_another_job_or_of_me_is_ignored():
    v = view()
    assert v.hinted(advert("10.0.0.9", "bbbbbbbb", job="other")) is v
    assert v.hinted(ME) is v


def test_gone_does_not_touch_the_original():
    v = view(LOW)
    v.gone("bbbbbbbb")
    assert "bbbbbbbb" in v.others


def test_with_me_replaces_my_advert_and_keeps_the_others():
    me2 = ME.with_phase(Phase.RUNNING)
    v = view(LOW).with_me(me2)
    assert v.me == me2
    assert v.others == {"bbbbbbbb": LOW}


def test_peers_are_sorted_numerically():
    v = view(HIGH, LOW)
    assert [str(p.address) for p in v.peers] == ["10.0.0.9", "10.0.0.10", "10.0.0.100"]


# --------------------------------------------------------------------------
# conflicts
# --------------------------------------------------------------------------


def test_no_conflicts_when_everyone_agrees():
    assert conflicts(view(LOW, HIGH), 0.0) == []


def test_conflicts_name_both_expect_values_and_the_peer():
    odd = advert("10.0.0.9", "bbbbbbbb", expect=4)
    (message,) = conflicts(view(odd, HIGH), 0.0)
    assert "--expect 4" in message
    assert "--expect 3" in message
    assert "10.0.0.9 (bbbbbbbb)" in message
    assert "10.0.0.10 (aaaaaaaa)" in message
    assert "'job'" in message


def test_only_the_coordinators_expect_rules_and_the_odd_member_is_the_one_refused():
    odd_member = advert("10.0.0.100", "cccccccc", expect=2)
    assert conflicts(view(LOW, odd_member), 0.0) == [], "this node agrees with its coordinator: it waits"
    (message,) = conflicts(view(LOW, me=odd_member), 0.0)
    assert "the job's coordinator" in message and "10.0.0.9 (bbbbbbbb)" in message
    assert "start it with --expect 3" in message and "(set by --expect)" in message
    (message,) = conflicts(view(LOW, me=odd_member), 0.0, "/etc/rendezvous/rendezvous.conf: expect")
    assert "(set by /etc/rendezvous/rendezvous.conf: expect); start it with --expect 3" in message


def test_the_coordinator_is_never_refused_by_a_members_expect():
    coordinator = advert("10.0.0.1", "dddddddd", expect=5)
    assert conflicts(view(LOW, HIGH, me=coordinator), 0.0) == []


def test_a_suspected_coordinator_is_no_conflict_its_successor_is():
    odd = advert("10.0.0.9", "bbbbbbbb", expect=4)
    v = view(odd, HIGH).suspect(odd.node_id, until=30.0)
    assert conflicts(v, 10.0) == [] and len(conflicts(v, 30.0)) == 1


def test_other_jobs_never_conflict():
    assert conflicts(view(advert("10.0.0.1", "dddddddd", job="other", expect=9)), 0.0) == []


# --------------------------------------------------------------------------
# target
# --------------------------------------------------------------------------


def test_alone_i_target_myself():
    t = PeerView(ME).target(0.0)
    assert t == Target(ME.peer.endpoint, ME.peer)


def test_target_is_the_numerically_lowest_peer():
    t = view(HIGH, LOW).target(0.0)
    assert t.peer == LOW.peer
    assert t.endpoint == "10.0.0.9:7000"


def test_target_is_me_when_i_am_lowest():
    t = view(HIGH, me=LOW).target(0.0)
    assert t.peer == LOW.peer


def test_target_prefers_ipv4_over_lower_ipv6():
    six = advert("::1", "dddddddd")
    t = view(six).target(0.0)
    assert t.peer == ME.peer


def test_target_after_the_lowest_peer_is_gone():
    assert view(HIGH, LOW).gone("bbbbbbbb").target(0.0).peer == ME.peer


def test_frozen_job_coordinator_wins_over_the_lowest_peer():
    # HIGH advertises that the job froze with ME's neighbour as coordinator,
    # although LOW is the lowest peer this node sees.
    coordinator = advert("10.0.0.50", "dddddddd", port=7005)
    frozen = HIGH.with_phase(Phase.FROZEN, coordinator.peer.endpoint)
    t = view(LOW, frozen, coordinator).target(0.0)
    assert t.endpoint == "10.0.0.50:7005"
    assert t.peer == coordinator.peer


def test_frozen_job_with_an_unknown_coordinator_targets_the_endpoint():
    frozen = HIGH.with_phase(Phase.RUNNING, "10.0.0.1:7777")
    t = view(LOW, frozen).target(0.0)
    assert t == Target("10.0.0.1:7777", None)
    assert t.peer is None


def test_frozen_coordinator_matching_rendezvous_endpoint_not_tf_endpoint():
    # the advertised coordinator is a rendezvous endpoint: a TF endpoint must not match
    frozen = HIGH.with_phase(Phase.FROZEN, LOW.peer.tf_endpoint)
    t = view(LOW, frozen).target(0.0)
    assert t.endpoint == LOW.peer.tf_endpoint
    assert t.peer is None


@pytest.mark.parametrize("phase", [Phase.FROZEN, Phase.RUNNING, Phase.FINISHED])
def test_every_non_waiting_phase_with_a_coordinator_counts_as_frozen(phase):
    t = view(LOW, HIGH.with_phase(phase, "10.0.0.1:7777")).target(0.0)
    assert t.endpoint == "10.0.0.1:7777"


def test_waiting_adverts_with_a_coordinator_are_not_frozen():
    waiting = replace(HIGH, coordinator="10.0.0.1:7777")
    assert waiting.phase is Phase.WAITING
    assert view(LOW, waiting).target(0.0).peer == LOW.peer


def test_frozen_adverts_without_a_coordinator_are_ignored():
    assert view(LOW, HIGH.with_phase(Phase.FROZEN)).target(0.0).peer == LOW.peer
    assert view(LOW, HIGH.with_phase(Phase.FROZEN, "")).target(0.0).peer == LOW.peer


def test_several_frozen_adverts_the_lowest_one_decides():
    a = HIGH.with_phase(Phase.FROZEN, "10.0.0.2:7000")
    b = LOW.with_phase(Phase.FROZEN, "10.0.0.1:7000")
    assert view(a, b).target(0.0).endpoint == "10.0.0.1:7000"
    assert view(b, a).target(0.0).endpoint == "10.0.0.1:7000"


def test_my_own_frozen_phase_does_not_redirect_me():
    me = ME.with_phase(Phase.FROZEN, "10.0.0.1:7777")
    assert view(HIGH, me=me).target(0.0).peer == ME.peer


def test_frozen_coordinator_over_ipv6_is_found_among_peers():
    coordinator = advert("2001:db8::1", "dddddddd", port=7005)
    me = advert("2001:db8::2", "aaaaaaaa")
    frozen = advert("2001:db8::3", "cccccccc").with_phase(Phase.FROZEN, "[2001:db8::1]:7005")
    t = view(frozen, coordinator, me=me).target(0.0)
    assert t.peer == coordinator.peer


node_ids = st.from_regex(r"[0-9a-f]{8,32}", fullmatch=True)


@settings(deadline=None)
# one endpoint holds one daemon: a second node id there supersedes the first (test_core_view_restarted)
@given(st.lists(st.tuples(st.ip_addresses(v=4), node_ids), min_size=1, max_size=10,
                unique_by=(lambda t: t[1], lambda t: t[0])))
def test_every_waiting_peer_agrees_on_the_target(entries):
    ads = [Advert(peer=Peer(node_id=n, address=a, port=7000, tf_port=9000), job="j", expect=len(entries)) for a, n in entries]
    targets = set()
    for me in ads:
        v = PeerView(me)
        for other in ads:
            v = seen(v, other)
        targets.add(v.target(0.0))
    assert len(targets) == 1
    (target,) = targets
    assert int(target.peer.address) == min(int(a) for a, _ in entries)


# --------------------------------------------------------------------------
# progress and describe_missing
# --------------------------------------------------------------------------


def test_missing_summary_counts_the_missing():
    assert describe_missing(view(LOW)) == (
        "saw 2 of 3 peers of job 'job': 10.0.0.9 (bbbbbbbb), 10.0.0.10 (aaaaaaaa); 1 never appeared"
    )


def test_missing_summary_alone():
    assert describe_missing(PeerView(ME)).endswith("; 2 never appeared")


def test_missing_summary_names_the_peers_left_out_for_the_token_and_does_not_count_them():
    """Seen, but failing authentication (another token) or without a token: they do not
    make the job, and the summary says why of each instead of counting them."""
    me = replace(ME, auth=True)
    v = view(replace(LOW, auth=True), replace(HIGH, auth=False), me=me).distrust(LOW.node_id)
    assert describe_missing(v) == (
        "saw 1 of 3 peers of job 'job': 10.0.0.10 (aaaaaaaa); heard but not in the job with this node: "
        "10.0.0.9 (bbbbbbbb) failed authentication: it does not hold this node's --token-file; "
        "10.0.0.100 (cccccccc) runs it without a token, this node with --token-file; 0 never appeared"
    )


def test_missing_summary_never_goes_negative():
    extra = advert("10.0.0.200", "dddddddd")
    assert describe_missing(view(LOW, HIGH, extra)).endswith("; 0 never appeared")


# --------------------------------------------------------------------------
# unreachable peers are left out of the election
# --------------------------------------------------------------------------


def test_a_suspected_coordinator_is_skipped_until_the_suspicion_lapses():
    v = view(LOW, HIGH).suspect(LOW.node_id, until=30.0)
    assert v.target(10.0) == Target(ME.peer.endpoint, ME.peer)
    assert v.live_peers(10.0) == sorted([ME.peer, HIGH.peer]), "not counted while suspected"
    assert v.suspected(10.0) == [LOW.peer]
    assert v.peers == sorted([ME.peer, LOW.peer, HIGH.peer]), "still seen, only not elected"
    assert v.target(30.0).peer == LOW.peer and v.suspected(30.0) == []


def test_the_next_lapse_is_the_earliest_suspicion_still_running():
    assert view(LOW, HIGH).next_lapse(10.0) is None
    v = view(LOW, HIGH).suspect(LOW.node_id, until=30.0).suspect(HIGH.node_id, until=20.0)
    assert v.next_lapse(10.0) == 10.0
    assert v.next_lapse(25.0) == 5.0
    assert v.next_lapse(30.0) is None


def test_a_new_advert_makes_it_a_candidate_again_but_not_the_same_one_again():
    suspected = view(LOW).suspect(LOW.node_id, until=30.0)
    assert suspected.seen(LOW).target(10.0).peer == ME.peer, "a cache refresh is no sign of life"
    announced = replace(LOW, phase=Phase.RUNNING)
    assert suspected.seen(announced).is_suspected(LOW.node_id, 10.0) is False


def test_this_node_and_unknown_nodes_are_never_suspected():
    v = view(LOW)
    assert v.suspect(ME.node_id, 30.0).target(0.0).peer == LOW.peer
    assert v.suspect("dddddddd", 30.0).unreachable == {}


def test_gone_forgets_the_suspicion():
    v = view(LOW).suspect(LOW.node_id, 30.0).gone(LOW.node_id)
    assert v.unreachable == {}


def test_expect_conflict_message_names_both_values_without_nested_parentheses():
    other = advert("10.0.0.9", "bbbbbbbb", expect=2)
    [message] = conflicts(view(other), 0.0)
    assert "--expect 2" in message and "--expect 3" in message
    assert "((" not in message and "))" not in message


def test_a_frozen_advert_of_a_round_others_moved_on_from_is_stale():
    # HIGH died coordinating round 1 (its advert stays cached); LOW already waits for round 2
    running = replace(HIGH, phase=Phase.RUNNING, coordinator=HIGH.peer.endpoint, round=1)
    assert view(running).target(0.0).peer == HIGH.peer
    assert view(running, replace(LOW, round=2)).target(0.0).peer == LOW.peer


def test_a_suspicion_lasts_until_the_peer_answers_again():
    v = view(LOW, HIGH).suspect(LOW.node_id, until=math.inf)
    assert v.is_suspected(LOW.node_id, 1e12)
    assert LOW in v.unconfirmed(0.0)  # its Status is asked again
    trusted = v.confirm(LOW)
    assert not trusted.is_suspected(LOW.node_id, 0.0)
    assert trusted.target(0.0).peer == LOW.peer
    assert trusted.unconfirmed(0.0) == []


def test_the_timeout_summary_names_an_address_shared_by_two_nodes():
    twin = advert("10.0.0.9", "eeeeeeee", port=7001)
    summary = describe_missing(view(LOW, twin))
    assert "10.0.0.9 is the address of 2 nodes" in summary
    assert "two hosts are configured with the same address" in summary
    assert "same address" not in describe_missing(view(LOW, HIGH))


# --------------------------------------------------------------------------
# authentication: distrusted peers, adverts with and without a token
# --------------------------------------------------------------------------


def test_a_distrusted_peer_is_left_out_for_good_whatever_it_advertises_next():
    v = view(LOW, HIGH).distrust(LOW.node_id)
    assert v.target(0.0).peer == ME.peer
    v = v.seen(replace(LOW, phase=Phase.RUNNING, coordinator=LOW.peer.endpoint))
    assert v.target(0.0).peer == ME.peer
    assert LOW.peer not in v.live_peers(0.0)


def test_this_node_is_never_distrusted():
    assert view(LOW).distrust(ME.node_id).distrusted == frozenset()


def test_a_frozen_advert_naming_a_distrusted_coordinator_is_not_followed():
    following = replace(HIGH, phase=Phase.RUNNING, coordinator=LOW.peer.endpoint)
    v = view(LOW, following).distrust(LOW.node_id)
    assert v.target(0.0).peer == ME.peer


def test_with_a_token_adverts_without_one_do_not_count():
    me = replace(ME, auth=True)
    v = view(LOW, replace(HIGH, expect=Size.fixed(5)), me=me)
    assert v.target(0.0).peer == me.peer
    assert conflicts(v, 0.0) == []  # its --expect is no claim this node acts on


def test_without_a_token_an_advert_wanting_one_is_a_conflict():
    [conflict] = conflicts(view(LOW, replace(HIGH, auth=True, expect=Size.fixed(5))), 0.0)
    assert "this job requires a token" in conflict and "--token-file" in conflict


# --------------------------------------------------------------------------
# adverts are hints until the peer's own Status confirms them
# --------------------------------------------------------------------------


def test_an_unconfirmed_advert_is_not_elected_and_its_claims_are_not_acted_on():
    liar = replace(LOW, expect=Size.fixed(1), phase=Phase.RUNNING, coordinator="10.0.0.1:7000")
    v = PeerView(ME).seen(liar).seen(HIGH).confirm(HIGH)
    assert v.target(0.0).peer == ME.peer
    assert conflicts(v, 0.0) == []
    assert v.unconfirmed(0.0) == [liar]


def test_only_adverts_that_could_change_what_this_node_does_are_asked():
    # a waiting peer above the one this node joins, agreeing with it, proves itself by joining
    waiting = advert("10.0.0.200", "dddddddd")
    v = view(LOW).seen(waiting).seen(HIGH)
    assert v.target(0.0).peer == LOW.peer and v.unconfirmed(0.0) == []
    assert v.present(0.0) == sorted([LOW.peer, ME.peer, HIGH.peer, waiting.peer]), "seen all the same"
    lower = advert("10.0.0.5", "eeeeeeee")
    assert v.seen(lower).unconfirmed(0.0) == [lower], "it would be elected"
    assert view().seen(lower).seen(HIGH).unconfirmed(0.0) == [lower, HIGH], "this node coordinates: all"


@pytest.mark.parametrize("claims", [
    {"phase": Phase.RUNNING, "coordinator": "10.0.0.1:7000"},  # frozen elsewhere: a redirect
    {"round": 2},  # a newer round
    {"expect": Size.fixed(5)},  # a conflict
    {"auth": True},  # wants a token this node lacks
])
def test_a_peer_above_the_target_is_asked_when_it_claims_what_this_node_would_act_on(claims):
    claiming = replace(HIGH, **claims)
    assert view(LOW).seen(claiming).unconfirmed(0.0) == [claiming]


def test_a_peer_frozen_with_the_coordinator_this_node_joins_is_not_asked():
    running = replace(HIGH, phase=Phase.RUNNING, coordinator=LOW.peer.endpoint)
    assert view(LOW).seen(running).unconfirmed(0.0) == []


def test_a_hint_above_the_target_is_asked_as_no_answer_is_what_drops_it():
    assert view(LOW).hinted(HIGH).unconfirmed(0.0) == [HIGH]


def test_present_leaves_suspected_peers_out():
    v = view(LOW, HIGH).suspect(LOW.node_id, until=30.0)
    assert v.present(10.0) == sorted([ME.peer, HIGH.peer])


def test_claims_are_taken_from_the_status_not_from_the_advert():
    running = replace(LOW, phase=Phase.RUNNING, coordinator=HIGH.peer.endpoint)
    v = view(LOW, HIGH).seen(running)  # its Status still says it waits
    assert v.target(0.0).peer == LOW.peer
    assert v.unconfirmed(0.0) == [running]
    assert v.confirm(running).target(0.0).endpoint == HIGH.peer.endpoint
    assert v.confirm(running).unconfirmed(0.0) == []


def test_a_confirmation_of_another_endpoint_does_not_count():
    moved = advert("10.0.0.1", LOW.node_id)
    v = view(LOW).seen(moved)
    assert v.target(0.0).peer == ME.peer
    assert v.confirm(advert("10.0.0.2", "dddddddd")).confirmed == v.confirmed  # not seen: ignored


def test_gone_forgets_the_confirmation():
    assert view(LOW).gone(LOW.node_id).confirmed == {}


def test_a_node_of_the_job_on_the_other_ip_family_is_kept_for_the_family_but_is_no_candidate():
    v6 = advert("fd00::5", "dddddddd")
    v = view(v6, LOW)
    assert set(v.others) == {LOW.node_id, v6.node_id}
    assert v.peers == [LOW.peer, ME.peer] and v.live_peers(0.0) == [LOW.peer, ME.peer]
    assert v.unconfirmed(0.0) == []  # it is not asked: it cannot be a candidate
    assert v.family.version == 4 and v.family.left_out == (v6,)
    assert view(advert("fd00::5", "dddddddd", job="other")).family.left_out == ()


def test_a_dual_stack_advert_of_the_other_family_counts_at_its_address_of_this_nodes_family():
    # it advertised IPv6 for a while; an IPv4-only node that missed its switch back still
    # finds it, asks it at its IPv4 address, and joins it once that Status confirms it
    on_v6 = advert("fd00::9", "bbbbbbbb", alternate=ip("10.0.0.9"))
    on_v4 = on_v6.using(4)
    v = PeerView(ME).seen(on_v6)
    assert v.peers == [on_v4.peer, ME.peer] and v.unconfirmed(0.0) == [on_v4]
    assert v.confirm(on_v4).target(0.0).peer == on_v4.peer
    assert v.confirm(on_v6).target(0.0).peer == ME.peer, "a Status on the other family confirms nothing here"


def test_a_dual_stack_node_that_switched_sees_the_ipv6_members_and_not_the_ipv4_adverts():
    me = replace(ME, alternate=ip("fd00::10"))
    v6 = advert("fd00::5", "dddddddd")
    dual = advert("10.0.0.9", "bbbbbbbb", alternate=ip("fd00::9"))
    v = view(v6, dual, me=me)
    assert v.family.version == 6 and v.family.left_out == ()
    assert v.live_peers(0.0) == [dual.peer, ME.peer]  # before the switch: its own family
    moved = v.with_me(me.using(6))
    assert moved.live_peers(0.0) == [peer("fd00::5", "dddddddd"), peer("fd00::10", ME.node_id)]
    assert moved.unconfirmed(0.0) == [] and moved.target(0.0).peer == peer("fd00::5", "dddddddd")
    switched_dual = dual.using(6)
    assert seen(moved, switched_dual).live_peers(0.0)[1] == switched_dual.peer


def test_distrusted_nodes_do_not_choose_the_family():
    v6, v6b = advert("fd00::5", "dddddddd"), advert("fd00::6", "eeeeeeee")
    me = replace(ME, alternate=ip("fd00::10"))
    assert view(v6, v6b, me=me).family.version == 6
    assert view(v6, v6b, me=me).distrust(v6.node_id).distrust(v6b.node_id).family.version == 4
