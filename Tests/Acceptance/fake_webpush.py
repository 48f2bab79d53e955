"""A fake Web Push service (RFC 8030) over TLS that checks what a real one checks, and more:
the VAPID JWT (RFC 8292: ES256 under the `k` key, `aud` = this origin, `exp` in the next
24 h, `sub` mailto:/https:), the headers (Content-Encoding aes128gcm, TTL, Urgency, Topic),
the size, and it decrypts every body with `http_ece` (an independent RFC 8188/8291
implementation) using the subscription's private key. One JSON line per push.

Subscriptions are made here (`subscribe(path)`), so the fake holds their private keys.
Paths `/gone` answer 410, `/expired` 404, `/slow` 429 (Retry-After: 1); others 201.
"""
import base64
import http.server
import json
import os
import re
import ssl
import threading
import time

import http_ece
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fake_apns import self_signed_certificate

TOPIC = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class FakeWebPush:
    """The service; `pushes` holds every request with its verdict and decrypted payload."""

    answers = {"/gone": 410, "/expired": 404, "/slow": 429}

    def __init__(self, certificate=None, directory=None):
        import tempfile
        self.directory = directory or tempfile.mkdtemp(prefix="fake-webpush-")
        self.cert_file, self.key_file = certificate or self_signed_certificate(self.directory)
        self.subscriptions = {}
        self.pushes = []
        self.lock = threading.Lock()
        self.log_path = None
        # Seconds to hold the answer to a push at a path (recorded at once, answered then).
        self.hold = {}

    def start(self):
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(min(length, 1 << 20))
                status, reason, details = fake.verdict(self.path, self.headers, body)
                entry = {"time": time.time(), "path": self.path, "status": status, "reason": reason,
                         "headers": {k.lower(): v for k, v in self.headers.items()}, **details}
                with fake.lock:
                    fake.pushes.append(entry)
                if fake.log_path:
                    with open(fake.log_path, "a") as log:
                        log.write(json.dumps(entry) + "\n")
                time.sleep(fake.hold.get(self.path, 0))
                text = (reason or "").encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "1")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()

    @property
    def origin(self):
        return f"https://127.0.0.1:{self.port}"

    def subscribe(self, path):
        """A new subscription at `path`: (endpoint, p256dh, auth) as a browser gives them."""
        key = ec.generate_private_key(ec.SECP256R1())
        auth = os.urandom(16)
        self.subscriptions[path] = (key, auth)
        point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        return self.origin + path, b64url(point), b64url(auth)

    def accepted(self):
        with self.lock:
            return [p for p in self.pushes if 200 <= p["status"] < 300]

    def verdict(self, path, headers, body):
        details = {}
        auth = headers.get("Authorization", "")
        match = re.fullmatch(r"vapid t=([^,\s]+),\s*k=([A-Za-z0-9_-]+)", auth)
        if not match:
            return 401, "missing or malformed VAPID authorization", details
        token, key_text = match.groups()
        try:
            point = b64url_decode(key_text)
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
            header = jwt.get_unverified_header(token)
            claims = jwt.decode(token, public, algorithms=["ES256"], audience=self.origin,
                                options={"require": ["aud", "exp", "sub"]})
        except (ValueError, jwt.PyJWTError) as error:
            details["jwt_error"] = str(error)
            return 403, "BadJwtToken", details
        details["vapid"] = {"aud": claims["aud"], "exp": claims["exp"], "sub": claims["sub"], "typ": header.get("typ"),
                            "k": key_text}
        if claims["exp"] > time.time() + 86400:
            return 403, "BadJwtToken: exp more than 24 hours ahead", details
        if not (claims["sub"].startswith("mailto:") or claims["sub"].startswith("https:")):
            return 403, "BadJwtToken: sub", details
        if headers.get("Content-Encoding") != "aes128gcm":
            return 400, "Content-Encoding must be aes128gcm", details
        ttl = headers.get("TTL")
        if ttl is None or not ttl.isdigit():
            return 400, "TTL missing", details
        if headers.get("Urgency") not in (None, "very-low", "low", "normal", "high"):
            return 400, "bad Urgency", details
        topic = headers.get("Topic")
        if topic is not None and not TOPIC.match(topic):
            return 400, "bad Topic", details
        if len(body) > 4096:
            return 413, "payload too large", details
        if path in self.answers:
            return self.answers[path], "as configured", details
        if path not in self.subscriptions:
            return 404, "no such subscription", details
        key, secret = self.subscriptions[path]
        try:
            plaintext = http_ece.decrypt(body, private_key=key, auth_secret=secret, version="aes128gcm")
            details["payload"] = json.loads(plaintext)
        except Exception as error:  # a body we cannot decrypt is the sender's bug
            details["decrypt_error"] = repr(error)
            return 400, "cannot decrypt", details
        details["record_size"] = int.from_bytes(body[16:20], "big")
        details["keyid_length"] = body[20]
        return 201, None, details
