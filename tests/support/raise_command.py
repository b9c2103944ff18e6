"""The command of the failure tests: writes numbered lines to stdout and stderr, then in
round 1 rank 1 raises once every rank has started; every other start sleeps.

    raise_command.py OUT_DIR LINES [error-file]

With `error-file`, rank 1 writes its error to $RENDEZVOUS_ERROR_FILE before it raises (a
different message from the one it raises, to tell which one a node shows).
"""

import json
import os
import sys
import time

out, lines = sys.argv[1], int(sys.argv[2])
use_error_file = sys.argv[3:] == ["error-file"]
env = os.environ
rank, round_, world = int(env["RENDEZVOUS_RANK"]), int(env["RENDEZVOUS_ROUND"]), int(env["RENDEZVOUS_WORLD_SIZE"])
for i in range(lines):  # a line a write: the two streams mix by whole lines, as on a terminal
    os.write(1, f"out {rank} {round_} {i}\n".encode())
    os.write(2, f"err {rank} {round_} {i}\n".encode())
open(os.path.join(out, f"started-{round_}-{rank}"), "w").close()
if round_ == 1 and rank == 1:
    deadline = time.monotonic() + 60
    while len([n for n in os.listdir(out) if n.startswith("started-1-")]) < world and time.monotonic() < deadline:
        time.sleep(0.05)
    if use_error_file:
        with open(env["RENDEZVOUS_ERROR_FILE"], "w") as f:
            json.dump({"type": "ValueError", "message": "label 12 out of range", "traceback": "Traceback (most recent "
                       "call last):\n  File \"train.py\", line 3, in <module>\nValueError: label 12 out of range\n"}, f)
    raise RuntimeError("shard 7 is corrupt")
time.sleep(600)
