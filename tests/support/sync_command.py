"""The command of the --sync-dir tests: records what its synced directory holds when it
starts, then behaves as told.

    sync_command.py DIR OUT [MODE]

Writes OUT/<rank>-<round>.json: {"rank", "round", "files": {path: sha256}}. MODE:
`chief-writes`: worker 0 then changes DIR (a new file, the `old*` ones removed), as a chief
writing its last checkpoint would. `round-1-fails`: in round 1, worker 0 writes a checkpoint
and waits; worker 2 writes a newer throw-away file and exits 3; later rounds exit 0.
`round-1-hangs`: the same, but worker 2 waits too (the test makes the fault).
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else ""
rank, round_ = int(os.environ["RENDEZVOUS_RANK"]), int(os.environ["RENDEZVOUS_ROUND"])
files = {
    str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(root.rglob("*")) if p.is_file()
} if root.is_dir() else {}
(out / f"{rank}-{round_}.json").write_text(json.dumps({"rank": rank, "round": round_, "files": files}))


def put(path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


if mode == "chief-writes" and rank == 0:
    put("chief/final.txt", "written by the chief at the end\n")
    for p in root.rglob("old*"):
        p.unlink()
if mode in ("round-1-fails", "round-1-hangs") and round_ == 1:
    if rank == 0:
        put("chief/ckpt-1", "the real checkpoint\n")
    if rank == 2:
        time.sleep(0.5)
        put("workertemp_2/ckpt-1", "a throw-away copy, newer\n")
        if mode == "round-1-fails":
            sys.exit(3)
    time.sleep(60)
