"""Tests of rendezvous.core.family: one IP family for a job whose members differ."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rendezvous.core.advert import Advert
from rendezvous.core.family import Family, choose_family, left_out_message, switch_message, switched
from rendezvous.core.peer import Peer
from rendezvous.core.size import Size
from rendezvous.core.record import replace

ip = ipaddress.ip_address


def member(kind: str, n: int = 1) -> Advert:
    """A member of kind "4" (IPv4 only), "6" (IPv6 only), "46" (dual-stack advertising
    IPv4) or "64" (dual-stack advertising IPv6), its addresses numbered `n`."""
    v4, v6 = ip(f"10.0.0.{n}"), ip(f"fd00::{n}")
    primary, alternate = {"4": (v4, None), "6": (v6, None), "46": (v4, v6), "64": (v6, v4)}[kind]
    peer = Peer(node_id=f"{n:08x}", address=primary, port=7000, tf_port=9000)
    return Advert(peer=peer, job="j", expect=Size.fixed(3), alternate=alternate)


def job(*kinds: str) -> list[Advert]:
    return [member(k, n) for n, k in enumerate(kinds, 1)]


@pytest.mark.parametrize(
    "kinds, version, left_out",
    [
        ((), 4, ()),
        (("4",), 4, ()),
        (("6",), 6, ()),
        (("46", "46"), 4, ()),
        (("64", "64"), 4, ()),  # every member can use IPv4: it wins
        (("46", "46", "6"), 6, ()),  # every member can use IPv6, not IPv4
        (("64", "4"), 4, ()),
        (("46", "4", "6"), 4, (3,)),  # a tie: IPv4
        (("46", "6", "6", "4"), 6, (4,)),  # most can use IPv6
        (("4", "6"), 4, (2,)),
        (("6", "6", "4"), 6, (3,)),
    ],
)
def test_the_family_is_the_one_most_members_can_use_ipv4_on_a_tie(kinds, version, left_out):
    members = job(*kinds)
    family = choose_family(members)
    assert family.version == version
    assert family.left_out == tuple(members[i - 1] for i in left_out)


@given(st.lists(st.sampled_from(["4", "6", "46", "64"]), max_size=12))
def test_every_member_that_can_use_the_family_stays_and_the_others_are_named(kinds):
    members = job(*kinds)
    family = choose_family(members)
    can = {v: sum(v in m.versions for m in members) for v in (4, 6)}
    assert can[family.version] == max(can.values())
    if all(4 in m.versions for m in members):
        assert family.version == 4
    elif all(6 in m.versions for m in members):
        assert family.version == 6
    assert set(family.left_out) == {m for m in members if family.version not in m.versions}
    # the rule ignores which address a member advertises: switching changes nothing
    moved = [m.using(family.version) or m for m in members]
    assert choose_family(moved).version == family.version
    # nor does the order in which they are known
    assert choose_family(members[::-1]).version == family.version


def test_a_dual_stack_member_switches_to_the_jobs_family_and_keeps_its_node_id():
    me = member("46")
    moved = switched(me, Family(6))
    assert moved is not None and moved.node_id == me.node_id
    assert (moved.peer.address, moved.alternate) == (ip("fd00::1"), ip("10.0.0.1"))
    assert switched(moved, Family(6)) is None  # already there
    assert switched(me, Family(4)) is None
    assert switched(member("4"), Family(6)) is None  # it cannot: it is left out


def test_the_switch_names_the_node_it_is_made_for():
    members = job("46", "46", "6")
    me = switched(members[0], choose_family(members))
    assert me is not None
    assert switch_message(me, "j", members) == (
        "job 'j' has IPv6-only node fd00::3 (00000003): this node uses its IPv6 address fd00::1 for the job"
    )
    members = job("46", "6", "6")
    assert "node fd00::2 (00000002) (and 1 more):" in switch_message(switched(members[0], Family(6)), "j", members)


def test_a_switch_back_when_every_member_can_use_the_first_family_says_so():
    members = job("64", "46")
    me = switched(members[0], choose_family(members))
    assert me is not None
    assert switch_message(me, "j", members) == (
        "every member of job 'j' can use IPv4: this node uses its IPv4 address 10.0.0.1 for the job"
    )


def test_a_member_left_out_is_named_with_what_it_has_and_what_it_needs():
    text = left_out_message(member("6", 3), "j", 4)
    assert text.startswith("node fd00::3 (00000003) of job 'j' has only IPv6, and the job uses IPv4")
    assert "it is left out; give it an IPv4 address" in text


def test_versions_of_every_kind():
    assert [m.versions for m in job("4", "6", "46", "64")] == [{4}, {6}, {4, 6}, {4, 6}]
    assert all(replace(m, alternate=None).versions == {m.peer.address.version} for m in job("46", "64"))
