"""The `rendezvous` command line: `join`, `peers` and `status`; arguments become a config,
errors become exit statuses.

`main` parses and dispatches, `show` prints peers and status, `deferred` keeps modules that
the daemon's libraries import and it never uses from loading. The top of the stack: it may
import everything, nothing imports it.
"""
