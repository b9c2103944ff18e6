"""One node: startup, rounds, shutdown. Wires discovery, the coordinator service, the Join
sessions and the launcher on one event loop, and shuts them down in order.

`node.Node` runs the rounds; `joiner.Joiner` plays one round as a member, with
`relay.ProgressRelay` passing the command's progress on to the coordinator and
`syncer.MemberSync` doing the member's side of --sync-dir; `resources` binds
the endpoint, what lives from startup to shutdown; `viewholder` keeps the current view and
tells of its changes; `presence` applies discovery's events and announces this node's
advert; `confirmer` checks the adverts of would-be coordinators; `signals` stops the node.
May import every adapter package and `core`; only `cli` imports this package.
"""
