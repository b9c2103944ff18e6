"""Write docs/start/first-job.md from a real run: two `rendezvous join` daemons on loopback
addresses (127.0.0.1 and 127.0.0.2, each as one machine would be), a tiny command, then
`status`, `status --json`, `peers --json`, the metrics and `stop`, as a newcomer would type
them. Every output on the page is what that run printed, with what changes from run to run
(times, node ids, process ids, the free ports the run took, temporary paths) replaced by
fixed values. tests/project/test_docs.py checks, without a run, that each line the page
shows is one the code still prints.

Usage: scripts/gen-reference --first-job [OUT]     (or: python scripts/firstjob.py [OUT])
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "start" / "first-job.md"
JOB = "first"
ADDRESSES = ("127.0.0.1", "127.0.0.2")
# what the page shows for the ports the run took
SHOWN_PORT, SHOWN_TF_PORT, SHOWN_METRICS_PORT = 29630, 29631, 9464
# how long the run may take, in all: a loaded machine is slow, a broken one never ends
PATIENCE = 300.0

COMMAND = '''\
# hello.py: what a training script sees, without TensorFlow
import json, os, signal, time
import rendezvous.script as rdv

info = rdv.env()
cluster = json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"]
print(f"worker {info.rank} of {info.world_size}, round {info.round}, cluster {cluster}", flush=True)
rdv.write_progress(epoch=1, epochs=10, step=100, loss=0.42)
signal.signal(signal.SIGTERM, lambda *_: exit(0))
while True:
    time.sleep(1)
'''


def _free_port(*addresses: str) -> int:
    while True:
        with socket.socket() as probe:
            probe.bind((addresses[0], 0))
            port = probe.getsockname()[1]
        try:
            for address in addresses[1:]:
                with socket.socket() as other:
                    other.bind((address, port))
            return port
        except OSError:
            continue


def _wait(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not done():
        if time.monotonic() > deadline:
            raise SystemExit(f"scripts/firstjob.py: gave up waiting for {what}")
        time.sleep(0.1)


class Run:
    """The two daemons, their logs, and the commands typed beside them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port = _free_port(*ADDRESSES)
        self.tf_ports = (_free_port(ADDRESSES[0]), _free_port(ADDRESSES[1]))
        self.metrics_port = _free_port(ADDRESSES[0])
        (tmp / "hello.py").write_text(COMMAND)
        self.env = {**os.environ, "RENDEZVOUS_RUNTIME_DIR": str(tmp / "run"), "PYTHONUNBUFFERED": "1",
                    "RENDEZVOUS_PREWARM": "none", "PYTHONPATH": str(ROOT)}
        self.env.pop("RENDEZVOUS_CONFIG", None)
        self.typed: list[tuple[list[str], str]] = []

    def join_line(self, index: int) -> list[str]:
        line = ["rendezvous", "join", "--expect", "2", "--job", JOB, "--address", ADDRESSES[index],
                "--port", str(self.port), "--tf-port", str(self.tf_ports[index])]
        if index == 0:
            line += ["--metrics-port", str(self.metrics_port), "--discovery", "unicast"]
        else:
            line += ["--peer", f"{ADDRESSES[0]}:{self.port}"]
        return line + ["--", "python", "hello.py"]

    def start(self) -> list[subprocess.Popen[str]]:
        nodes = []
        for index in range(2):
            log = open(self.tmp / f"node{index}.log", "w")
            argv = [sys.executable, "-m", "rendezvous", *self.join_line(index)[1:]]
            argv[argv.index("python")] = sys.executable
            nodes.append(subprocess.Popen(argv, cwd=self.tmp, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                          text=True, start_new_session=True))
        return nodes

    def log(self, index: int) -> str:
        return (self.tmp / f"node{index}.log").read_text()

    def type(self, *words: str) -> str:
        out = subprocess.run([sys.executable, "-m", "rendezvous", *words], cwd=self.tmp, env=self.env,
                             capture_output=True, text=True, timeout=PATIENCE)
        self.typed.append((["rendezvous", *words], out.stdout + out.stderr))
        if os.environ.get("FIRSTJOB_DEBUG"):
            print(words, out.returncode, out.stderr, file=sys.stderr)
        return out.stdout


def capture() -> dict[str, str]:
    """Run the job; what each step printed, normalised."""
    with tempfile.TemporaryDirectory(prefix="rendezvous-first-") as name:
        tmp = Path(name)
        run = Run(tmp)
        nodes = run.start()
        try:
            _wait("both commands to start", lambda: all("worker " in run.log(i) for i in range(2)))
            _wait("the progress line", lambda: "epoch 1/10" in run.type("status", "--job", JOB, "--peer",
                                                                       f"{ADDRESSES[0]}:{run.port}"))
            run.typed.clear()
            outputs = {
                "status": run.type("status"),
                "status_json": run.type("status", "--json"),
                "status_job": run.type("status", "--job", JOB, "--peer", f"{ADDRESSES[0]}:{run.port}"),
                "peers_json": run.type("peers", "--json", "--address", "127.0.0.3", "--discovery", "unicast",
                                       "--peer", f"{ADDRESSES[0]}:{run.port}", "--peer", f"{ADDRESSES[1]}:{run.port}"),
            }
            with urllib.request.urlopen(f"http://{ADDRESSES[0]}:{run.metrics_port}/metrics", timeout=PATIENCE) as r:
                metrics = r.read().decode()
            outputs["metrics"] = "\n".join(line for line in metrics.splitlines() if "rendezvous_" in line) + "\n"
            outputs["stop"] = run.type("stop", "--job", JOB, "--peer", f"{ADDRESSES[0]}:{run.port}")
            codes = [node.wait(timeout=PATIENCE) for node in nodes]
            outputs["codes"] = " ".join(map(str, codes))
            outputs["node0"], outputs["node1"] = run.log(0), run.log(1)
            if codes != [8, 8]:
                raise SystemExit(f"scripts/firstjob.py: the nodes exited {codes}, not 8 as stopped:\n{outputs}")
            outputs["join0"], outputs["join1"] = (" ".join(run.join_line(i)) for i in range(2))
        finally:
            for node in nodes:
                if node.poll() is None:
                    os.killpg(node.pid, signal.SIGKILL)
                    node.wait()
        return normalise(outputs, run, tmp)


def normalise(outputs: dict[str, str], run: Run, tmp: Path) -> dict[str, str]:
    every = "\n".join(outputs.values())
    ids: dict[str, str] = {}
    shown_ids = iter(["5f0c2a81e6d3", "9b41c07d2e55", "e02d4f9a11c7", "3f2a9c1b7d40"])
    for node_id in re.findall(r"\b[0-9a-f]{12}\b", every):
        if node_id not in ids and not node_id.isdigit():
            ids[node_id] = next(shown_ids, node_id)
    stamps = sorted(set(re.findall(r"\b\d\d:\d\d:\d\d\.\d{3}\b", every)))

    def seconds(stamp: str) -> float:
        h, m, s = stamp.split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)

    def shown_stamp(match: re.Match[str]) -> str:
        # wall-clock times: from 09:00:00.000 on, as the run went
        offset = seconds(match[0]) - seconds(stamps[0])
        return "09:%02d:%06.3f" % (offset // 60, offset % 60)

    def one(text: str) -> str:
        for real, shown in ids.items():
            text = text.replace(real, shown)
        text = text.replace(str(tmp), "/home/alice").replace(sys.executable, "python")
        text = re.sub(rf"\b{run.port}\b", str(SHOWN_PORT), text)
        for port in run.tf_ports:
            text = re.sub(rf"\b{port}\b", str(SHOWN_TF_PORT), text)
        text = re.sub(rf"\b{run.metrics_port}\b", str(SHOWN_METRICS_PORT), text)
        text = re.sub(r"\bpid \d+", "pid 4242", text)
        text = re.sub(r'(_pid": )\d+', r"\g<1>4242", text)
        text = re.sub(r"-progress-[a-z0-9_]{8}\.jsonl", "-progress.jsonl", text)
        text = re.sub(r"\(user [^)]*\)", "(user alice)", text)
        text = re.sub(r"\b(\d+\.\d{2})\d{4,}\b", r"\1", text)  # a float's noise
        return re.sub(r"\b\d\d:\d\d:\d\d\.\d{3}\b", shown_stamp, text)

    return {key: one(value) for key, value in outputs.items()}


def render(out: dict[str, str]) -> str:
    def block(text: str, lang: str = "text") -> str:
        return f"```{lang}\n{text.rstrip()}\n```\n"

    return f"""# Your first job

<!-- Generated by scripts/gen-reference --first-job from a real run. Do not edit: run it again.
A test fails when a line below is one the code no longer prints. -->

Two nodes, a tiny command, and everything they print. The run below is a real one, made on
one machine with two loopback addresses standing in for two machines (`--address`), seeds
instead of mDNS (`--discovery unicast`, `--peer`) and ports of its own; on two machines of one network you need
none of these: `rendezvous join --expect 2 --job {JOB} --tf-port {SHOWN_TF_PORT} -- python hello.py`
on each. Times, node ids and process ids vary from run to run.

## The command

Any command works; this one prints what it was given and waits until it is stopped. It
needs no TensorFlow: your training script goes in its place ([the guide](../guide/index.md)).

{block(COMMAND, "python")}
## Start both nodes

On the first machine, and on the second (each its own terminal):

{block("$ " + out["join0"] + chr(10) + "$ " + out["join1"], "sh")}
Each daemon finds the other, the one with the lowest address coordinates, the member list is
frozen and both commands start at the same moment. The first node's log (the
[troubleshooting page](../troubleshooting.md#what-a-healthy-job-logs) explains every line);
the command's own output is interleaved with it:

{block(out["node0"])}
The second node's:

{block(out["node1"])}
## Look at it

`rendezvous status` on a machine asks the daemons running there (here: both):

{block("$ rendezvous status" + chr(10) + out["status"])}
The same as JSON, for scripts:

{block("$ rendezvous status --json" + chr(10) + out["status_json"])}
`status --job NAME` asks the job's coordinator from any host, member or not:

{block(f"$ rendezvous status --job {JOB} --peer {ADDRESSES[0]}:{SHOWN_PORT}" + chr(10) + out["status_job"])}
`rendezvous peers` lists the nodes heard on the network (or known to a seed):

{block(f"$ rendezvous peers --json --address 127.0.0.3 --discovery unicast --peer {ADDRESSES[0]}:{SHOWN_PORT} --peer {ADDRESSES[1]}:{SHOWN_PORT}" + chr(10) + out["peers_json"])}
With `--metrics-port`, Prometheus metrics (the `rendezvous_` ones shown):

{block(f"$ curl -s http://{ADDRESSES[0]}:{SHOWN_METRICS_PORT}/metrics | grep rendezvous_" + chr(10) + out["metrics"])}
## Stop it

{block(f"$ rendezvous stop --job {JOB} --peer {ADDRESSES[0]}:{SHOWN_PORT}" + chr(10) + out["stop"])}
Both `rendezvous join` exit with status {out["codes"].split()[0]} (a stopped job; see
[exit statuses](../reference.md#exit-status)); the last lines of their logs above say who
stopped it. A job that ends by itself exits 0 when every command did.

Next: [your own training script](../guide/index.md), then
[running it as a service](../operations.md#running-as-a-service).
"""


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else PAGE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(capture()))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
