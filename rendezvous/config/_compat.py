"""What differs between the Python versions we support (3.10 and newer)."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, as a backport (the `tomli` dependency on 3.10)
    import tomli as tomllib

__all__ = ["tomllib"]
