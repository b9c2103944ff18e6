"""SHA-256 and HMAC-SHA256 through rendezvous.core.digest: the right values, and OpenSSL
loaded only at the first hash, never by importing the daemon."""

from __future__ import annotations

import subprocess
import sys

from rendezvous.core import auth, digest


def test_sha256_and_hmac_sha256_give_the_standard_values():
    assert digest.sha256(b"abc").hexdigest() == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")  # FIPS 180-2
    assert digest.hmac_sha256(b"Jefe", b"what do ya want for nothing?").hex() == (
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")  # RFC 4231, case 2


def test_short_values_hash_the_same_without_openssl_and_on_a_python_without_its_own(monkeypatch):
    values = (b"", b"abc", bytes(range(256)) * 10)
    assert digest._builtin_sha256 is not None  # this Python has CPython's own SHA-256
    for value in values:
        assert digest.sha256_hex(value) == digest.sha256(value).hexdigest()
    monkeypatch.setattr(digest, "_builtin_sha256", None)  # a FIPS build: OpenSSL's only
    for value in values:
        assert digest.sha256_hex(value) == digest.sha256(value).hexdigest()


def test_the_job_keys_are_hkdf_sha256_as_rfc_5869_computes_them():
    """Daemons of any version derive the same keys from the same token (case 1, first block)."""
    okm = auth._hkdf(b"\x0b" * 22, bytes(range(13)), bytes(range(0xF0, 0xFA)))
    assert okm.hex() == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"


def test_equal_compares_whole_values():
    assert digest.equal(b"a" * 32, b"a" * 32)
    assert not digest.equal(b"a" * 32, b"a" * 31 + b"b")
    assert not digest.equal(b"a" * 32, b"a" * 31)


def test_importing_every_module_of_the_daemon_loads_neither_openssl_nor_ssl():
    """The command's process imports all of these before it waits for its peers; hashlib
    and ssl would map OpenSSL's libraries into it (4.6 MiB resident, about 20 ms of CPU)."""
    code = (
        "import sys; sys.modules.setdefault('ssl', None)\n"
        "import rendezvous.cli.main, rendezvous.daemon.node, rendezvous.host.syncdir, rendezvous.host.fingerprint\n"
        "import rendezvous.discovery.mdns, rendezvous.discovery.unicast, rendezvous.coordinator.server\n"
        "print(sorted(m for m in ('_hashlib', 'hashlib', 'hmac', 'secrets', '_ssl') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
