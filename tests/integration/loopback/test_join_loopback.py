"""Real `rendezvous join` processes on 127.0.0.x: real multicast, real gRPC, real commands."""

from __future__ import annotations

import os
import re
import secrets
import signal
import sys
import time

import pytest

from patience import HANG, wait_until
from peers import assert_consistent, join_argv, records, start_peer, wait_for_records, wait_gone


@pytest.fixture
def job() -> str:
    return f"t-{secrets.token_hex(4)}"


def run_peers(tmp_path, job, addresses, expect=None, options=(), record_args=()):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    peers = [
        start_peer(
            join_argv(expect or len(addresses), job, out, address=a, options=options, record_args=record_args),
            tmp_path,
            f"peer-{a}",
        )
        for a in addresses
    ]
    return out, peers


@pytest.mark.parametrize(
    "addresses",
    [
        ["127.0.0.2", "127.0.0.3"],
        # string order (.10 < .100 < .9) differs from numeric order (.9 < .10 < .100)
        ["127.0.0.100", "127.0.0.10", "127.0.0.9"],
    ],
)
def test_peers_get_identical_lists_and_lowest_address_is_worker_0(tmp_path, job, addresses):
    out, peers = run_peers(tmp_path, job, addresses)
    for peer in peers:
        assert peer.wait() == 0, peer.log
    recs = records(out)
    assert_consistent(recs, addresses)
    assert recs[0]["tf_config"]["cluster"]["worker"][0].startswith(
        "127.0.0.2:" if len(addresses) == 2 else "127.0.0.9:"
    )
    assert all(r["env"]["RENDEZVOUS_JOB"] == job for r in recs)
    coordinator = recs[0]["env"]["RENDEZVOUS_COORDINATOR"]
    assert all(r["env"]["RENDEZVOUS_COORDINATOR"] == coordinator for r in recs)
    assert coordinator.startswith(recs[0]["tf_config"]["cluster"]["worker"][0].split(":")[0] + ":")


def test_expect_one_runs_alone(tmp_path, job):
    out, [peer] = run_peers(tmp_path, job, ["127.0.0.2"])
    assert peer.wait() == 0, peer.log
    [rec] = records(out)
    assert rec["tf_config"]["task"]["index"] == 0


def test_two_jobs_on_one_network_stay_separate(tmp_path, job):
    other = job + "-b"
    out_a, peers_a = run_peers(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None, job, ["127.0.0.2", "127.0.0.4"])
    out_b, peers_b = run_peers(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None, other, ["127.0.0.3", "127.0.0.5"])
    for peer in peers_a + peers_b:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out_a), ["127.0.0.2", "127.0.0.4"])
    assert_consistent(records(out_b), ["127.0.0.3", "127.0.0.5"])


def test_exit_code_is_the_commands(tmp_path, job):
    out, peers = run_peers(tmp_path, job, ["127.0.0.2", "127.0.0.3"], record_args=["--exit", "7"])
    assert [p.wait() for p in peers] == [7, 7]


def test_timeout_names_the_peers_that_were_seen(tmp_path, job):
    out, [peer] = run_peers(tmp_path, job, ["127.0.0.2"], expect=3, options=["--timeout", "1.5"])
    assert peer.wait() == 3, peer.log
    log = peer.log
    assert "--timeout 1.5s" in log
    assert "saw 1 of 3 peers" in log and "127.0.0.2 (" in log and "2 never appeared" in log
    assert not list(out.glob("*.json"))


def test_a_node_whose_expect_differs_from_the_coordinators_is_refused_and_the_job_forms_without_it(tmp_path, job):
    """The coordinator's --expect rules: the odd node exits 4 naming both values, the nodes
    that agree with the coordinator keep waiting, and the job forms once a right node comes."""
    out = tmp_path / "out"
    out.mkdir()
    coordinator = start_peer(join_argv(2, job, out, address="127.0.0.2"), tmp_path, "coordinator")
    odd = start_peer(join_argv(3, job, out, address="127.0.0.3"), tmp_path, "odd")
    assert odd.wait() == 4, odd.log
    assert "--expect 2" in odd.log and "--expect 3" in odd.log and "coordinator" in odd.log, odd.log
    assert coordinator.proc.poll() is None, f"the coordinator gave up too:\n{coordinator.log}"
    assert not list(out.glob("*.json"))
    right = start_peer(join_argv(2, job, out, address="127.0.0.4"), tmp_path, "right")
    assert coordinator.wait() == 0, coordinator.log
    assert right.wait() == 0, right.log
    assert len(records(out)) == 2


def test_a_coordinator_whose_only_peer_was_refused_for_its_expect_names_it_not_the_network(tmp_path, job):
    """The coordinator's hint after `lonely-hint` and its timeout name the refused peer, its
    --expect and this node's with where it came from (here RENDEZVOUS_EXPECT), and say
    nothing of multicast: a peer was heard. The odd node starts first, so the coordinator
    hears it at once, well before its hint."""
    out = tmp_path / "out"
    out.mkdir()
    hint = 10.0  # Timings.lonely_hint, the default
    odd = start_peer(join_argv(3, job, out, address="127.0.0.3"), tmp_path, "odd")
    wait_until(lambda: "1/3 peers seen" in odd.log, "the odd node up")
    argv = join_argv(2, job, out, address="127.0.0.2", options=["--timeout", str(hint + 3)])
    at = argv.index("--expect")
    del argv[at:at + 2]
    coordinator = start_peer(argv, tmp_path, "coordinator", extra_env={"RENDEZVOUS_EXPECT": "2"})
    assert odd.wait() == 4, odd.log
    assert "runs it with --expect 3 (set by --expect); start it with --expect 2 to join" in odd.log, odd.log
    assert coordinator.wait() == 3, coordinator.log
    log = coordinator.log
    assert "multicast" not in log and "1 never appeared" not in log, log
    said = f"127.0.0.3 ({odd_id(odd.log)}) runs it with --expect 3, this node with --expect 2 (set by RENDEZVOUS_EXPECT)"
    [warning] = [line for line in log.splitlines() if "WARNING no peer of job" in line]
    assert said in warning, log
    [error] = [line for line in log.splitlines() if "no rendezvous within --timeout" in line]
    assert said in error and error.endswith("Start every node of the job with the same --expect"), log


def odd_id(log: str) -> str:
    return re.search(r"INFO node ([0-9a-f]+) uses", log).group(1)


def test_late_peer_gets_an_error_not_a_hang(tmp_path, job):
    out, peers = run_peers(tmp_path, job, ["127.0.0.3", "127.0.0.4"], record_args=["--sleep", "600"])
    wait_for_records(out, 2)
    # the late peer has the lowest address: it must still not take over the running job
    late = start_peer(join_argv(2, job, tmp_path, address="127.0.0.2"), tmp_path, "late")
    assert late.wait() == 4, late.log
    assert all(peer.proc.poll() is None for peer in peers), "the late peer waited for the job to end"
    assert "already" in late.log and "not a member" in late.log, late.log
    for peer in peers:
        peer.proc.send_signal(signal.SIGTERM)
    for peer in peers:
        assert peer.wait() == 128 + signal.SIGTERM, peer.log


# SIGHUP: a closed terminal must not leave the command (in its own process group) orphaned
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_stops_the_command_and_returns_its_status(tmp_path, job, signum):
    out, [peer] = run_peers(tmp_path, job, ["127.0.0.2"], record_args=["--sleep", "60"])
    [rec] = wait_for_records(out, 1)
    assert rec["pgid"] == rec["pid"], "the command must lead its own process group"
    assert rec["pgid"] != os.getpgid(peer.proc.pid)
    peer.proc.send_signal(signum)
    assert peer.wait() == 128 + signal.SIGTERM, peer.log
    assert wait_gone(rec["pid"]), "the command survived SIGTERM to rendezvous"


def test_command_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path, job):
    out, [peer] = run_peers(
        tmp_path, job, ["127.0.0.2"], options=["--stop-grace", "1"], record_args=["--ignore-term", "--sleep", "60"]
    )
    [rec] = wait_for_records(out, 1)  # written once SIGTERM is ignored
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.wait() == 128 + signal.SIGKILL, peer.log
    assert wait_gone(rec["pid"])


def test_sigint_while_waiting_exits_130_and_says_goodbye(tmp_path, job):
    out = tmp_path / "out"
    out.mkdir()
    waiting = start_peer(join_argv(3, job, out, address="127.0.0.2"), tmp_path, "waiting")
    leaving = start_peer(join_argv(3, job, out, address="127.0.0.3"), tmp_path, "leaving")
    _wait_for_log(waiting, "2/3 peers seen")
    # The first node may have heard of the second from its Status request; its mDNS answer,
    # which a responder may delay by up to a second, must be in before the goodbye: an
    # answer that arrives after the goodbye brings it back until its records expire.
    time.sleep(1.5)
    leaving.proc.send_signal(signal.SIGINT)
    assert leaving.wait() == 130, leaving.log
    # the goodbye packet makes the other peer drop it at once (not after the 19-minute TTL)
    _wait_for_log(waiting, "1/3 peers seen", after="2/3 peers seen")
    waiting.proc.send_signal(signal.SIGTERM)
    assert waiting.wait() == 128 + signal.SIGTERM


def _wait_for_log(peer, text, after=None, timeout=HANG):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = peer.log
        if after is not None:
            log = log[log.find(after) + len(after):] if after in log else ""
        if text in log:
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in log of {peer.name}:\n{peer.log}")


def test_command_not_found_exits_127(tmp_path, job):
    argv = join_argv(1, job, tmp_path, address="127.0.0.2", command=["/nonexistent/train"])
    peer = start_peer(argv, tmp_path, "p")
    assert peer.wait() == 127, peer.log
    assert "/nonexistent/train" in peer.log


def test_an_address_not_on_this_machine_exits_5_naming_it(tmp_path):
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "rendezvous", "join", "--expect", "2", "--address", "192.0.2.77", "--", "true"],
        capture_output=True, text=True, timeout=HANG,
    )
    assert proc.returncode == 5, proc.stderr
    assert "192.0.2.77" in proc.stderr and "Traceback" not in proc.stderr


def _free_ports(count: int) -> list[int]:
    import socket

    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.2", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def test_a_coordinator_killed_without_goodbye_can_be_restarted(tmp_path, job):
    out = tmp_path / "out"
    out.mkdir()
    # the dead node sorts first (same address, lower port): without suspicion, it would stay
    # the coordinator everyone waits for
    low, high = sorted(_free_ports(2))
    fast = ["--timings", "suspect-after=1"]
    crashed = start_peer(
        join_argv(3, job, out, address="127.0.0.2", options=["--port", str(low)]), tmp_path, "crashed"
    )
    waiting = start_peer(join_argv(3, job, out, address="127.0.0.3", options=fast), tmp_path, "waiting")
    _wait_for_log(waiting, "[coordinator], 127.0.0.3 (")  # it follows the node about to crash
    crashed.proc.kill()  # no goodbye: the waiting peer's mDNS cache keeps it for many minutes
    crashed.wait()
    # the same machine starts it again: a new node on the same address; then the last peer
    restarted = start_peer(
        join_argv(3, job, out, address="127.0.0.2", options=["--port", str(high)]), tmp_path, "restarted"
    )
    last = start_peer(join_argv(3, job, out, address="127.0.0.4", options=fast), tmp_path, "last")
    for peer in (waiting, restarted, last):
        assert peer.wait() == 0, peer.log
    assert "electing without it" in waiting.log
    assert_consistent(records(out), ["127.0.0.2", "127.0.0.3", "127.0.0.4"])


def test_a_frozen_peer_leaves_the_round_instead_of_holding_it(tmp_path, job):
    out = tmp_path / "out"
    out.mkdir()
    fast = ["--timings", "keepalive=0.5"]
    coordinator = start_peer(join_argv(3, job, out, address="127.0.0.2", options=["-v", *fast]), tmp_path, "coordinator")
    frozen = start_peer(join_argv(3, job, out, address="127.0.0.3", options=fast), tmp_path, "frozen")
    _wait_for_log(coordinator, "coordinating job '%s': 2/3 peers joined" % job)
    frozen.proc.send_signal(signal.SIGSTOP)  # alive to the kernel, silent to gRPC
    try:
        # HTTP/2 keepalive ends its stream: it is no longer counted as joined
        _wait_for_log(
            coordinator, "coordinating job '%s': 1/3 peers joined" % job,
            after="coordinating job '%s': 2/3 peers joined" % job,
        )
    finally:
        frozen.proc.kill()
        frozen.proc.send_signal(signal.SIGCONT)
    coordinator.proc.send_signal(signal.SIGTERM)
    assert coordinator.wait() == 128 + signal.SIGTERM


def _fd_targets(pid: int) -> list[str]:
    """What each descriptor of the process names (`socket:[123]`, `anon_inode:[eventpoll]`)."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return targets


def _tcp_connections(pid: int) -> list[tuple[str, str]]:
    """(local, remote) of every established TCP connection the process holds."""
    inodes = {target[8:-1] for target in _fd_targets(pid) if target.startswith("socket:[")}
    found = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "01" and cols[9] in inodes:  # 01: ESTABLISHED
                    found.append((cols[1], cols[2]))
    return found


def _openssl_mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        libraries = {line.split()[-1] for line in f if ".so" in line}
    assert any("cygrpc" in name for name in libraries), libraries  # the check sees libraries
    return sorted(name for name in libraries if "libssl" in name or "libcrypto" in name)


def test_a_job_without_a_token_maps_no_openssl_waiting_or_running(tmp_path, job):
    """Nothing in a daemon without --token-file hashes with OpenSSL or speaks TLS: its
    libraries (4.6 MiB resident) stay out of the process while it waits, and out of the
    freeze every member waits on."""
    out = tmp_path / "out"
    out.mkdir()
    first = start_peer(join_argv(2, job, out, address="127.0.0.2", command=["sleep", "30"]), tmp_path, "first")
    try:
        _wait_for_log(first, "1/2 peers seen")
        assert _openssl_mapped(first.proc.pid) == []
        second = start_peer(join_argv(2, job, out, address="127.0.0.3", command=["sleep", "30"]), tmp_path, "second")
        try:
            for peer in (first, second):
                _wait_for_log(peer, "starting sleep")
                assert _openssl_mapped(peer.proc.pid) == []
        finally:
            second.proc.send_signal(signal.SIGTERM)
            second.wait()
    finally:
        first.proc.send_signal(signal.SIGTERM)
        first.wait()


def test_the_coordinators_own_member_holds_no_connection_to_it(tmp_path, job):
    """The coordinator's own member reaches its servicer inside the process: a waiting
    coordinator keeps no TCP connection to itself (nor the pings that kept it alive), and
    its peers' connections are the only ones it holds."""
    out = tmp_path / "out"
    out.mkdir()
    coordinator = start_peer(join_argv(3, job, out, address="127.0.0.2"), tmp_path, "coordinator")
    member = start_peer(join_argv(3, job, out, address="127.0.0.3"), tmp_path, "member")
    try:
        _wait_for_log(coordinator, "2/3 peers seen")
        # 3 s of watching, and on until the member's stream is seen (a loaded machine)
        deadline, hang = time.monotonic() + 3, time.monotonic() + HANG
        held = [0]
        while time.monotonic() < deadline or (max(held) < 1 and time.monotonic() < hang):
            connections = _tcp_connections(coordinator.proc.pid)
            ends = {local for local, _ in connections}
            to_itself = [(local, remote) for local, remote in connections if remote in ends]
            assert not to_itself, to_itself
            held.append(len(connections))
            time.sleep(0.1)
        assert max(held) >= 1, "the member's Join stream was never seen: the check sees nothing"
    finally:
        for peer in (coordinator, member):
            peer.proc.send_signal(signal.SIGTERM)
        for peer in (coordinator, member):
            peer.wait()


@pytest.mark.parametrize("coordinator_timeout, member_timeout", [(5, 0.5), (0.5, 5)])
def test_nodes_with_different_liveness_timeouts_run_the_coordinators(tmp_path, job, coordinator_timeout, member_timeout):
    """A member heartbeating at a fifth of its own 5 s would be lost to a coordinator
    waiting 0.5 s for it; a member waiting 0.5 s would lose a coordinator heartbeating
    every second. The coordinator's timeout rules the round for both."""
    out = tmp_path / "out"
    out.mkdir()
    peers = [
        start_peer(join_argv(2, job, out, address=address, record_args=["--sleep", "3"],
                             options=["--liveness-timeout", str(timeout), "--max-restarts", "0"]),
                   tmp_path, name)
        for address, timeout, name in [("127.0.0.2", coordinator_timeout, "coordinator"),
                                       ("127.0.0.3", member_timeout, "member")]
    ]
    for peer in peers:
        assert peer.wait() == 0, peer.log
    assert_consistent(records(out), ["127.0.0.2", "127.0.0.3"])
    assert f"the coordinator's liveness timeout of {coordinator_timeout:g} s rules this round" in peers[1].log


def _epoll_instances(pid: int) -> int:
    return _fd_targets(pid).count("anon_inode:[eventpoll]")


@pytest.mark.parametrize("user_setting", [None, "epoll1"])
def test_the_daemons_grpc_polls_with_poll_and_the_command_inherits_the_environment_as_it_was(
    tmp_path, job, user_setting
):
    """gRPC's default poller keeps a handle for every socket it ever watched at once, which
    an attacker's thousands of connections leave behind; the daemon's gRPC uses poll(2),
    and only asyncio's selector is an epoll instance. A poller the user chose is kept, and
    the command sees the variables exactly as the user set them."""
    env_file = tmp_path / "env"
    command = ["sh", "-c", f'env > "{env_file}.part" && mv "{env_file}.part" "{env_file}" && exec sleep 60']
    extra = {"GRPC_POLL_STRATEGY": user_setting} if user_setting else {}
    for name in ("GRPC_POLL_STRATEGY", "GRPC_VERBOSITY"):
        assert name not in os.environ or name in extra  # the test's own environment sets neither
    peer = start_peer(join_argv(1, job, tmp_path, address="127.0.0.2", command=command), tmp_path, "peer",
                      extra_env=extra)
    try:
        deadline = time.monotonic() + HANG
        while not env_file.exists():
            assert peer.proc.poll() is None, peer.log
            assert time.monotonic() < deadline, peer.log
            time.sleep(0.05)
        inherited = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
        assert "GRPC_VERBOSITY" not in inherited
        assert inherited.get("GRPC_POLL_STRATEGY") == user_setting
        if user_setting is None:
            assert _epoll_instances(peer.proc.pid) == 1  # asyncio's
        else:
            assert _epoll_instances(peer.proc.pid) > 1  # gRPC's own too
    finally:
        peer.proc.send_signal(signal.SIGTERM)
        peer.wait()


def test_a_tf_config_in_the_daemons_environment_is_named_in_a_warning_and_replaced(tmp_path, job):
    """A launch script written for a hand-made cluster leaves TF_CONFIG set: the command still
    gets the round's own, and the daemon says at its start that the old one is not used."""
    out = tmp_path / "out"
    out.mkdir()
    old = '{"cluster": {"worker": ["localhost:12345", "localhost:23456"]}, "task": {"type": "worker", "index": 0}}'
    peers = [start_peer(join_argv(2, job, out, address=a), tmp_path, f"peer-{a}", extra_env={"TF_CONFIG": old})
             for a in ["127.0.0.2", "127.0.0.3"]]
    for peer in peers:
        assert peer.wait() == 0, peer.log
        assert (f"WARNING TF_CONFIG is set in this daemon's environment ({old}): the command gets the one "
                "rendezvous builds for each round instead; unset it") in peer.log, peer.log
    assert_consistent(records(out), ["127.0.0.2", "127.0.0.3"])
