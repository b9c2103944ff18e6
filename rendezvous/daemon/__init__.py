"""One node: startup, rounds, shutdown. Wires discovery, the coordinator service, the Join
sessions and the launcher on one event loop, and shuts them down in order.

`node.Node` runs the rounds; `joiner.Joiner` plays one round as a member; `resources` holds
what lives from startup to shutdown; `confirmer` checks the adverts of would-be coordinators.
May import every adapter package and `core`; only `cli` imports this package.
"""
