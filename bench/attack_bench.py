"""Attack benchmark: three honest hosts form a job through a seed while a fourth host, outside
the job, attacks the seed's port before any authentication (tests/support/attack.py).

Network namespaces on one bridge (needs root), multicast dropped, seeds only. Per attack:
the seed starts and listens, the attack starts, then the two other hosts start at once.
Reported: the attack's own figures, the seed's CPU during the attack, the seed's RSS and
open descriptors before, at their peak and 10 s after the attack ended (the job of the
honest hosts waits for a third member that is started only then), and last launch -> all
three commands started.

    exchange   ADVERTS forged adverts of the job (addresses below every host's), 400 per
               Exchange, 25 calls at a time
    idle       CONNECTIONS idle TCP connections held for HOLD seconds
    open       OPEN connections that finish the HTTP/2 handshake and make no call, held
               for HOLD seconds (more than the server takes in total: 8,192)
    held       CALLS Status calls that send a 5-byte prefix and never finish, from SOURCES
               addresses, held for HOLD seconds
    joins      JOINS Join streams that never send their first message, from SOURCES
               addresses, held for HOLD seconds

    sudo .venv/bin/python bench/attack_bench.py [--attacks exchange,idle,open,held,joins] [--adverts 10000]
        [--connections 3000] [--open 8500] [--calls 50000] [--joins 10000] [--sources 160] [--hold 20]
        [--repeat 1]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from netns import Network, stop_on_sigterm  # noqa: E402

ATTACK = ROOT / "tests" / "support" / "attack.py"
PORT = 29630  # core.seeds.DEFAULT_PORT
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
RECORD = 'echo $EPOCHREALTIME > "$0/$RENDEZVOUS_NODE_ID"'


def join_argv(job: str, out: Path, seed: str, expect: int = 3) -> list[str]:
    return [sys.executable, "-m", "rendezvous", "join", "--expect", str(expect), "--job", job, "--timeout", "300",
            "--peer", seed, "--", "/bin/bash", "-c", RECORD, str(out)]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_listening(host, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while f":{PORT} " not in host.run(["ss", "-ltnH"], capture_output=True, text=True).stdout:
        if time.monotonic() > deadline:
            raise RuntimeError("the seed does not listen")
        time.sleep(0.05)


def fds(pid: int) -> int:
    """The descriptors a process has open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


class Sampler(threading.Thread):
    """The peak RSS and descriptors of a process, sampled every 0.1 s."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.peak_fds, self.stop = pid, 0.0, 0, False

    def run(self) -> None:
        while not self.stop:
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
                self.peak_fds = max(self.peak_fds, fds(self.pid))
            except OSError:
                return
            time.sleep(0.1)


def add_sources(host, count: int) -> list[str]:
    """`count` extra addresses on the attacker's interface, from the top of the subnet down."""
    addresses = [f"10.213.{250 - i // 250}.{i % 250 + 1}" for i in range(count)]
    host.run(["ip", "-batch", "-"], input="".join(f"addr add {a}/8 dev eth0\n" for a in addresses), text=True, check=True)
    return addresses


def attack_argv(attack: str, endpoint: str, job: str, args: argparse.Namespace, attacker) -> list[str]:
    """The attack script's arguments for one kind of attack at its full size."""
    if attack == "exchange":
        return ["exchange", endpoint, job, str(args.adverts), "400"]
    if attack in ("idle", "open"):
        return [attack, endpoint, str(args.connections if attack == "idle" else args.open), str(args.hold)]
    calls = args.calls if attack == "held" else args.joins
    return [attack, endpoint, str(calls), str(args.hold), ",".join(add_sources(attacker, args.sources))]


def run(attack: str, args: argparse.Namespace) -> dict:
    with Network(4, multicast=False) as net, tempfile.TemporaryDirectory() as tmp:
        seed, attacker = net.hosts[0], net.hosts[3]
        out = Path(tmp)
        job = f"b-{secrets.token_hex(4)}"
        logs = [open(out / f"{h.name}.log", "wb") for h in net.hosts[:3]]
        daemon = seed.popen(join_argv(job, out, seed.address), stdout=logs[0], stderr=subprocess.STDOUT)
        wait_listening(seed)
        time.sleep(1)
        before = rss_mb(daemon.pid)
        endpoint = f"{seed.address}:{PORT}"
        argv = attack_argv(attack, endpoint, job, args, attacker)
        sampler = Sampler(daemon.pid)
        sampler.start()
        started = time.monotonic()
        attacker_proc = attacker.popen([sys.executable, str(ATTACK), *argv], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the attack is under way
        launched = time.time()
        others = [h.popen(join_argv(job, out, seed.address), stdout=log, stderr=subprocess.STDOUT)
                  for h, log in zip(net.hosts[1:3], logs[1:])]
        codes = [p.wait(timeout=400) for p in (daemon, *others)]
        formed = [float(p.read_text()) for p in out.iterdir() if len(p.name) == 12 and p.is_file() and "." not in p.name]
        result = json.loads(attacker_proc.communicate(timeout=600)[0].splitlines()[-1])
        attack_seconds = time.monotonic() - started
        sampler.stop = True
        return {
            "attack": attack, "argv": argv[2:] if attack not in ("held", "joins") else argv[2:4] + [f"{args.sources} sources"],
            "result": result, "exit_codes": codes, "attack_seconds": round(attack_seconds, 1),
            "last_launch_to_all_started_s": round(max(formed) - launched, 2) if len(formed) == 3 else None,
            "seed_rss_before_mb": round(before, 1), "seed_rss_peak_mb": round(sampler.peak, 1),
        }


def memory_after(attack: str, args: argparse.Namespace) -> dict:
    """A waiting seed (its job never forms) under the same attack: CPU during it, RSS at
    its peak and 10 s after it ended."""
    with Network(2, multicast=False) as net, tempfile.TemporaryDirectory() as tmp:
        seed, attacker = net.hosts
        job = f"b-{secrets.token_hex(4)}"
        daemon = seed.popen(join_argv(job, Path(tmp), seed.address, expect=3), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        wait_listening(seed)
        time.sleep(1)
        before, fds_before = rss_mb(daemon.pid), fds(daemon.pid)
        endpoint = f"{seed.address}:{PORT}"
        argv = attack_argv(attack, endpoint, job, args, attacker)
        sampler = Sampler(daemon.pid)
        sampler.start()
        cpu0, started = cpu_seconds(daemon.pid), time.monotonic()
        result = attacker.run([sys.executable, str(ATTACK), *argv], capture_output=True, text=True, check=True)
        took = time.monotonic() - started
        cpu = cpu_seconds(daemon.pid) - cpu0
        time.sleep(10)
        sampler.stop = True
        after, fds_after = rss_mb(daemon.pid), fds(daemon.pid)
        daemon.kill()
        daemon.wait()
        return {
            "attack": attack, "result": json.loads(result.stdout.splitlines()[-1]),
            "attack_seconds": round(took, 1), "seed_cpu_s": round(cpu, 1), "seed_rss_before_mb": round(before, 1),
            "seed_rss_peak_mb": round(sampler.peak, 1), "seed_rss_10s_after_mb": round(after, 1),
            "seed_fds_before_peak_after": [fds_before, sampler.peak_fds, fds_after],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--attacks", default="exchange,idle,open,held,joins")
    parser.add_argument("--adverts", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=3_000)
    parser.add_argument("--open", type=int, default=8_500)
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--joins", type=int, default=10_000)
    parser.add_argument("--sources", type=int, default=160)
    parser.add_argument("--hold", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    stop_on_sigterm()
    for _ in range(args.repeat):
        for attack in args.attacks.split(","):
            print(json.dumps({"forming": run(attack, args)}), flush=True)
            print(json.dumps({"memory": memory_after(attack, args)}), flush=True)


if __name__ == "__main__":
    main()
