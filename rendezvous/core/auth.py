"""Message authentication with a job's shared secret (`--token-file`), as pure functions.

Keys. Two keys per job, one per direction, derived from the secret and the job name with
HKDF-SHA256 (RFC 5869): a message of job A never verifies in job B, and a message a
coordinator signed never verifies as one a peer signed (reflection).

Streams (Join). Every message carries an `Auth` (scheme, nonce, mac) in its header; the
MAC is HMAC-SHA256 over the serialized message with `mac` left empty (so the job, the
round, the sender and every body field are covered), preceded by the stream's two nonces
and the message's sequence number in its direction:

    peer                                            coordinator
    Join      nonce=C, mac(C, -, seq 0)      -->
                                             <--   challenge  nonce=S, mac(C, S, seq 0)
    Heartbeat           mac(C, S, seq 1)     -->   (proof: only now is the peer admitted)
    ...                 mac(C, S, seq n)     <->   mac(C, S, seq n)

C and S are fresh random nonces. The coordinator proves the key on its first message,
which covers C: a recorded coordinator message replayed to another stream fails (another
C). The peer proves the key on its second message, which covers S: a recorded Join is
accepted as a Join but the replayer cannot answer the challenge, so it is never admitted.
Sequence numbers refuse a message replayed, dropped or reordered within a stream; the
round and job in the header refuse one of another round or job.

Unary and server-streaming RPCs (Status, and any other RPC): the request is signed like a
Join (nonce C, seq 0); the response(s) like coordinator messages without S (seq 0, 1, ...),
so a response proves the server knows the secret and answers this very request. A replayed
request gets an answer only its replayer can read; an RPC that changes state must also
refuse a request seen before (`ReplayGuard`).

Nothing here reads a clock or the network: nonces and `now` are passed in.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping

from .digest import equal, hmac_sha256
from .record import record, replace

SCHEME = "hmac-sha256"
NONCE_BYTES = 16
MAC_BYTES = 32
# A token longer than this is no stronger and is more likely not a token at all.
MAX_SECRET_BYTES = 4096
MIN_SECRET_BYTES = 16


class AuthError(ValueError):
    """A message that does not prove knowledge of the job's secret."""


class Direction(Enum):
    TO_COORDINATOR = b"peer->coordinator"  # also: request to any server
    TO_PEER = b"coordinator->peer"  # also: a server's response


@record(repr=False)
class Keys:
    """The job's two MAC keys. Never printed: repr hides them."""

    to_coordinator: bytes
    to_peer: bytes

    def __repr__(self) -> str:
        return "Keys(<hidden>)"

    def key(self, direction: Direction) -> bytes:
        return self.to_coordinator if direction is Direction.TO_COORDINATOR else self.to_peer


def _hkdf(secret: bytes, salt: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 with one block of output (RFC 5869)."""
    prk = hmac_sha256(salt, secret)
    return hmac_sha256(prk, info + b"\x01")


def derive_keys(secret: bytes, job: str) -> Keys:
    salt = b"rendezvous/v1 job " + job.encode()
    return Keys(
        to_coordinator=_hkdf(secret, salt, Direction.TO_COORDINATOR.value),
        to_peer=_hkdf(secret, salt, Direction.TO_PEER.value),
    )


def check_secret(secret: bytes) -> bytes:
    """The secret without surrounding whitespace (a trailing newline of an editor);
    ValueError if it is too short or too long to be a token."""
    secret = secret.strip()
    if not MIN_SECRET_BYTES <= len(secret) <= MAX_SECRET_BYTES:
        raise ValueError(
            f"holds {len(secret)} bytes; a token is {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes "
            "(e.g. `openssl rand -hex 32`)"
        )
    return secret


def _mac(key: bytes, direction: Direction, client: bytes, server: bytes, seq: int, payload: bytes) -> bytes:
    framed = b"".join((
        SCHEME.encode(), b"\0", direction.value, b"\0",
        len(client).to_bytes(2, "big"), client, len(server).to_bytes(2, "big"), server,
        seq.to_bytes(8, "big"), payload,
    ))
    return hmac_sha256(key, framed)


class Role(Enum):
    PEER = "peer"  # the client: sends TO_COORDINATOR
    COORDINATOR = "coordinator"  # the server: sends TO_PEER

    @property
    def sends(self) -> Direction:
        return Direction.TO_COORDINATOR if self is Role.PEER else Direction.TO_PEER

    @property
    def receives(self) -> Direction:
        return Direction.TO_PEER if self is Role.PEER else Direction.TO_COORDINATOR


@record(repr=False)
class Stream:
    """One side of an authenticated stream: its nonces and the next sequence numbers.

    Immutable: `seal` and `open` return the state that follows the message."""

    keys: Keys
    role: Role
    client_nonce: bytes
    server_nonce: bytes = b""
    sent: int = 0
    received: int = 0

    def __repr__(self) -> str:
        return f"Stream({self.role.value}, sent={self.sent}, received={self.received})"

    def with_server_nonce(self, nonce: bytes) -> "Stream":
        """The challenge arrived (peer) or was chosen (coordinator)."""
        check_nonce(nonce)
        return replace(self, server_nonce=nonce)

    def seal(self, payload: bytes) -> tuple["Stream", bytes]:
        """The MAC of the next message this side sends, and the state after it."""
        mac = _mac(self.keys.key(self.role.sends), self.role.sends, self.client_nonce,
                   self.server_nonce, self.sent, payload)
        return replace(self, sent=self.sent + 1), mac

    def open(self, payload: bytes, mac: bytes) -> "Stream":
        """Check the MAC of the next message received; AuthError if it is not right."""
        expected = _mac(self.keys.key(self.role.receives), self.role.receives, self.client_nonce,
                        self.server_nonce, self.received, payload)
        if not equal(expected, mac):
            raise AuthError("the message is not signed with this job's token")
        return replace(self, received=self.received + 1)


def check_nonce(nonce: bytes) -> bytes:
    if len(nonce) != NONCE_BYTES:
        raise AuthError(f"a nonce is {NONCE_BYTES} bytes, got {len(nonce)}")
    return nonce


def client_stream(keys: Keys, nonce: bytes) -> Stream:
    """The peer's side of a new stream, or the client's of a request."""
    return Stream(keys, Role.PEER, check_nonce(nonce))


def server_stream(keys: Keys, client_nonce: bytes) -> Stream:
    """The coordinator's side of a stream a peer opened with `client_nonce`."""
    return Stream(keys, Role.COORDINATOR, check_nonce(client_nonce))


@record
class ReplayGuard:
    """Requests seen within `window` seconds, for RPCs where a replayed request would
    change something: a request older than the window, or seen before, is refused."""

    window: float = 60.0
    seen: Mapping[bytes, float] = None  # type: ignore[assignment]  # nonce -> when

    def admit(self, nonce: bytes, sent_at: float, now: float) -> "ReplayGuard":
        """The guard with `nonce` remembered; AuthError for a stale or replayed request."""
        if abs(now - sent_at) > self.window:
            raise AuthError(f"the request is {now - sent_at:+.0f} s old; clocks differ or it is a replay")
        seen = {n: t for n, t in (self.seen or {}).items() if now - t <= 2 * self.window}
        if nonce in seen:
            raise AuthError("the request was seen before (a replay)")
        return replace(self, seen={**seen, nonce: now})
