"""Push test kit shared by the acceptance and fault suites: both fakes with one
certificate, the provider and VAPID keys, the relay's environment, and a curl agent."""
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import uuid

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from fake_apns import FakeAPNs, self_signed_certificate
from fake_webpush import FakeWebPush, b64url

KEY_ID, TEAM_ID, TOPIC = "ABC123DEFG", "TEAM123456", "app.whereabot.test"
RULES = {"bad0": (400, "BadDeviceToken"), "dead": (410, "Unregistered"), "0429": (429, "TooManyRequests"),
         "0500": (500, "InternalServerError"), "0403": (403, "ExpiredProviderToken"), "0413": (413, "PayloadTooLarge")}


class Push:
    """Both fakes with one certificate, the provider and VAPID keys, and the relay's env."""

    def __init__(self, goaway_after=None):
        self.directory = tempfile.mkdtemp(prefix="whereabot-push-")
        certificate = self_signed_certificate(self.directory)
        provider = ec.generate_private_key(ec.SECP256R1())
        self.key_file = os.path.join(self.directory, "AuthKey.p8")
        with open(self.key_file, "wb") as out:
            out.write(provider.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
        public = provider.public_key().public_bytes(serialization.Encoding.PEM,
                                                    serialization.PublicFormat.SubjectPublicKeyInfo)
        self.apns = FakeAPNs(public, KEY_ID, TEAM_ID, TOPIC, RULES, goaway_after, certificate=certificate).start()
        self.web = FakeWebPush(certificate=certificate).start()
        vapid = ec.generate_private_key(ec.SECP256R1())
        self.vapid_public = b64url(vapid.public_key().public_bytes(serialization.Encoding.X962,
                                                                   serialization.PublicFormat.UncompressedPoint))
        self.env = {"APNS_KEY_ID": KEY_ID, "APNS_TEAM_ID": TEAM_ID, "APNS_TOPIC": TOPIC,
                    "APNS_PRIVATE_KEY_FILE": self.key_file, "APNS_URL": self.apns.url, "PUSH_CA_FILE": certificate[0],
                    "VAPID_PRIVATE_KEY": b64url(vapid.private_numbers().private_value.to_bytes(32, "big")),
                    "VAPID_SUBJECT": "mailto:ops@whereabot.example", "WEB_PUSH_ALLOWED_ORIGINS": self.web.origin,
                    "LOG_LEVEL": "info"}

    def stop(self):
        self.apns.stop()
        self.web.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def apns_for(self, tokens):
        return [p for p in self.apns.pushes if p.get("token") in tokens]

    def web_for(self, paths):
        return [p for p in self.web.pushes if p["path"] in paths]


def hex_token(prefix=""):
    return (prefix + uuid.uuid4().hex + uuid.uuid4().hex)[:64]


class Locate(threading.Thread):
    """POST /v1/locate with curl in the background; `started` is when curl began."""

    def __init__(self, base, credential, seconds, person=None, reason=None):
        super().__init__(daemon=True)
        self.base, self.credential, self.seconds, self.person = base, credential, seconds, person
        self.reason = reason
        self.status = self.body = None

    def run(self):
        self.started = time.time()
        result = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-X", "POST", "-H",
                                 f"Authorization: Bearer {self.credential}",
                                 f"{self.base}/v1/locate?timeout_secs={self.seconds}"
                                 + (f"&person={urllib.parse.quote(self.person)}" if self.person else "")
                                 + (f"&reason={urllib.parse.quote(self.reason)}" if self.reason else "")],
                                capture_output=True, text=True, timeout=self.seconds + 30)
        body, _, status = result.stdout.rpartition("\n")
        self.status, self.body = int(status), body

    def begin(self):
        self.start()
        time.sleep(0.05)
        return self


def wait_for(predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    return predicate()
