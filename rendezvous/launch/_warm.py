# The warm interpreter's bootstrap (rendezvous.launch.prewarm), run as `<python> <options> -c
# <this text> RELEASE STATUS GATE LOW MODE TARGET REST MODULES SHOWN...`. With LOW 1 (a spare,
# for a later round) it takes the lowest CPU and I/O priority first, which its gate gives
# back when the round waits for it (the nice value only where the gate can). It imports
# MODULES (a leading ? marks one imported only if found), writes "ok" or "error <why>" to
# STATUS, then waits for the release on RELEASE: the working directory, the number of the
# command's arguments, each argument and each NAME=VALUE of its environment, each ended by
# a NUL; it answers "go" on STATUS. Then it runs the script or module as `__main__`, in this
# interpreter's real __main__ module, as `python script.py` and `python -m module` do.
# Nothing of TensorFlow runs before the release: only imports. Imports nothing of the
# package: the command's python need not have it.
def _rendezvous_warm():
    import ctypes
    import os
    import sys

    main = sys.modules["__main__"].__dict__
    del main["_rendezvous_warm"]
    lowest_priority = main.pop("_lowest_priority")
    libc = ctypes.CDLL(None, use_errno=True)
    release, status, gate, low = (int(a) for a in sys.argv[1:5])
    mode, target, rest, wanted = sys.argv[5], sys.argv[6], int(sys.argv[7]), sys.argv[8]
    shown = sys.argv[9:]
    libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: the gate ended before the release
    if os.getppid() != gate:
        os._exit(125)
    if low:  # before any thread: the ones the imports start inherit it
        lowest_priority(libc)
    # what ps shows: the command line of the plain start, written over this one's (longer)
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    start, end = int(fields[45]), int(fields[46])
    line = b"\0".join(os.fsencode(w) for w in shown)[:end - start - 1]
    ctypes.memmove(start, line.ljust(end - start, b"\0"), end - start)
    del sys.argv[1:]
    isolated = sys.flags.isolated or getattr(sys.flags, "safe_path", False)
    if not isolated:  # sys.path[0] as the plain start has it, for the imports already
        sys.path[0] = os.path.dirname(os.path.realpath(target)) if mode == "file" else os.getcwd()
    before = dict(os.environb)
    failed = b""
    for name in filter(None, wanted.split(",")):
        optional = name.startswith("?")
        name = name.lstrip("?")
        try:
            if optional:
                import importlib.util

                if importlib.util.find_spec(name) is None:
                    continue
            __import__(name)
        except BaseException as error:  # SystemExit, KeyboardInterrupt too: report, do not run
            failed = f"cannot import {name}: {type(error).__name__}: {error}".encode(errors="replace")
            break
    os.write(status, b"error " + failed + b"\n" if failed else b"ok\n")
    if failed:
        os._exit(0)
    data = chunk = os.read(release, 65536)
    while chunk:
        chunk = os.read(release, 65536)
        data += chunk
    os.close(release)
    os.write(status, b"go\n")  # the gate's bounded wait for it tells a stopped spare
    os.close(status)
    items = data.split(b"\0")[:-1]  # the directory, the count of arguments, each, then NAME=VALUE...
    if len(items) < 2:
        os._exit(125)  # the gate closed the pipe: no release
    cwd, count = items[0], int(items[1])
    argv = [os.fsdecode(a) for a in items[2:2 + count]]
    env = dict(item.partition(b"=")[::2] for item in items[2 + count:])
    libc.prctl(1, 0)  # from now on as a spawned command: no parent-death signal
    os.chdir(cwd)
    # what the imports set (TF_USE_LEGACY_KERAS=1 before importing TensorFlow) stays set,
    # unless the release gives it a value: the plain start sets it after the release's too
    added = {k: v for k, v in os.environb.items() if before.get(k) != v}
    os.environ.clear()
    os.environb.update(env)
    for key, value in added.items():
        os.environb.setdefault(key, value)
    if mode == "file":
        sys.argv[:] = [target] + argv[rest:]
    else:
        sys.argv[:] = ["-m"] + argv[rest:]
        if not isolated:
            sys.path[0] = os.getcwd()
    for name in ("__doc__", "__loader__", "__spec__", "__package__"):
        main.pop(name, None)
    try:
        if mode == "module":
            import runpy

            runpy._run_module_as_main(target)  # type: ignore[attr-defined]  # what `python -m` runs
        else:
            import importlib.machinery

            path = os.path.abspath(target)
            with open(path, "rb") as f:
                source = f.read()
            code = compile(source, path, "exec", dont_inherit=True)
            main.update(__file__=path, __cached__=None, __doc__=None, __package__=None, __spec__=None,
                        __loader__=importlib.machinery.SourceFileLoader("__main__", path))
            exec(code, main)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise  # Python ends by SIGINT itself, the way it does for the plain start
    except BaseException as error:
        # the traceback as the plain start prints it: without this bootstrap's frames
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next
        sys.excepthook(type(error), error.with_traceback(tb), tb)
        sys.exit(1)


def _lowest_priority(libc):
    """Nice 19, if this process may undo it (CAP_SYS_NICE, or RLIMIT_NICE): a command must
    not run at 19; and the idle I/O class, which anyone may undo."""
    import os

    try:
        with open("/proc/self/status", "rb") as f:
            capable = any(line.startswith(b"CapEff:") and int(line.split()[1], 16) >> 23 & 1 for line in f)
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
        if capable or soft == resource.RLIM_INFINITY or soft >= 20 - os.getpriority(os.PRIO_PROCESS, 0):
            os.setpriority(os.PRIO_PROCESS, 0, 19)
    except (OSError, ValueError, ImportError):
        pass
    ioprio_set = {"x86_64": 251, "aarch64": 30, "riscv64": 30}.get(os.uname().machine)
    if ioprio_set is not None:
        libc.syscall(ioprio_set, 1, 0, 3 << 13)  # IOPRIO_WHO_PROCESS, this thread; IOPRIO_CLASS_IDLE


_rendezvous_warm()
