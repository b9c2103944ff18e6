"""A command for --sync-dir tests: records what its synced directory holds when it starts.

    sync_command.py DIR OUT [chief-writes]

Writes OUT/<rank>-<round>.json: {"rank", "round", "files": {path: sha256}}. With
`chief-writes`, worker 0 then changes DIR (a new file, one removed), as a chief writing its
last checkpoint would.
"""

import hashlib
import json
import os
import sys
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else ""
rank, round_ = os.environ["RENDEZVOUS_RANK"], os.environ["RENDEZVOUS_ROUND"]
files = {
    str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
    for p in sorted(root.rglob("*")) if p.is_file()
} if root.is_dir() else {}
(out / f"{rank}-{round_}.json").write_text(json.dumps({"rank": int(rank), "round": int(round_), "files": files}))
if mode == "chief-writes" and rank == "0":
    (root / "chief").mkdir(parents=True, exist_ok=True)
    (root / "chief" / "final.txt").write_text("written by the chief at the end\n")
    for p in root.rglob("old*"):
        p.unlink()
