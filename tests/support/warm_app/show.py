"""A user's script for the --prewarm tests: show.py OUT MODE [ARGS...] writes what a script
can see of how it was started to OUT as JSON, then, by MODE: `exit:N` exits N, `raise` raises,
`sleep` waits to be stopped, `ok` ends."""
import json
import os
import sys
import time

from neighbour import NAME  # a module beside the script: sys.path[0] is the script's directory

seen = {
    "name": __name__, "file": __file__, "argv": sys.argv, "path0": sys.path[0], "cwd": os.getcwd(),
    "neighbour": NAME, "round_var": os.environ.get("ROUND_VAR"), "doc": __doc__.split(":")[0],
    "cmdline": open("/proc/self/cmdline", "rb").read().rstrip(b"\0").decode().split("\0"),
    "pgid_is_pid": os.getpgid(0) == os.getpid(), "warm_marker": "warm_marker" in sys.modules,
    "pid": os.getpid(), "unbuffered": sys.stdout.write_through,
    "mask": sorted(int(s) for s in __import__("signal").pthread_sigmask(0, [])),
}
import warm_marker  # noqa: E402,F401  (started warm: imported already)

seen["marker_set"] = os.environ.get("MARKER_SET")
with open(sys.argv[1], "w") as out:
    json.dump(seen, out)
mode = sys.argv[2]
if mode.startswith("exit:"):
    sys.exit(int(mode[5:]))
if mode == "raise":
    def inner():
        raise ValueError("the user's error")
    inner()
if mode == "sleep":
    time.sleep(600)
