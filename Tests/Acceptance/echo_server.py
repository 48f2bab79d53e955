"""Starts Benchmarks/HTTPEchoServer (the `http-echo-server` product) for a test."""
import os
import subprocess

from conftest import ROOT

BINARY = ROOT / ".build" / "debug" / "http-echo-server"


class EchoServer:
    """A running http-echo-server on a free port; `stop()` sends SIGTERM."""

    def __init__(self, **environment):
        if not BINARY.exists():
            subprocess.run(["swift", "build", "-Xswiftc", "-gnone", "--product", "http-echo-server"], cwd=ROOT, check=True)
        env = {**os.environ, "PORT": "0", **{k: str(v) for k, v in environment.items()}}
        self.process = subprocess.Popen([str(BINARY)], env=env, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        assert line.startswith("listening on "), line
        self.port = int(line.split()[-1])
        self.url = f"ws://127.0.0.1:{self.port}"

    def stop(self, timeout=10):
        self.process.terminate()
        return self.process.wait(timeout=timeout)

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
