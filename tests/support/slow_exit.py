"""A training command's stand-in that holds its TF port and is slow to end:

    slow_exit.py OUT_DIR [--term-delay SECONDS] [--ignore-term] [--hang-rounds N]

Binds the port of its own task in TF_CONFIG (SO_REUSEADDR and listening, as TensorFlow's
server does), records {"pid", "ppid", "round", "rank", "port"} in OUT_DIR/<node>-<round>.json,
then: in rounds up to N (default 1) waits for a signal, later rounds exit 0 at once. On
SIGTERM it goes on holding the port for --term-delay seconds before it exits 143, or ignores
SIGTERM altogether with --ignore-term. Without TF_CONFIG (no rendezvous) it binds no port.
"""

import argparse
import json
import os
import signal
import socket
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--term-delay", type=float, default=0.0)
parser.add_argument("--ignore-term", action="store_true")
parser.add_argument("--hang-rounds", type=int, default=1)
args = parser.parse_args()

term = {"at": None}
signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else lambda *_: term.update(at=time.monotonic()))

env = os.environ
round_ = int(env.get("RENDEZVOUS_ROUND", "1"))
port = None
if "TF_CONFIG" in env:
    config = json.loads(env["TF_CONFIG"])
    port = int(config["cluster"]["worker"][config["task"]["index"]].rpartition(":")[2])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen()
record = {"pid": os.getpid(), "ppid": os.getppid(), "round": round_, "rank": int(env.get("RENDEZVOUS_RANK", "0")),
          "port": port}
path = os.path.join(args.out, f"{env.get('RENDEZVOUS_NODE_ID', 'node')}-{round_}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)  # readers never see half a record

if round_ > args.hang_rounds:
    sys.exit(0)
while term["at"] is None:
    signal.pause()
while time.monotonic() < term["at"] + args.term_delay:  # still holding the port
    time.sleep(0.01)
sys.exit(143)
