"""A process that forks a spare gate first thing, as the `rendezvous` command does, then hands
it to a launcher: spare_gate.py ACTION ENV_JSON COMMAND...

Prints one JSON line {"spare": pid, "again": whether the launcher still holds it} as soon as the gate
waits, then: `fire` starts the command now, prints {"command": its pid} once it runs (null if it ended first) and
{"code": its exit code} when it ends, then {"tail": the last lines of its stderr};
`stop` disarms the gate and prints {"code": ...}; `hold` waits forever (to be killed)."""

import json
import sys

from rendezvous.launch import firstgate

spare = firstgate.fork_spare()

import asyncio  # noqa: E402  (after the fork, as in rendezvous.__main__)
import time  # noqa: E402

from rendezvous.launch.launcher import Launcher  # noqa: E402


async def main(action: str, env: dict, command: list) -> None:
    launcher = Launcher(spare=spare)
    await launcher.arm(command, env)
    print(json.dumps({"spare": spare.pid if spare else None, "gate": launcher._process.pid,
                      "again": launcher._spare is not None}),
          flush=True)
    if action == "fire":
        launcher.fire(time.time())
        ended = asyncio.ensure_future(launcher.wait())
        while launcher.pid == launcher._process.pid and not ended.done():  # until the gate started it
            await asyncio.sleep(0.01)
        print(json.dumps({"command": None if ended.done() else launcher.pid}), flush=True)
        print(json.dumps({"code": await ended}), flush=True)
        print(json.dumps({"tail": launcher.tail()}), flush=True)
    elif action == "stop":
        print(json.dumps({"code": await launcher.stop(grace=1)}), flush=True)
    else:
        await asyncio.Event().wait()


asyncio.run(main(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]))
