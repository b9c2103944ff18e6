"""SHA-256 and HMAC-SHA256 that load OpenSSL at their first use, not at import.

`import hashlib` (and `hmac` or `secrets`, which import it) maps OpenSSL's libcrypto into
the process: 3.4 MiB of resident memory and about 6 ms of every daemon's start. A daemon
without --token-file, --sync-dir or --same-file hashes nothing until its job freezes, so
it should not pay that while it waits. Every hash in rendezvous goes through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import hashlib


def sha256(data: bytes = b"") -> "hashlib._Hash":
    import hashlib

    return hashlib.sha256(data)


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    import hmac

    return hmac.digest(key, message, "sha256")


def equal(a: bytes, b: bytes) -> bool:
    """Compare two MACs in constant time."""
    import hmac

    return hmac.compare_digest(a, b)
