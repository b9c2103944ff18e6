"""One IP family for a whole job, when its members do not all have the same one.

Every member advertises one address and, on a dual-stack host, its address of the other
family too (`Advert.alternate`). Every node applies the same rule to the members it knows
of, so they agree once they know the same members: IPv4 when every member can use it,
else IPv6 when every member can, else the family most members can use (IPv4 on a tie).
The first two cases are the third one's extremes, so the rule is the majority alone.
Members that cannot use the job's family are left out, and named.

A dual-stack node advertising the other family switches its advert to its alternate
address (`Advert.using`) while its round is not frozen: the election and TF_CONFIG then
see one family only.
"""

from __future__ import annotations

from typing import Optional, Sequence

from .advert import Advert
from .record import record


@record
class Family:
    """The IP version a job uses, and the members that cannot use it."""

    version: int
    left_out: tuple[Advert, ...] = ()


def choose_family(members: Sequence[Advert]) -> Family:
    """The family most `members` can use, IPv4 on a tie (every member can: all of them)."""
    can4, can6 = (sum(v in m.versions for m in members) for v in (4, 6))
    version = 4 if can4 >= can6 else 6
    return Family(version, tuple(m for m in members if version not in m.versions))


def left_out_message(member: Advert, job: str, version: int) -> str:
    """What to say of a member of `job` that cannot use the job's family."""
    has = "/".join(f"IPv{v}" for v in sorted(member.versions))
    return (
        f"node {member.peer.describe()} of job {job!r} has only {has}, and the job uses IPv{version}, "
        f"which most of its members have: it is left out; give it an IPv{version} address "
        f"(--address or --interface) to include it"
    )


def switch_message(me: Advert, job: str, members: Sequence[Advert]) -> str:
    """Why this node now advertises its address of another family (`me`, switched): the
    members of `job` that cannot use the family it advertised before."""
    version, before = me.peer.address.version, me.alternate.version if me.alternate else 0
    only = sorted((m.peer for m in members if before not in m.versions and m.node_id != me.node_id))
    uses = f"this node uses its IPv{version} address {me.peer.address} for the job"
    if not only:
        return f"every member of job {job!r} can use IPv{version}: {uses}"
    more = f" (and {len(only) - 1} more)" if len(only) > 1 else ""
    return f"job {job!r} has IPv{version}-only node {only[0].describe()}{more}: {uses}"


def switched(me: Advert, family: Family) -> Optional[Advert]:
    """`me` on the job's family, when it advertises the other one and has an address of
    this one; None when it needs no switch or cannot make one."""
    moved = me.using(family.version)
    return moved if moved is not None and moved != me else None
