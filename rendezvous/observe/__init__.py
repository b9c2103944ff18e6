"""What a node tells people and machines about itself: the `Reporter` interface, the terminal
or journal (`console`), systemd's notify socket (`notify`) and Prometheus metrics (`metrics`).

May import: `rendezvous.core`, `rendezvous.config`, `rendezvous.errors`; never `daemon` or `cli`.
"""
