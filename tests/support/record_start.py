"""A stand-in for the trainer: records when it started and what it was given.

Usage: record_start.py OUT_DIR [--sleep SECONDS] [--until PATH] [--exit CODE] [--ignore-term]
Writes OUT_DIR/<RENDEZVOUS_NODE_ID>.json as its very first action.
"""

import json
import os
import signal
import sys
import time

started = time.time()
out_dir = sys.argv[1]
args = sys.argv[2:]
record = {
    "started": started,
    "pid": os.getpid(),
    "pgid": os.getpgid(0),
    "tf_config": json.loads(os.environ["TF_CONFIG"]),
    "env": {k: v for k, v in os.environ.items() if k.startswith("RENDEZVOUS_")},
    # what --gpus and --data-interface set (None: unset)
    "devices": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")},
    "argv": sys.argv,
}
# Before the record: a test that sees the record may send SIGTERM at once.
if "--ignore-term" in args:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = os.path.join(out_dir, os.environ["RENDEZVOUS_NODE_ID"] + ".json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.replace(path + ".tmp", path)
if "--sleep" in args:
    time.sleep(float(args[args.index("--sleep") + 1]))
if "--until" in args:  # runs until the test creates PATH
    while not os.path.exists(args[args.index("--until") + 1]):
        time.sleep(0.05)
sys.exit(int(args[args.index("--exit") + 1]) if "--exit" in args else 0)
