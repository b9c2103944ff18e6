"""The pure core: peers, election, membership rounds, TF_CONFIG and --sync-dir manifests.

Nothing in here opens a socket, reads a clock or the environment, or touches asyncio:
every function is a decision over plain values, so it can be tested exhaustively.

May import: `rendezvous.core` and `rendezvous.errors` only.
"""
