"""Imported ahead of the command by the --prewarm tests: `warm_marker` in sys.modules tells
the script that it started warm."""
