"""What a node advertises over DNS-SD, and the strict parsing of what others advertise.

The TXT record is untrusted input from the network: anything malformed is refused with
`InvalidAdvert`, which discovery logs and ignores.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Mapping, Optional, Sequence

from .numbers import parse_whole
from .peer import IPAddress, Peer, parse_address, parse_endpoint
from .record import record, replace
from .size import MAX_PEERS, Size

SERVICE_TYPE = "_tfrendezvous._tcp.local."
PROTOCOL_VERSION = 1

JOB_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
MAX_EXPECT = MAX_PEERS
# The longest TXT value shown as it is (the GPUs, the TensorFlow version).
MAX_SHOWN = 100


class Phase(str, Enum):
    """Where a node is in its round, as advertised and as shown by `status`."""

    WAITING = "waiting"
    FROZEN = "frozen"
    RUNNING = "running"
    FINISHED = "finished"


class InvalidAdvert(ValueError):
    """A TXT record that is not a valid rendezvous advert."""


def validate_job(job: str) -> str:
    if not isinstance(job, str) or not JOB_PATTERN.fullmatch(job):
        raise ValueError(
            f"job name must be 1-63 characters of letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit; got {job!r}"
        )
    return job


@record
class Advert:
    """One node's advertisement: its identity, its job and where it is in the round."""

    peer: Peer
    job: str
    expect: Size
    protocol: int = PROTOCOL_VERSION
    phase: Phase = Phase.WAITING
    round: int = 1
    # rendezvous endpoint (host:port) of the coordinator once the round is frozen
    coordinator: Optional[str] = None
    # For `rendezvous peers`: the command's TensorFlow version, and the GPUs (`8x NVIDIA
    # H100`, `none`); None when not known.
    tensorflow: Optional[str] = None
    gpus: Optional[str] = None
    # The job wants a token (`--token-file`); the token itself never leaves the node.
    auth: bool = False
    # A dual-stack node's address of the other IP family (TXT `alt`), which it switches
    # to when its job uses that family (core.family).
    alternate: Optional[IPAddress] = None

    @property
    def node_id(self) -> str:
        return self.peer.node_id

    @property
    def instance_name(self) -> str:
        return f"{self.peer.node_id}.{SERVICE_TYPE}"

    @property
    def host_name(self) -> str:
        # One host name per node: a shared one merges A records across nodes.
        return f"{self.peer.node_id}.local."

    @property
    def versions(self) -> frozenset[int]:
        """The IP families this node can use for its job."""
        return frozenset(a.version for a in (self.peer.address, self.alternate) if a is not None)

    def using(self, version: int) -> Optional["Advert"]:
        """This advert on its address of IP `version` (swapped with its alternate when that
        is the one), or None when it has none."""
        if self.peer.address.version == version:
            return self
        if self.alternate is None or self.alternate.version != version:
            return None
        return replace(self, peer=replace(self.peer, address=self.alternate), alternate=self.peer.address)

    def with_phase(self, phase: Phase, coordinator: Optional[str] = None) -> "Advert":
        return replace(self, phase=phase, coordinator=coordinator)

    def to_txt(self) -> dict[str, str]:
        txt = {
            "v": str(self.protocol),
            "job": self.job,
            "expect": str(self.expect),
            "node": self.peer.node_id,
            "port": str(self.peer.port),
            "tfport": str(self.peer.tf_port),
            "phase": self.phase.value,
            "round": str(self.round),
        }
        if self.coordinator:
            txt["coord"] = self.coordinator
        if self.tensorflow:
            txt["tf"] = _printable(self.tensorflow)
        if self.gpus:
            txt["gpus"] = _printable(self.gpus)
        if self.auth:
            txt["auth"] = "1"
        if self.alternate is not None:
            txt["alt"] = str(self.alternate)
        if self.peer.data_address is not None:
            txt["data"] = str(self.peer.data_address)
        return txt


def _printable(text: str) -> str:
    """Short printable ASCII, as every decoder accepts it: a GPU name is free text."""
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in text[:MAX_SHOWN])


def _text(props: Mapping[bytes, Optional[bytes]], key: str) -> str:
    raw = props.get(key.encode())
    if raw is None:
        raise InvalidAdvert(f"missing TXT key {key!r}")
    try:
        return raw.decode("ascii")
    except (UnicodeDecodeError, AttributeError):
        raise InvalidAdvert(f"TXT key {key!r} is not ASCII: {raw!r}") from None


def _int(props: Mapping[bytes, Optional[bytes]], key: str, low: int, high: int) -> int:
    text = _text(props, key)
    value = parse_whole(text)
    if value is None:
        raise InvalidAdvert(f"TXT key {key!r} is not a number: {text!r}")
    if not low <= value <= high:
        raise InvalidAdvert(f"TXT key {key!r} out of range {low}..{high}: {value}")
    return value


def _shown(props: Mapping[bytes, Optional[bytes]], key: str) -> Optional[str]:
    """A value that is only shown (short printable ASCII), or None: a bad one costs the
    advert nothing else."""
    raw = props.get(key.encode())
    if not isinstance(raw, bytes) or len(raw) > MAX_SHOWN:
        return None
    text = raw.decode("ascii", errors="replace")
    return text if text.isascii() and text.isprintable() else None


def read_protocol(props: Mapping[bytes, Optional[bytes]]) -> int:
    """The protocol version of a TXT record, read before anything else is trusted."""
    return _int(props, "v", 0, 65535)


def decode_advert(
    props: Mapping[bytes, Optional[bytes]], addresses: Sequence[str], srv_port: int
) -> Advert:
    """Build an Advert from a resolved service; raise InvalidAdvert for anything off."""
    protocol = read_protocol(props)
    if protocol != PROTOCOL_VERSION:
        raise InvalidAdvert(f"protocol version {protocol}, this node speaks {PROTOCOL_VERSION}")
    job = _text(props, "job")
    try:
        validate_job(job)
    except ValueError as exc:
        raise InvalidAdvert(str(exc)) from None
    try:
        expect = Size.parse(_text(props, "expect"))
    except ValueError as exc:
        raise InvalidAdvert(f"TXT key 'expect' {exc}") from None
    port = _int(props, "port", 1, 65535)
    if port != srv_port:
        raise InvalidAdvert(f"TXT port {port} differs from SRV port {srv_port}")
    tf_port = _int(props, "tfport", 1, 65535)
    round_ = _int(props, "round", 1, 2**63 - 1)
    try:
        phase = Phase(_text(props, "phase"))
    except ValueError:
        raise InvalidAdvert(f"unknown phase {props.get(b'phase')!r}") from None
    coordinator = _text(props, "coord") if b"coord" in props else None
    if coordinator is not None:
        try:
            parse_endpoint(coordinator)  # numeric only: nothing may send us to DNS
        except ValueError as exc:
            raise InvalidAdvert(f"TXT key 'coord': {exc}") from None
    auth = _int(props, "auth", 0, 1) == 1 if b"auth" in props else False
    alternate = _alternate(props)
    try:
        address = _primary(addresses, alternate)
        data = parse_address(_text(props, "data")) if b"data" in props else None
        peer = Peer(node_id=_text(props, "node"), address=address, port=port, tf_port=tf_port, data_address=data)
    except ValueError as exc:
        raise InvalidAdvert(str(exc)) from None
    return Advert(
        peer=peer,
        job=job,
        expect=expect,
        protocol=protocol,
        phase=phase,
        round=round_,
        coordinator=coordinator,
        tensorflow=_shown(props, "tf"),
        gpus=_shown(props, "gpus"),
        auth=auth,
        alternate=alternate,
    )


def _alternate(props: Mapping[bytes, Optional[bytes]]) -> Optional[IPAddress]:
    """TXT `alt`: a numeric IP address without a zone, neither loopback, link-local,
    multicast nor unspecified (peers could not reach it)."""
    if b"alt" not in props:
        return None
    text = _text(props, "alt")
    try:
        address = parse_address(text)
    except ValueError as exc:
        raise InvalidAdvert(f"TXT key 'alt': {exc}") from None
    if getattr(address, "scope_id", None):
        raise InvalidAdvert(f"TXT key 'alt': {address} has a zone, which means nothing to another host")
    if address.is_loopback or address.is_link_local or address.is_multicast or address.is_unspecified:
        raise InvalidAdvert(f"TXT key 'alt': {address} cannot be reached from another host")
    return address


def _primary(addresses: Sequence[str], alternate: Optional[IPAddress]) -> IPAddress:
    """The advertised address: the first one resolved that is not the alternate (a
    dual-stack node's service has both), of the other family than the alternate."""
    parsed = (parse_address(a) for a in addresses)
    primary = next((a for a in parsed if a != alternate), None)
    if primary is None:
        raise InvalidAdvert("no address" + (f" besides the alternate {alternate}" if alternate else ""))
    if alternate is not None and alternate.version == primary.version:
        raise InvalidAdvert(f"TXT key 'alt': {alternate} is of the family of the address {primary}")
    return primary
