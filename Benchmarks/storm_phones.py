"""Phones for the reconnect storm, in a process of their own (relay_bench.py starts several).

10,000 phones on one Python event loop made the storm measure the client: the bench's own
probe saw the restarted relay ready seconds after it answered, and every phone's reconnect
waited its turn on that loop. Split over processes, the client keeps up with the relay.

Reads one JSON line from stdin, {"port": …, "phones": [[user, phone_token, device_id,
source_address or null], …]}, keeps each phone connected as the app does (docs/protocol.md,
"The socket from a browser": at once after a close, then after 1 s, 2 s, 4 s … at most 30 s,
±50 % jitter, leaving pings unanswered) and writes one line per event to stdout, times from
time.monotonic() (one clock for every process on the machine):
  hello <user> <t>     a socket opened and said hello
  ping <request> <t>   a locate ping arrived
  error <text>         an unexpected exception in a phone's read loop
Exits when stdin closes.
"""
import asyncio
import json
import random
import sys
import time

import relay_bench


async def main():
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=1 << 26)  # the job line holds every phone's token
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    job = json.loads(await stdin.readline())
    port, out = job["port"], []

    def ping_arrived(request):
        out.append(f"ping {request} {time.monotonic():.6f}")

    async def keep_connected(user, phone_token, host):
        delay = 0.0
        while True:
            socket = None
            try:
                socket, task = await asyncio.wait_for(
                    relay_bench.phone(port, phone_token, ping_arrived, host, answer=False), 10)
                out.append(f"hello {user} {time.monotonic():.6f}")
                delay = 0.0
                await task  # closed by the relay: 1012 "restart" means reconnect at once
            except (ConnectionError, OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
                delay = min(30.0, max(1.0, delay * 2))
                await asyncio.sleep(delay * random.uniform(0.5, 1.5))
            finally:
                if socket:
                    socket.close()

    async def flush():
        reported = 0
        while True:
            await asyncio.sleep(0.01)
            errors = relay_bench.CLIENT_ERRORS[reported:]
            reported += len(errors)
            out.extend(f"error {error}" for error in errors)
            if out:
                sys.stdout.write("\n".join(out) + "\n")
                sys.stdout.flush()
                out.clear()

    for user, phone_token, device, _ in job["phones"]:
        relay_bench.DEVICES[phone_token] = device
    tasks = [asyncio.ensure_future(keep_connected(user, token, host)) for user, token, _, host in job["phones"]]
    tasks.append(asyncio.ensure_future(flush()))
    await stdin.read()  # until the bench closes our stdin
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    import uvloop
    uvloop.run(main())
