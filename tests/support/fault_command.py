"""The command of the restart tests: records each start, then behaves as told.

    fault_command.py OUT_DIR MODE

MODE: `hang-first-round` (round 1 sleeps, later rounds exit 0), `fail-rank-1:CODE` (rank 1
exits CODE at once, the others sleep), `fail-rank-1-after-all:CODE` (the same, but rank 1 first
waits until every command of its round has recorded its start: a wrapper that sets a signal
handler before this script runs has set it by then), `fail:CODE` (every start exits CODE), `sleep:SECONDS`
(every start sleeps, then exits 0).
"""

import json
import os
import sys
import time

out, mode = sys.argv[1], sys.argv[2]
env = os.environ
rank, round_ = int(env["RENDEZVOUS_RANK"]), int(env["RENDEZVOUS_ROUND"])
record = {"pid": os.getpid(), "rank": rank, "round": round_, "restarts": int(env["RENDEZVOUS_RESTART_COUNT"]),
          "world": int(env["RENDEZVOUS_WORLD_SIZE"]), "tf_config": json.loads(env["TF_CONFIG"])}
path = os.path.join(out, f"{env['RENDEZVOUS_NODE_ID']}-{round_}.json")
with open(path + ".tmp", "w") as f:
    json.dump(record, f)
os.rename(path + ".tmp", path)  # readers never see half a record

if mode == "hang-first-round":
    if round_ == 1:
        time.sleep(120)
    sys.exit(0)
if mode.startswith("fail-rank-1-after-all:"):
    if rank == 1:
        while len([n for n in os.listdir(out) if n.endswith(f"-{round_}.json")]) < record["world"]:
            time.sleep(0.02)
    mode = "fail-rank-1:" + mode.split(":")[1]
if mode.startswith("fail-rank-1:"):
    if rank == 1:
        sys.exit(int(mode.split(":")[1]))
    time.sleep(120)
if mode.startswith("fail:"):
    sys.exit(int(mode.split(":")[1]))
if mode.startswith("sleep:"):
    time.sleep(float(mode.split(":")[1]))
    sys.exit(0)
sys.exit(f"unknown mode {mode!r}")
