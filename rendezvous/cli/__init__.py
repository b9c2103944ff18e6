"""The `rendezvous` command line: `join`, `peers`, `status` and `stop`; arguments become a
config, errors become exit statuses.

`main` parses and dispatches, `show` prints peers and status, `stop` asks a job's
coordinator to end it, `startup` holds the command's start-up measures, `deferred` keeps
modules that the daemon's libraries import and it never uses from loading. The top of the
stack: it may import everything, nothing imports it.
"""
