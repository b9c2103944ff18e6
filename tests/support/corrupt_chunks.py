"""Fault injection for --sync-dir: a source that flips a byte in the chunks it serves, so
that the fetching member's SHA-256 check can be seen to refuse them.

In process, `corrupting(FileSource._chunks, N)` is the method to monkeypatch in. As a
script, `corrupt_chunks.py N ARG...` runs `rendezvous ARG...` with the first N chunks its
source serves corrupted (as `python -m rendezvous`, without the spare gate forked at start:
the launcher then starts its gate itself).
"""

from __future__ import annotations

import sys
from typing import AsyncIterator, Callable


def corrupting(chunks: Callable[..., AsyncIterator], count: int) -> Callable[..., AsyncIterator]:
    """`chunks` (FileSource._chunks) with the first byte of each of its first `count`
    non-empty chunks flipped, over every source of this process."""
    left = [count]

    async def corrupted(self, path: str) -> AsyncIterator:
        async for chunk in chunks(self, path):
            if left[0] > 0 and chunk.data:
                left[0] -= 1
                print(f"corrupt_chunks: corrupting a chunk of {path} on purpose", file=sys.stderr, flush=True)
                chunk = type(chunk)(path=chunk.path, offset=chunk.offset,
                                    data=bytes([chunk.data[0] ^ 0xFF]) + chunk.data[1:])
            yield chunk

    return corrupted


if __name__ == "__main__":
    from rendezvous.coordinator import transfer

    transfer.FileSource._chunks = corrupting(transfer.FileSource._chunks, int(sys.argv[1]))

    from rendezvous.cli.main import main

    sys.exit(main(sys.argv[2:]))
