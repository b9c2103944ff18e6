"""Imported ahead of the command by the --prewarm tests: `warm_marker` in sys.modules tells
the script that it started warm."""
import os

os.environ.setdefault("MARKER_SET", "by warm_marker")  # as TF_USE_LEGACY_KERAS before TensorFlow
