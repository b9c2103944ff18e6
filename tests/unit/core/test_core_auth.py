"""The pure MAC logic: keys per job and direction, the challenge, sequence numbers, replays."""

from __future__ import annotations

import pytest

from rendezvous.core.auth import (
    AuthError,
    ReplayGuard,
    check_secret,
    client_stream,
    derive_keys,
    server_stream,
)

SECRET = b"0123456789abcdef0123456789abcdef"
C, S = b"c" * 16, b"s" * 16


def handshake(peer_keys, coordinator_keys):
    """The Join, the challenge and the proof; both sides after them."""
    peer = client_stream(peer_keys, C)
    peer, join_mac = peer.seal(b"join")
    coordinator = server_stream(coordinator_keys, C).open(b"join", join_mac).with_server_nonce(S)
    coordinator, challenge_mac = coordinator.seal(b"challenge")
    peer = peer.with_server_nonce(S).open(b"challenge", challenge_mac)
    peer, proof_mac = peer.seal(b"proof")
    coordinator = coordinator.open(b"proof", proof_mac)
    return peer, coordinator


def test_a_full_handshake_then_messages_both_ways_verify():
    keys = derive_keys(SECRET, "job")
    peer, coordinator = handshake(keys, keys)
    coordinator, mac = coordinator.seal(b"frozen")
    peer = peer.open(b"frozen", mac)
    peer, mac = peer.seal(b"ready")
    assert coordinator.open(b"ready", mac).received == 3


@pytest.mark.parametrize("secret, job", [(b"another secret, just as long!!!", "job"), (SECRET, "other-job")])
def test_another_secret_or_job_fails_at_the_first_message(secret, job):
    with pytest.raises(AuthError):
        handshake(derive_keys(secret, job), derive_keys(SECRET, "job"))


def test_keys_differ_per_direction_so_a_message_cannot_be_reflected():
    keys = derive_keys(SECRET, "job")
    assert keys.to_peer != keys.to_coordinator
    peer, coordinator = handshake(keys, keys)
    _, mac = peer.seal(b"heartbeat")
    with pytest.raises(AuthError):  # a peer's message fed back to the peer
        peer.open(b"heartbeat", mac)


def test_a_replayed_or_reordered_message_fails_on_its_sequence_number():
    keys = derive_keys(SECRET, "job")
    peer, coordinator = handshake(keys, keys)
    after, first = coordinator.seal(b"one")
    _, second = after.seal(b"two")
    peer = peer.open(b"one", first)
    with pytest.raises(AuthError):
        peer.open(b"one", first)  # the same message again
    with pytest.raises(AuthError):
        handshake(keys, keys)[0].open(b"two", second)  # skipped one


def test_a_recorded_join_cannot_answer_a_new_challenge():
    keys = derive_keys(SECRET, "job")
    recorded = client_stream(keys, C)
    recorded, join_mac = recorded.seal(b"join")
    _, old_proof = recorded.with_server_nonce(S).seal(b"proof")
    replayed = server_stream(keys, C).open(b"join", join_mac).with_server_nonce(b"n" * 16)
    replayed, _ = replayed.seal(b"challenge")
    with pytest.raises(AuthError):
        replayed.open(b"proof", old_proof)


def test_a_recorded_coordinator_message_fails_on_another_stream():
    keys = derive_keys(SECRET, "job")
    _, coordinator = handshake(keys, keys)
    _, mac = coordinator.seal(b"release")
    other = client_stream(keys, b"x" * 16).with_server_nonce(S)
    with pytest.raises(AuthError):
        other.open(b"release", mac)


def test_the_mac_covers_every_byte():
    keys = derive_keys(SECRET, "job")
    peer, coordinator = handshake(keys, keys)
    _, mac = coordinator.seal(b"round 2")
    with pytest.raises(AuthError):
        peer.open(b"round 1", mac)


@pytest.mark.parametrize("nonce", [b"", b"short", b"x" * 17])
def test_a_nonce_of_the_wrong_size_is_refused(nonce):
    with pytest.raises(AuthError):
        server_stream(derive_keys(SECRET, "job"), nonce)


def test_keys_never_show_in_a_repr():
    keys = derive_keys(SECRET, "job")
    assert keys.to_peer.hex() not in repr(keys) + repr(client_stream(keys, C))


@pytest.mark.parametrize("secret", [b"", b"short\n", b"x" * 5000])
def test_a_secret_too_short_or_too_long_is_refused(secret):
    with pytest.raises(ValueError, match="bytes"):
        check_secret(secret)


def test_a_trailing_newline_is_not_part_of_the_secret():
    assert check_secret(SECRET + b"\n") == SECRET


def test_the_replay_guard_refuses_a_nonce_seen_before_and_a_stale_request():
    guard = ReplayGuard(window=60).admit(C, sent_at=100, now=100)
    with pytest.raises(AuthError, match="seen before"):
        guard.admit(C, sent_at=101, now=101)
    with pytest.raises(AuthError, match="old"):
        guard.admit(S, sent_at=0, now=100)
    assert C not in guard.admit(S, sent_at=400, now=400).seen  # forgotten after 2 windows
