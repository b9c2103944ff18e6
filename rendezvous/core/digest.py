"""SHA-256 and HMAC-SHA256 that load OpenSSL at their first use, not at import.

`import hashlib` (and `hmac` or `secrets`, which import it) maps OpenSSL's libcrypto into
the process: 3.4 MiB of resident memory and about 5 ms of CPU. A daemon without
--token-file, --sync-dir or --same-file never needs it: the one hash it makes, the frozen
list's digest, comes from CPython's own SHA-256. Every hash in rendezvous goes through here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import hashlib

# CPython's own SHA-256 (a small module of its own, 0.3 ms to load); None on a Python built
# without it (FIPS builds), where OpenSSL's is the only one.
try:
    from _sha2 import sha256 as _builtin_sha256  # CPython 3.12+
except ImportError:
    try:
        from _sha256 import sha256 as _builtin_sha256  # CPython 3.10 and 3.11
    except ImportError:
        _builtin_sha256 = None


def sha256(data: bytes = b"") -> "hashlib._Hash":
    """OpenSSL's SHA-256, the fastest for files and streams."""
    import hashlib

    return hashlib.sha256(data)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of a short value in hex, by CPython's own implementation where it has
    one: it loads no OpenSSL. Every member hashes the frozen list at the freeze, the moment
    the whole job waits on, where loading OpenSSL cost a job of 8 nodes on 2 cores about
    40 ms."""
    return (_builtin_sha256 or sha256)(data).hexdigest()


def hmac_sha256(key: bytes, message: bytes) -> bytes:
    import hmac

    return hmac.digest(key, message, "sha256")


def equal(a: bytes, b: bytes) -> bool:
    """Compare two MACs in constant time."""
    import hmac

    return hmac.compare_digest(a, b)
