"""`python -m pkg OUT`: a package run as a module, with a relative import."""
import json
import os
import sys

from .part import PART

with open(sys.argv[1], "w") as out:
    json.dump({"name": __name__, "argv": sys.argv, "package": __package__, "part": PART,
               "path0": sys.path[0], "warm_marker": "warm_marker" in sys.modules}, out)
