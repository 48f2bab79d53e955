"""A fake APNs as strict as Apple's documented checks: HTTP/2 over TLS (h2, ALPN h2 only),
token authentication verified like APNs (ES256 signature, kid, iss, iat age), every header
of a push checked, payload ≤ 4096 bytes, answers per token prefix (400/410/429/5xx), GOAWAY
after N streams, and one JSON line per push.

In tests: `FakeAPNs(...).start()` in a thread; by hand:
    python fake_apns.py --port 8443 --key-file provider-public.pem --kid KEY --team TEAM \
        --topic app.whereabot --log apns.jsonl
prints the CA file to pass the relay as PUSH_CA_FILE and APNS_URL=https://127.0.0.1:8443.
"""
import argparse
import asyncio
import datetime
import json
import pathlib
import re
import ssl
import tempfile
import threading
import time
import uuid

import h2.config
import h2.connection
import h2.events
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def self_signed_certificate(directory):
    """A certificate for 127.0.0.1 and localhost; returns (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "whereabot test push service")])
    now = datetime.datetime.now(datetime.timezone.utc)
    import ipaddress
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    directory = pathlib.Path(directory)
    cert_path, key_path = directory / "push-cert.pem", directory / "push-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


HEX_TOKEN = re.compile(r"^[0-9a-f]{64,200}$")


class FakeAPNs:
    """The server. `rules` maps a token prefix to (status, reason); `goaway_after` closes
    each connection with GOAWAY after that many responses (higher streams unanswered)."""

    def __init__(self, public_key_pem, kid, team, topic, rules=None, goaway_after=None, port=0, certificate=None):
        self.public_key = serialization.load_pem_public_key(public_key_pem.encode() if isinstance(public_key_pem, str)
                                                            else public_key_pem)
        self.kid, self.team, self.topic = kid, team, topic
        self.rules = rules or {}
        self.goaway_after = goaway_after
        self.port = port
        self.pushes = []          # every request that reached us, with our verdict
        self.connections = 0
        self.lock = threading.Lock()
        self.log_path = None
        self.directory = tempfile.mkdtemp(prefix="fake-apns-")
        self.cert_file, self.key_file = certificate or self_signed_certificate(self.directory)
        self.loop = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self):
        ready = threading.Event()

        def run():
            self.loop = asyncio.new_event_loop()
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(self.cert_file, self.key_file)
            context.set_alpn_protocols(["h2"])
            server = self.loop.run_until_complete(self.loop.create_server(
                lambda: _Connection(self), "127.0.0.1", self.port, ssl=context))
            self.port = server.sockets[0].getsockname()[1]
            self.server = server
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)
        return self

    def stop(self):
        if self.loop:
            self.loop.call_soon_threadsafe(self.server.close)
            self.loop.call_soon_threadsafe(self.loop.stop)

    @property
    def url(self):
        return f"https://127.0.0.1:{self.port}"

    def accepted(self):
        """The pushes answered 200."""
        with self.lock:
            return [p for p in self.pushes if p["status"] == 200]

    def record(self, entry):
        with self.lock:
            self.pushes.append(entry)
        if self.log_path:
            with open(self.log_path, "a") as log:
                log.write(json.dumps(entry) + "\n")

    # -- the checks APNs makes ---------------------------------------------------------
    def verdict(self, headers, body):
        """(status, reason, details) for one request, in APNs' words."""
        details = {}
        if headers.get(":method") != "POST":
            return 405, "MethodNotAllowed", details
        match = re.fullmatch(r"/3/device/(.+)", headers.get(":path", ""))
        if not match:
            return 404, "BadPath", details
        token = match.group(1)
        details["token"] = token
        auth = headers.get("authorization", "")
        if not auth.startswith("bearer "):
            return 403, "MissingProviderToken", details
        provider = auth[len("bearer "):]
        try:
            header = jwt.get_unverified_header(provider)
            claims = jwt.decode(provider, self.public_key, algorithms=["ES256"], options={"verify_aud": False,
                                                                                           "require": ["iss", "iat"]})
        except jwt.PyJWTError as error:
            details["jwt_error"] = str(error)
            return 403, "InvalidProviderToken", details
        details["jwt"] = {"kid": header.get("kid"), "iss": claims.get("iss"), "iat": claims.get("iat"),
                          "alg": header.get("alg")}
        if header.get("alg") != "ES256" or header.get("kid") != self.kid or claims.get("iss") != self.team \
                or set(claims) != {"iss", "iat"} or not isinstance(claims["iat"], int):
            return 403, "InvalidProviderToken", details
        if claims["iat"] < time.time() - 3600:
            return 403, "ExpiredProviderToken", details
        if claims["iat"] > time.time() + 60:
            return 403, "InvalidProviderToken", details
        topic = headers.get("apns-topic")
        if topic is None:
            return 400, "MissingTopic", details
        if topic != self.topic:
            return 400, "TopicDisallowed", details
        push_type = headers.get("apns-push-type")
        priority = headers.get("apns-priority")
        if push_type not in ("alert", "background"):
            return 400, "InvalidPushType", details
        if (push_type, priority) not in (("alert", "10"), ("background", "5")):
            return 400, "BadPriority", details
        try:
            uuid.UUID(headers.get("apns-id", ""))
        except ValueError:
            return 400, "BadMessageId", details
        expiration = headers.get("apns-expiration", "")
        if not expiration.isdigit() or int(expiration) < time.time() - 5:
            return 400, "BadExpirationDate", details
        collapse = headers.get("apns-collapse-id")
        if collapse is not None and len(collapse.encode()) > 64:
            return 400, "BadCollapseId", details
        if headers.get("content-type") not in (None, "application/json"):
            return 400, "BadContentType", details
        if len(body) > 4096:
            return 413, "PayloadTooLarge", details
        try:
            payload = json.loads(body)
        except ValueError:
            return 400, "PayloadEmpty" if not body else "BadPayload", details
        details["payload"] = payload
        aps = payload.get("aps") if isinstance(payload, dict) else None
        if not isinstance(aps, dict):
            return 400, "BadPayload", details
        if push_type == "background" and aps != {"content-available": 1}:
            return 400, "BadPayload", details  # a background push must not alert
        if push_type == "alert" and "alert" not in aps:
            return 400, "BadPayload", details
        if not HEX_TOKEN.match(token):
            return 400, "BadDeviceToken", details
        for prefix, (status, reason) in self.rules.items():
            if token.startswith(prefix):
                return status, reason, details
        return 200, None, details


class _Connection(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.h2 = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        self.streams = {}
        self.answered = 0
        self.closing = False
        with server.lock:
            server.connections += 1
            self.number = server.connections

    def connection_made(self, transport):
        self.transport = transport
        if transport.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
            transport.close()
            return
        self.h2.initiate_connection()
        self.transport.write(self.h2.data_to_send())

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except Exception:  # a protocol error: APNs would close too
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.streams[event.stream_id] = {"headers": dict(event.headers), "body": b""}
            elif isinstance(event, h2.events.DataReceived):
                if event.stream_id in self.streams:
                    self.streams[event.stream_id]["body"] += event.data
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.respond(event.stream_id)
        if not self.transport.is_closing():
            self.transport.write(self.h2.data_to_send())

    def respond(self, stream_id):
        request = self.streams.pop(stream_id, None)
        if request is None or self.closing:
            return  # after GOAWAY: left unanswered, as APNs does
        status, reason, details = self.server.verdict(request["headers"], request["body"])
        apns_id = request["headers"].get("apns-id") or str(uuid.uuid4())
        entry = {"time": time.time(), "connection": self.number, "stream": stream_id, "status": status,
                 "reason": reason, "headers": {k: v for k, v in request["headers"].items()}, **details}
        self.server.record(entry)
        body = b""
        if reason:
            error = {"reason": reason}
            if status == 410:
                error["timestamp"] = int(time.time() * 1000)  # when APNs learnt it: now
            body = json.dumps(error).encode()
        headers = [(":status", str(status)), ("apns-id", apns_id)]
        if body:
            headers += [("content-type", "application/json"), ("content-length", str(len(body)))]
        self.h2.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self.h2.send_data(stream_id, body, end_stream=True)
        self.answered += 1
        if self.server.goaway_after and self.answered >= self.server.goaway_after:
            self.closing = True
            self.h2.close_connection(last_stream_id=stream_id)
            self.transport.write(self.h2.data_to_send())
            asyncio.get_event_loop().call_later(0.05, self.transport.close)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8443)
    parser.add_argument("--key-file", required=True, help="the provider key's PUBLIC key (PEM)")
    parser.add_argument("--kid", required=True)
    parser.add_argument("--team", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rule", action="append", default=[], help="PREFIX=STATUS:REASON, e.g. dead=410:Unregistered")
    parser.add_argument("--goaway-after", type=int)
    parser.add_argument("--log", help="append one JSON line per push here")
    args = parser.parse_args()
    rules = {}
    for rule in args.rule:
        prefix, _, answer = rule.partition("=")
        status, _, reason = answer.partition(":")
        rules[prefix] = (int(status), reason)
    fake = FakeAPNs(pathlib.Path(args.key_file).read_text(), args.kid, args.team, args.topic, rules,
                    args.goaway_after, args.port)
    fake.log_path = args.log
    fake.start()
    print(f"fake APNs on {fake.url}; PUSH_CA_FILE={fake.cert_file}", flush=True)
    try:
        fake.thread.join()
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
