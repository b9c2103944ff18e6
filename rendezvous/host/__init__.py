"""The host this daemon runs on: its addresses and interfaces, ports, the runtime notes that
`rendezvous status` reads, the token file, the command's fingerprint and the --sync-dir on disk.

Adapters over the operating system with no network protocol of their own.
May import: `rendezvous.core`, `rendezvous.config`, `rendezvous.errors`; never `daemon` or `cli`.
"""
