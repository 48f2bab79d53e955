"""Memory per idle WebSocket: opens N WebSockets to a server, then reports how much the
server's resident memory grew per connection. Used by `make bench-http` and `make bench`.

usage: idle_websockets.py PORT PID COUNT [PATH]
"""
import asyncio
import base64
import os
import resource
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def open_socket(port, path):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(head[:40])
    return writer


async def main(port, pid, count, path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    await asyncio.sleep(0.5)
    before = rss_kib(pid)
    started = time.monotonic()
    writers = []
    for batch in range(0, count, 500):
        writers += await asyncio.gather(*(open_socket(port, path) for _ in range(batch, min(count, batch + 500))))
    elapsed = time.monotonic() - started
    await asyncio.sleep(2)  # let the server settle (handler tasks suspended, buffers released)
    after = rss_kib(pid)
    per = (after - before) * 1024 / count
    print(f"idle WebSockets: {count} opened in {elapsed:.1f} s; server RSS {before / 1024:.1f} MiB -> "
          f"{after / 1024:.1f} MiB; {per:.0f} bytes per idle WebSocket")
    for writer in writers:
        writer.close()


if __name__ == "__main__":
    port, pid, count = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    path = sys.argv[4] if len(sys.argv) > 4 else "/ws/idle"
    asyncio.run(main(port, pid, count, path))
