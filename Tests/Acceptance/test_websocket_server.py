"""HTTPServer's WebSockets driven by clients nobody here wrote: Python `websockets` and raw
sockets, against Benchmarks/HTTPEchoServer."""
import asyncio
import base64
import os
import resource
import socket
import struct
import urllib.request

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from echo_server import EchoServer


@pytest.fixture
def server():
    echo = EchoServer()
    yield echo
    echo.kill()


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def test_echo_and_close_code_4000_replaced(server):
    async def scenario():
        async with websockets.connect(f"{server.url}/ws") as ws:
            await ws.send("hello")
            assert await ws.recv() == "hello"
            await ws.send(b"\x00\x01")
            assert await ws.recv() == b"\x00\x01"
            await ws.send("close 4000 replaced")
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 4000
            assert closed.value.rcvd.reason == "replaced"
    run(scenario())


def test_sigterm_closes_sockets_with_1012_restart(server):
    async def scenario():
        sockets = [await websockets.connect(f"{server.url}/ws") for _ in range(3)]
        server.process.terminate()
        for ws in sockets:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1012, "restart")
    run(scenario())
    assert server.process.wait(timeout=10) == 0


def test_401_with_headers_before_the_upgrade(server):
    async def scenario():
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            await websockets.connect(f"{server.url}/ws/deny")
        assert refused.value.response.status_code == 401
        assert refused.value.response.headers["WWW-Authenticate"] == 'Bearer realm="echo"'
    run(scenario())


def test_invalid_utf8_gets_1007(server):
    async def scenario():
        async with websockets.connect(f"{server.url}/ws") as ws:
            await ws.send(b"\xc3\x28", text=True)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 1007
    run(scenario())


def test_oversized_message_gets_1009(server):
    async def scenario():
        async with websockets.connect(f"{server.url}/ws", max_size=None) as ws:
            await ws.send("x" * 70_000)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 1009
    run(scenario())


def raw_upgrade(port, path="/ws"):
    """A raw TCP WebSocket handshake; returns the socket after the 101."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def read_frame(sock):
    first, second = sock.recv(2, socket.MSG_WAITALL)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", sock.recv(2, socket.MSG_WAITALL))[0]
    payload = sock.recv(length, socket.MSG_WAITALL) if length else b""
    return first & 0x0F, payload


def test_unmasked_client_frame_gets_1002(server):
    sock = raw_upgrade(server.port)
    sock.sendall(b"\x81\x02hi")  # FIN text, no mask bit
    opcode, payload = read_frame(sock)
    assert opcode == 0x8
    assert struct.unpack("!H", payload[:2])[0] == 1002


def test_server_pings_arrive():
    echo = EchoServer(PING_INTERVAL_MS=200, PONG_TIMEOUT_MS=5000)
    try:
        sock = raw_upgrade(echo.port)
        opcode, _ = read_frame(sock)
        assert opcode == 0x9
    finally:
        echo.kill()


def test_two_thousand_sockets_each_get_a_frame_pushed_from_another_task(server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    count = 2000

    async def scenario():
        sockets = []
        for batch in range(0, count, 200):
            sockets += await asyncio.gather(*(websockets.connect(f"{server.url}/ws/push", open_timeout=30)
                                              for _ in range(batch, min(count, batch + 200))))
        pushed = await asyncio.to_thread(
            lambda: urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{server.port}/push?text=wake", method="POST", data=b""), timeout=30).read())
        assert int(pushed) == count
        received = await asyncio.gather(*(ws.recv() for ws in sockets))
        assert received == ["wake"] * count
        await asyncio.gather(*(ws.close() for ws in sockets))
    run(scenario())
