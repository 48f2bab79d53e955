"""nginx or HAProxy in HTTP mode as the balancer in front of a relay, for the acceptance and
fault tests that check the client's address comes from X-Forwarded-For (docs/deploy.md)."""
import os
import shutil
import socket
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# docs/deploy.md shows the same server block.
NGINX = """
worker_processes 1;
worker_rlimit_nofile 30000;
pid @DIR@/nginx.pid;
error_log @DIR@/error.log info;
events { worker_connections 10240; }
http {
    access_log @DIR@/access.log;
    client_body_temp_path @DIR@/body;
    proxy_temp_path @DIR@/proxy;
    fastcgi_temp_path @DIR@/fastcgi;
    uwsgi_temp_path @DIR@/uwsgi;
    scgi_temp_path @DIR@/scgi;
    map $http_upgrade $connection_upgrade {
        default upgrade;
        ''      close;
    }
    server {
        listen 127.0.0.1:@PORT@;
        location / {
            proxy_pass http://127.0.0.1:@RELAY@;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 130s;
        }
    }
}
"""

# HTTP mode, no send-proxy: HAProxy adds its own X-Forwarded-For line after the client's.
HAPROXY = """
defaults
    mode http
    option forwardfor
    timeout connect 2s
    timeout client 130s
    timeout server 130s
    timeout tunnel 1h
frontend whereabot
    bind 127.0.0.1:@PORT@
    default_backend relay
backend relay
    server relay1 127.0.0.1:@RELAY@
"""


class Proxy:
    """nginx or HAProxy (HTTP mode) in front of `relay`, with its config and logs in a folder of its own."""

    def __init__(self, kind, relay):
        self.kind, self.relay = kind, relay
        self.folder = tempfile.mkdtemp(prefix=f"whereabot-{kind}-")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = os.path.join(self.folder, f"{kind}.conf")
        text = (NGINX if kind == "nginx" else HAPROXY).replace("@DIR@", self.folder)
        text = text.replace("@PORT@", str(self.port)).replace("@RELAY@", str(relay.port))
        if kind == "nginx" and os.geteuid() == 0:
            # As root, nginx's workers would run as `nobody`, who cannot enter this 0700 folder
            # (its temp paths); the `user` directive is only allowed (and only needed) as root.
            text = "user root;\n" + text
        with open(config, "w") as file:
            file.write(text)
        command = (["/usr/sbin/nginx", "-p", self.folder, "-c", config, "-g", "daemon off;"] if kind == "nginx"
                   else ["haproxy", "-db", "-f", config])
        self.output = open(os.path.join(self.folder, "output.log"), "wb")
        self.process = subprocess.Popen(command, stdout=self.output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{kind} did not start: {self.logs()}")

    def logs(self):
        texts = []
        for name in ("output.log", "error.log"):
            path = os.path.join(self.folder, name)
            if os.path.exists(path):
                texts.append(open(path, errors="replace").read())
        return "\n".join(texts)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.output.close()
        shutil.rmtree(self.folder, ignore_errors=True)
