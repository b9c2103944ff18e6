"""Starting, watching and stopping the command: the launcher, the gate process that becomes
the command at the common start time, and the follower of the command's progress file.

May import: `rendezvous.core`, `rendezvous.config`, `rendezvous.host`, `rendezvous.errors`;
never `daemon` or `cli`. `gate` imports nothing of the package: it runs as a bare script.
"""
