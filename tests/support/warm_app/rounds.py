"""The --prewarm restart tests' command: rounds.py OUT SECONDS [LATER] records, for each
round, whether it started warm and when its process was created (clock ticks since boot);
round 1 fails with 3 after SECONDS (waiting for the spare), later rounds succeed after
LATER seconds (default: half of SECONDS; a spare for the next round is up by then)."""
import json
import os
import sys
import time

out = sys.argv[1]
round_ = int(os.environ["RENDEZVOUS_ROUND"])
with open("/proc/self/stat", "rb") as f:
    created = int(f.read().rpartition(b")")[2].split()[19])
record = {"round": round_, "warm": "warm_marker" in sys.modules, "created": created, "pid": os.getpid(),
          "tf_config": os.environ["TF_CONFIG"]}
path = os.path.join(out, f"{os.environ['RENDEZVOUS_NODE_ID']}-{round_}")
with open(path + ".json", "w") as f:
    json.dump(record, f)
if round_ == 1:
    time.sleep(float(sys.argv[2]))  # the next round's spare starts meanwhile
    with open("/proc/uptime") as f:
        ended = float(f.read().split()[0]) * os.sysconf("SC_CLK_TCK")
    with open(path + ".ended", "w") as f:  # the first to end fails the round: the others are stopped
        f.write(repr(ended))
    sys.exit(3)
time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else float(sys.argv[2]) / 2)  # the spare for a round 3 starts meanwhile, and goes with the job
