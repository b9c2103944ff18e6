"""The `Auth` header field, filled and checked with the pure logic of `rendezvous.core.auth`.

`Signer` holds one side's state of one stream or request. Any RPC can use it, unary and
server-streaming ones included (see `sign_request` / `open_request`): the client signs its
request, the server checks it and signs every response with the same signer, the client
checks each response. With no keys (a job without a token) every call is a no-op.
"""

from __future__ import annotations

import os
from typing import Optional, TypeVar

from google.protobuf.message import Message

from ..core import auth
from ..core.auth import AuthError, Keys
from ..v1 import rendezvous_pb2 as pb

M = TypeVar("M", bound=Message)


def new_nonce() -> bytes:
    return os.urandom(auth.NONCE_BYTES)


def _unsigned(message: Message) -> bytes:
    """The bytes a MAC covers: the message with its mac left empty."""
    copy = type(message)()
    copy.CopyFrom(message)
    copy.header.auth.mac = b""  # type: ignore[attr-defined]
    return copy.SerializeToString(deterministic=True)


class Signer:
    """Signs what this side sends and checks what it receives, in order."""

    def __init__(self, stream: Optional[auth.Stream]) -> None:
        self.stream = stream

    @property
    def active(self) -> bool:
        return self.stream is not None

    def seal(self, message: M, nonce: bytes = b"", timestamp_ms: int = 0) -> M:
        """A signed copy of `message` (the message itself when there is no key): broadcast
        messages are shared between streams."""
        if self.stream is None:
            return message
        sealed = type(message)()
        sealed.CopyFrom(message)
        sealed.header.auth.CopyFrom(  # type: ignore[attr-defined]
            pb.Auth(scheme=auth.SCHEME, nonce=nonce, timestamp_ms=timestamp_ms)
        )
        self.stream, mac = self.stream.seal(_unsigned(sealed))
        sealed.header.auth.mac = mac  # type: ignore[attr-defined]
        return sealed

    def open(self, message: Message) -> None:
        """AuthError unless `message` is the next one signed with the job's key."""
        if self.stream is None:
            return
        signed = message.header.auth  # type: ignore[attr-defined]
        if signed.scheme != auth.SCHEME:
            raise AuthError("the message is not signed: the sender has no token")
        self.stream = self.stream.open(_unsigned(message), signed.mac)

    def accept_challenge(self, message: Message) -> None:
        """The coordinator's first message: take its nonce, then check it (the peer)."""
        if self.stream is not None:
            signed = message.header.auth  # type: ignore[attr-defined]
            if signed.scheme != auth.SCHEME:
                raise AuthError("the message is not signed: the sender has no token")
            self.stream = self.stream.with_server_nonce(signed.nonce)
        self.open(message)


def client_signer(keys: Optional[Keys]) -> tuple[Signer, bytes]:
    """A peer's signer for a new stream or request, and the nonce its first message carries."""
    if keys is None:
        return Signer(None), b""
    nonce = new_nonce()
    return Signer(auth.client_stream(keys, nonce)), nonce


def server_signer(keys: Optional[Keys], first: Message) -> Signer:
    """The server's signer for a stream or request whose first message is `first`;
    AuthError if that message is not signed with the job's key."""
    if keys is None:
        return Signer(None)
    signed = first.header.auth  # type: ignore[attr-defined]
    if signed.scheme != auth.SCHEME:
        raise AuthError("the message is not signed: the sender has no token")
    signer = Signer(auth.server_stream(keys, signed.nonce))
    signer.open(first)
    return signer


def sign_request(keys: Optional[Keys], request: M, now_ms: int = 0) -> tuple[Signer, M]:
    """For unary and server-streaming RPCs: the signed request, and the signer that checks
    the response(s) with `Signer.open`."""
    signer, nonce = client_signer(keys)
    return signer, signer.seal(request, nonce, now_ms)


def open_request(keys: Optional[Keys], request: Message) -> Signer:
    """The server's side of `sign_request`: AuthError for a request not signed with the
    job's key; the signer then signs the response(s) with `Signer.seal`. A request that
    changes state should also go through a `core.auth.ReplayGuard`."""
    return server_signer(keys, request)
