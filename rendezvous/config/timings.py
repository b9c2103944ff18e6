"""How long the daemon waits for things: one frozen record of seconds, so that tests shrink
the waits instead of patching module constants (`--timings keepalive=0.5,...`)."""

from __future__ import annotations

import math

from ..core.record import fields, record
from ..errors import ConfigError


def is_number(value: object) -> bool:
    """An int or a float, not a bool: TOML and the environment can hand over any type, and
    bools are ints in Python."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@record
class Timings:
    """How long the daemon waits for things, in seconds. Users rarely change these; tests
    shrink them instead of waiting."""

    # HTTP/2 keepalive on every Join stream, both ways: a frozen or cut-off peer ends its
    # streams within twice this.
    keepalive: float = 5.0
    # Failing to reach the coordinator this long leaves it out of the election, until it
    # announces itself anew or answers a Status call; one is made this often.
    suspect_after: float = 3.0
    # How long a DNS-SD service may take to resolve.
    resolve_timeout: float = 3.0
    # Peers that would be elected are asked their Status one at a time, lowest first; one
    # that has not answered after this long lets the next be asked too (core.asking).
    confirm_hedge: float = 0.25
    # Re-announcing at once after the release would make N nodes delay each other.
    advertise_delay: float = 0.5
    # The release sets the start time ahead by the time the frozen list took to go to every
    # member and come back as Ready (core.round.start_margin), at least start_margin_min
    # and at most start_margin plus start_margin_per_peer per member: time for it to reach
    # every member. (8 daemons started at once on 2 cores: the frozen list's trip took
    # 12-19 ms, the release 5-9 ms; a member that gets it late starts at once, late by as
    # much.)
    start_margin_min: float = 0.005
    start_margin: float = 0.02
    start_margin_per_peer: float = 0.002
    # Before asking the coordinator again after a redirect or a lost stream.
    retry_interval: float = 0.25
    # How long a node that disagrees with a peer stays advertised before it exits, so that
    # the peer sees it too and fails with the same message instead of waiting.
    conflict_linger: float = 1.5
    # How long the mDNS goodbye may take at exit.
    goodbye_timeout: float = 1.0
    # How long the coordinator keeps a stream open after its last message (an abort, the
    # end of the job, a redirect), for the peer to read it and close its side first.
    end_grace: float = 2.0
    # How often the command's progress file is read, and how often at most its progress
    # goes to the coordinator.
    progress_poll: float = 0.5
    progress_send: float = 1.0
    # A member lagging the others' median progress this long is marked a straggler.
    straggler_after: float = 60.0
    # How long a new Join stream may take to send its join (and prove the token): a
    # connection that says nothing is closed instead of held.
    handshake: float = 5.0
    # Unicast discovery: how often a node exchanges adverts with its seeds and a few peers ...
    gossip_interval: float = 1.0
    # ... and how long an advert whose node announces nothing newer is kept.
    advert_ttl: float = 10.0
    # The coordinator tells its peers who has joined at most this often.
    waiting_every: float = 0.1
    # Alone this long, a node says that multicast may be blocked and how to give seeds.
    lonely_hint: float = 10.0
    # A node that waits without having seen its whole job asks the network again after
    # this, then twice as seldom each time, up to 16 times this (0: never).
    ask_again: float = 2.0
    # What follows from a change of the view (telling the coordinator service, the progress,
    # the confirmer) is done at once for the first few changes after a quiet window of this
    # length, then at most once per window while changes keep coming.
    view_settle: float = 0.02
    # A settling round is looked at again this long after its settle time has passed.
    settle_slack: float = 0.01
    # One warning line per kind of bad request and source address this often, at most.
    warning_interval: float = 30.0
    # How long the command's interpreter and nvidia-smi may take to answer at startup.
    probe_timeout: float = 20.0
    # How long the gRPC server lets calls under way finish at shutdown.
    server_stop_grace: float = 0.5
    # `status --watch` asks again this often.
    watch_interval: float = 1.0
    # How long a metrics scrape waits for the node's status.
    metrics_read_timeout: float = 5.0
    # A signed `rendezvous stop` older than this (by the coordinator's clock) is refused as
    # a possible replay; its nonce is remembered twice as long.
    replay_window: float = 60.0
    # A coordinator stopped between two rounds keeps answering its members' rejoins with
    # the stop this long after their --abort-grace, so that none forms a new round without it.
    stop_linger: float = 2.0
    # --prewarm: the next round's warm interpreter starts importing this long after the
    # round's start (or at its first progress line, if sooner). At once by default: it
    # imports at the lowest CPU and I/O priority, so it takes only what the round leaves idle
    spare_after: float = 0.0
    # Once this node's TensorFlow worker listens, another member's TensorFlow port whose
    # connections time out this long (a firewall drops them: the strategy's start-up would
    # wait for ever) fails this node's command, naming it (0: never).
    tf_port_silence: float = 60.0

    def __post_init__(self) -> None:
        for name in fields(self):
            value = getattr(self, name)
            if not (is_number(value) and value >= 0 and math.isfinite(value)):
                raise ConfigError(f"sets {timing_key(name)} to {value!r}: it must be zero or more seconds")

    def longest_start_margin(self, world_size: int) -> float:
        """The most seconds between the release and the common start (core.round.start_margin)."""
        return self.start_margin + self.start_margin_per_peer * world_size


TIMING_NAMES = fields(Timings)


def timing_key(name: str) -> str:
    return name.replace("_", "-")
