"""Starts `whereabot serve` against the test database and mints tokens with PyJWT."""
import hashlib
import os
from pathlib import Path
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import jwt

from conftest import RELAY_URL, ROOT

# WHEREABOT_TEST_BINARY runs the tests against another build (a before/after comparison).
BINARY = Path(os.environ.get("WHEREABOT_TEST_BINARY", ROOT / ".build" / "debug" / "whereabot"))
SECRET = "acceptance-jwt-secret-with-at-least-32-characters"


HANDED_OUT = set()  # ports given to a server of this test session: never twice


def free_port():
    """A free port no other server of this session was given (a module may pick one at
    import and bind it much later)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in HANDED_OUT:
            HANDED_OUT.add(port)
            return port


def instance_channel(instance):
    """An instance's own LISTEN channel, as private.instance_channel names it."""
    return "whereabot_i_" + hashlib.sha256(instance.encode()).hexdigest()[:32]


class RelayServer:
    """A running relay instance, ready (`/readyz` 200: registered, LISTENing, signing keys
    read); `stop()` sends SIGTERM and waits."""

    def __init__(self, preexec_fn=None, **environment):
        if not BINARY.exists():
            subprocess.run(["swift", "build", "-Xswiftc", "-gnone", "--product", "whereabot"], cwd=ROOT, check=True)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.instance = environment.get("INSTANCE_ID", "acceptance-" + uuid.uuid4().hex[:6])
        env = {**os.environ, "DATABASE_URL": RELAY_URL, "SUPABASE_JWT_SECRET": SECRET, "PORT": str(self.port),
               "PUBLIC_URL": self.base, "INSTANCE_ID": self.instance, **environment}
        self.process = subprocess.Popen([str(BINARY), "serve"], env=env, stderr=subprocess.PIPE, text=True,
                                        preexec_fn=preexec_fn)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=1) as response:
                    if response.status == 200:
                        return
            except (OSError, urllib.error.HTTPError):
                pass
            time.sleep(0.05)
        raise RuntimeError("relay did not become ready")

    def stop(self):
        self.process.terminate()
        code = self.process.wait(timeout=20)
        self.logs = self.process.stderr.read()
        return code


def token(user_id, session_id, email, client_id=None, lifetime=3600, age=0):
    """A Supabase-shaped access token (HS256), as Supabase Auth would issue it `age` seconds ago."""
    now = int(time.time()) - age
    claims = {"sub": str(user_id), "aud": "authenticated", "role": "authenticated", "email": email,
              "session_id": str(session_id), "iat": now, "exp": now + lifetime}
    if client_id:
        claims["client_id"] = client_id
    return jwt.encode(claims, SECRET, algorithm="HS256")
