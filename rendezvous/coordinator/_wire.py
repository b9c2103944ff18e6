"""Conversions between protobuf messages and domain objects."""

from __future__ import annotations

import json
import logging
import math
from itertools import islice
from typing import Any, Iterable, Optional

from ..config.timings import Timings
from ..core.admission import Header, Redirection
from ..core.advert import MAX_EXPECT, PROTOCOL_VERSION, Advert, InvalidAdvert, Phase, decode_advert, validate_job
from ..core.adverts import Gossip, Record
from ..core.failure import Failure, bounded
from ..core.auth import AuthError, Keys
from ..core.job import JobView, MemberView
from ..core.peer import Peer, parse_address
from ..core.preflight import Fingerprint
from ..core.progress import Progress, parse_progress
from ..core.size import Size
from ..core.stopping import StopOrder
from ..core.status import NodeStatus, printable
from ..core.tf_config import Membership
from ..v1 import rendezvous_pb2 as pb
from . import _auth

log = logging.getLogger(__name__)

# More adverts than this in one Exchange is no job of ours: the rest are ignored.
MAX_RECORDS = 4 * MAX_EXPECT


def _keepalive(seconds: float) -> list[tuple[str, int]]:
    """HTTP/2 keepalive on every Join stream, both ways: a peer or coordinator that is
    frozen or cut off (no FIN, no RST) ends its streams within twice `seconds` instead of
    holding the round forever. A stream of a live peer carries no data while it waits, so
    pings must be allowed without data."""
    ms = max(1, int(seconds * 1000))
    return [
        ("grpc.keepalive_time_ms", ms),
        ("grpc.keepalive_timeout_ms", ms),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.ping_timeout_ms", ms),
    ]


# What a peer sends is small (a join names one peer); what it receives names up to 4,096
# members, twice in a Status answer. Anything bigger is refused before it is parsed.
MAX_REQUEST_BYTES = 64 * 1024
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
# A connection with no call open this long is closed: idle connections hold descriptors.
MAX_IDLE_MS = 60_000


def channel_options(keepalive: Optional[float] = Timings.keepalive) -> list[tuple[str, int]]:
    """Keepalive pings on streams; `keepalive=None` (short unary calls) sends none.
    http(s)_proxy is ignored: rendezvous traffic never leaves the cluster."""
    pings = _keepalive(keepalive) if keepalive is not None else []
    return [
        ("grpc.enable_http_proxy", 0),
        ("grpc.max_receive_message_length", MAX_RESPONSE_BYTES),
        *pings,
    ]


def server_options(keepalive: float = Timings.keepalive) -> list[tuple[str, int]]:
    return [
        ("grpc.so_reuseport", 0),  # a second daemon must not share this one's port
        *_keepalive(keepalive),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", max(1, int(keepalive * 500))),
        ("grpc.http2.max_ping_strikes", 0),
        ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
        ("grpc.max_connection_idle_ms", MAX_IDLE_MS),
        ("grpc.max_concurrent_streams", 16),  # per connection; Join streams are capped by address
    ]


# StatusResponse.rank of a node that is not a member (yet): 0 is a real rank.
NO_RANK = -1


def header(job: str, round: int, sender: str) -> pb.Header:
    return pb.Header(
        protocol_version=PROTOCOL_VERSION, job=job, round=round, sender_node_id=sender
    )


def header_from_pb(message: pb.Header) -> Header:
    return Header(protocol_version=message.protocol_version, job=message.job, round=message.round)


def redirect_to_pb(redirection: Redirection) -> pb.Redirect:
    redirect = pb.Redirect(reason=redirection.reason)
    if redirection.coordinator is not None:
        redirect.coordinator.CopyFrom(peer_to_pb(redirection.coordinator))
    return redirect


def peer_to_pb(peer: Peer) -> pb.Peer:
    return pb.Peer(
        node_id=peer.node_id, address=str(peer.address), port=peer.port, tf_port=peer.tf_port,
        data_address=str(peer.data_address) if peer.data_address is not None else "",
    )


def peer_from_pb(message: pb.Peer) -> Peer:
    """Raises ValueError for a malformed peer."""
    return Peer(
        node_id=message.node_id,
        address=parse_address(message.address),
        port=message.port,
        tf_port=message.tf_port,
        data_address=parse_address(message.data_address) if message.data_address else None,
    )


def peers_to_pb(peers: Iterable[Peer]) -> list[pb.Peer]:
    return [peer_to_pb(p) for p in peers]


def fingerprint_to_pb(fingerprint: Fingerprint) -> pb.Fingerprint:
    return pb.Fingerprint(
        python=fingerprint.python,
        tensorflow=fingerprint.tensorflow or "",
        gpus=fingerprint.gpus,
        files={path: digest or "" for path, digest in fingerprint.files.items()},
        gpu_ids=fingerprint.gpu_ids,
        gpu_option=fingerprint.gpu_option,
        data_interface=fingerprint.data_interface,
    )


def fingerprint_from_pb(message: pb.Fingerprint) -> Fingerprint:
    return Fingerprint(
        python=message.python,
        tensorflow=message.tensorflow or None,
        gpus=tuple(message.gpus),
        files={path: digest or None for path, digest in message.files.items()},
        gpu_ids=tuple(message.gpu_ids),
        gpu_option=message.gpu_option or "all",  # an older node: --gpus all, as it behaves
        data_interface=message.data_interface,
    )


def optional_fingerprint_from_pb(message: pb.JoinRequest | pb.StatusResponse) -> Optional[Fingerprint]:
    """The fingerprint a join request or a status carries; None from a node too old to send one."""
    return fingerprint_from_pb(message.fingerprint) if message.HasField("fingerprint") else None


def optional_peer_from_pb(message: pb.Peer) -> Optional[Peer]:
    if not message.node_id:
        return None
    try:
        return peer_from_pb(message)
    except ValueError:
        return None


def size_from_pb(message: pb.JoinRequest | pb.Waiting | pb.StatusResponse | pb.JobStatusResponse) -> Size:
    """The peer count a message carries (`Size.fields`; an expect_min of 0 is MAX);
    ValueError if invalid."""
    return Size(message.expect_min or message.expect, message.expect)


def status_to_pb(status: NodeStatus) -> pb.StatusResponse:
    membership = status.membership
    coordinator = status.coordinator
    tf_config = status.tf_config
    response = pb.StatusResponse(
        header=header(status.job, status.round, status.node.node_id),
        phase=status.phase.value,
        **status.expect.fields(),
        members=peers_to_pb(membership.members if membership else ()),
        tf_config=json.dumps(tf_config, separators=(",", ":")) if tf_config else "",
        rank=NO_RANK if status.rank is None else status.rank,
        seen=peers_to_pb(status.seen),
        silent=peers_to_pb(p for p, _ in status.silent), silent_seconds=[age for _, age in status.silent],
        trainer_pid=status.trainer_pid or 0,
        trainer_uptime_seconds=status.trainer_uptime or 0.0,
        warm_pid=status.warm_pid or 0,
        warm_rss_bytes=status.warm_rss or 0,
        exit_code=status.exit_code,  # None leaves it unset: 0 is a real exit code
        tensorflow=status.tensorflow,
        gpus=status.gpus,
        preflight=status.preflight,
        gpu_count=membership.gpus if membership else None,
        ending=status.ending or "",
    )
    response.self.CopyFrom(peer_to_pb(status.node))
    if status.fingerprint is not None:
        response.fingerprint.CopyFrom(fingerprint_to_pb(status.fingerprint))
    if coordinator is not None:
        response.coordinator.CopyFrom(peer_to_pb(coordinator))
    if status.progress is not None:
        response.progress.CopyFrom(progress_to_pb(status.progress))
    if status.failure is not None:
        response.failure.CopyFrom(failure_to_pb(status.failure))
    return response


def _duration(seconds: float) -> Optional[float]:
    """Seconds from the wire: NaN, infinities and negative values mean unknown."""
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def status_from_pb(message: pb.StatusResponse) -> NodeStatus:
    """Raises ValueError for a response that is not a valid status."""
    validate_job(message.header.job)  # printed by `status`: no control characters
    members = tuple(peer_from_pb(p) for p in message.members)
    gpus = message.gpu_count if message.HasField("gpu_count") else None
    membership = Membership(message.header.job, message.header.round, members, gpus) if members else None
    pid = message.trainer_pid or None
    return NodeStatus(
        node=peer_from_pb(message.self),
        job=message.header.job,
        expect=size_from_pb(message),
        phase=Phase(message.phase),
        round=message.header.round,
        seen=tuple(peer_from_pb(p) for p in message.seen),
        silent=tuple(zip(map(peer_from_pb, message.silent), message.silent_seconds)),
        following=optional_peer_from_pb(message.coordinator) if not members else None,
        membership=membership,
        trainer_pid=pid,
        trainer_uptime=_duration(message.trainer_uptime_seconds) if pid else None,
        warm_pid=message.warm_pid or None,
        warm_rss=(message.warm_rss_bytes or None) if message.warm_pid else None,
        exit_code=message.exit_code if message.HasField("exit_code") else None,
        fingerprint=optional_fingerprint_from_pb(message),
        tensorflow=dict(message.tensorflow),
        gpus=dict(message.gpus),
        preflight=tuple(message.preflight),
        progress=progress_from_pb(message.progress) if message.HasField("progress") else None,
        failure=optional_failure_from_pb(message),
        ending=printable(message.ending) or None,
    )


def failure_to_pb(failure: Failure) -> pb.CommandFailure:
    return pb.CommandFailure(
        node_id=failure.node_id, address=failure.address, rank=NO_RANK if failure.rank is None else failure.rank,
        exit_code=failure.exit_code, signal=failure.signal, reason=failure.reason, error_type=failure.error_type,
        message=failure.message, tail=failure.tail, from_error_file=failure.from_error_file, known=failure.known,
    )


def failure_from_pb(message: pb.CommandFailure) -> Failure:
    """Bounded and scrubbed, whoever sent it."""
    return bounded(Failure(
        node_id=message.node_id, address=message.address, rank=None if message.rank < 0 else message.rank,
        exit_code=message.exit_code, signal=message.signal, reason=message.reason, error_type=message.error_type,
        message=message.message, tail=tuple(message.tail[-1000:]), from_error_file=message.from_error_file,
        known=message.known,
    ))


def optional_failure_from_pb(message: Any, name: str = "failure") -> Optional[Failure]:
    """The failure a message carries in its field `name`; None where it has none."""
    return failure_from_pb(getattr(message, name)) if message.HasField(name) else None


_PROGRESS_FIELDS = ("epoch", "epochs", "step", "loss", "images_per_s")


def progress_to_pb(progress: Progress) -> pb.Progress:
    known = {name: getattr(progress, name) for name in _PROGRESS_FIELDS}
    return pb.Progress(**{k: v for k, v in known.items() if v is not None}, metrics=dict(progress.metrics))


def progress_from_pb(message: pb.Progress) -> Progress:
    """Raises ValueError for progress that breaks the contract (a NaN sent anyway)."""
    known = {name: getattr(message, name) for name in _PROGRESS_FIELDS if message.HasField(name)}
    return parse_progress(json.dumps({**known, "metrics": dict(message.metrics)}))


def _member_to_pb(member: MemberView) -> pb.MemberStatus:
    message = pb.MemberStatus(
        peer=peer_to_pb(member.peer),
        rank=NO_RANK if member.rank is None else member.rank,
        phase=member.phase.value,
        command_uptime_seconds=member.uptime,  # None leaves it unset
        exit_code=member.exit_code,
        straggler=member.straggler,
        heard_seconds_ago=member.heard_ago,  # None leaves it unset
        silent=member.silent,
    )
    if member.progress is not None:
        message.progress.CopyFrom(progress_to_pb(member.progress))
    return message


def _member_from_pb(message: pb.MemberStatus, round: int) -> MemberView:
    return MemberView(
        peer=peer_from_pb(message.peer),
        rank=None if message.rank == NO_RANK else message.rank,
        phase=Phase(message.phase),
        round=round,
        uptime=message.command_uptime_seconds if message.HasField("command_uptime_seconds") else None,
        exit_code=message.exit_code if message.HasField("exit_code") else None,
        progress=progress_from_pb(message.progress) if message.HasField("progress") else None,
        straggler=message.straggler,
        heard_ago=message.heard_seconds_ago if message.HasField("heard_seconds_ago") else None,
        silent=message.silent,
    )


def job_view_to_pb(view: JobView, sender: str) -> pb.JobStatusResponse:
    response = pb.JobStatusResponse(
        header=header(view.job, view.round, sender),
        coordinating=view.coordinating,
        phase=view.phase,
        **view.expect.fields(),
        restarts=view.restarts,
        last_abort_reason=view.last_abort or "",
        members=[_member_to_pb(m) for m in view.members],
    )
    if view.coordinator is not None:
        response.coordinator.CopyFrom(peer_to_pb(view.coordinator))
    if view.last_failure is not None:
        response.last_failure.CopyFrom(failure_to_pb(view.last_failure))
    return response


def job_view_from_pb(message: pb.JobStatusResponse) -> JobView:
    """Raises ValueError for a response that is not a valid job status."""
    round = message.header.round
    return JobView(
        job=message.header.job,
        round=round,
        phase=message.phase,
        expect=size_from_pb(message),
        coordinator=optional_peer_from_pb(message.coordinator),
        members=tuple(_member_from_pb(m, round) for m in message.members),
        restarts=message.restarts,
        last_abort=message.last_abort_reason or None,
        coordinating=message.coordinating,
        last_failure=optional_failure_from_pb(message, "last_failure"),
    )


def advert_to_pb(advert: Advert, serial: int = 0, goodbye: bool = False) -> pb.AdvertRecord:
    return pb.AdvertRecord(
        address=str(advert.peer.address), port=advert.peer.port, txt=advert.to_txt(), serial=serial, goodbye=goodbye,
    )


def advert_from_pb(m: pb.AdvertRecord) -> Optional[Advert]:
    """The advert a record carries, checked like a TXT record over mDNS; None (logged) for
    untrusted junk."""
    try:
        return decode_advert({k.encode(): v.encode() for k, v in m.txt.items()}, [m.address], m.port)
    except InvalidAdvert as exc:
        log.debug("ignoring an advert of %s: %s", printable(m.address), exc)
        return None


def gossip_to_pb(gossip: Gossip, sender: str) -> pb.Adverts:
    return pb.Adverts(
        header=header("", 0, sender),
        adverts=[advert_to_pb(r.advert, r.serial, r.goodbye) for r in gossip.records],
        known=gossip.known,
    )


def gossip_from_pb(message: pb.Adverts, source: Optional[str] = None) -> Gossip:
    """The valid records of an Exchange and its digest; invalid records are untrusted junk,
    logged and left out, exactly like TXT records over mDNS. From an untrusted `source`,
    only the records of its own address are read (core.adverts): a flood of others costs
    no parsing."""
    records = []
    adverts = message.adverts if source is None else (
        m for m in message.adverts if m.address == source or m.txt.get("alt") == source
    )
    for m in islice(adverts, MAX_RECORDS):
        advert = advert_from_pb(m)
        if advert is not None:
            records.append(Record(advert, m.serial, m.goodbye))
    known = dict(islice(message.known.items(), MAX_RECORDS))
    return Gossip(tuple(records), known, source)


def exchange_in(request: pb.Adverts, keys: Optional[Keys], source: str) -> tuple[_auth.Signer, Gossip]:
    """What an Exchange from `source` brings in, and the signer of its answer. Without a
    token the sender is untrusted (core.adverts); with one, a request signed with it is
    trusted whole and any other brings nothing in, though it is answered (unsigned), like
    `rendezvous peers` without the token."""
    if keys is None:
        return _auth.Signer(None), gossip_from_pb(request, source)
    try:
        signer = _auth.open_request(keys, request)
    except AuthError as exc:
        log.debug("an Exchange from %s brings nothing in: %s", printable(source), exc)
        return _auth.Signer(None), Gossip(known=dict(islice(request.known.items(), MAX_RECORDS)))
    return signer, gossip_from_pb(request)


def stop_order_to_pb(order: Optional[StopOrder]) -> Optional[pb.StopOrder]:
    if order is None:
        return None
    message = pb.StopOrder(address=order.address, user=order.user, reason=order.reason)
    if order.grace is not None:
        message.stop_grace = order.grace
    return message


def stop_order_from_pb(message: pb.StopOrder) -> StopOrder:
    """ValueError for a grace that is not a number of seconds from 0."""
    grace = message.stop_grace if message.HasField("stop_grace") else None
    return StopOrder(address=message.address, user=message.user, reason=message.reason, grace=grace)
