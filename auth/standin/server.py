#!/usr/bin/env python3
# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file.
# Production uses Supabase Auth's OAuth 2.1 server (authorization_url_path
# `/app/oauth/consent`). This is a small, strict, local imitation of the parts of it
# Whereabot's agents and consent page use, for development and tests on one machine.
# =============================================================================
"""A local stand-in for Supabase Auth's OAuth 2.1 server (see auth/standin/README.md).

    .venv/bin/python auth/standin/server.py --port 54321 --database-url URL

URL is a role that can write auth.* (locally the bootstrap superuser's admin URL).
`--port 0` picks a free port; the first line on stdout is always
`listening on http://127.0.0.1:<port>`.

Environment: SUPABASE_JWT_SECRET (also accept HS256 user tokens), AUTH_SITE_URL (the
consent page's site, default http://127.0.0.1:8080), STANDIN_CONSENT_PATH (default
/app/oauth/consent), STANDIN_PUBLIC_URL (the URL clients reach this server at; default
http://127.0.0.1:<port>), STANDIN_KEY_FILE (PEM of the ES256 key; created when missing),
STANDIN_CODE_SECONDS (300), STANDIN_AUTHORIZATION_SECONDS (600), STANDIN_ACCESS_SECONDS
(3600), STANDIN_REFRESH_SECONDS (2592000), STANDIN_AUDIENCE_HOOK=1 (add the RFC 8707
`resource` to `aud`), STANDIN_DATABASE_URL (instead of --database-url), STANDIN_OTP_SECONDS
(3600: a sign-in link's lifetime), STANDIN_OTP_INTERVAL_SECONDS (2: at most one mail per
address in that time), STANDIN_MAILBOX_PORT (instead of --mailbox-port).

It also signs people in by magic link (POST /auth/v1/otp, GET /auth/v1/verify, the refresh
grant at POST /auth/v1/token, POST /auth/v1/logout). Its mails land in a development
mailbox, a second server in this process (`--mailbox-port`, default 54324; 0 = a free
port) with Mailpit's API shape; the second line on stdout is
`mailbox on http://127.0.0.1:<port>`.
"""
import argparse
import base64
import hashlib
import hmac
import html
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import psycopg
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

MAX_BODY = 64 * 1024
MAX_CONNECTIONS = 64        # connections served at once (each has a thread)
MAX_PENDING = 1000          # pending authorization requests (before consent)
MAX_CODES = 1000            # authorization codes, issued or used-and-remembered
MAX_REFRESH = 10000         # refresh tokens (live and rotated-out, for reuse detection)
MAX_OTPS = 1000             # unused sign-in links
MAX_MAILS = 200             # mails the development mailbox keeps (the newest)
MAX_MAILBOX_CONNECTIONS = 16
MAX_EMAIL = 255             # GoTrue's limit on an email address
MAX_CLIENT_NAME = 1024
MAX_REDIRECT_URIS = 10
MAX_URI = 2048
MAX_STATE = 2048
SCOPES = ("openid", "email", "profile", "phone")
DEFAULT_SCOPE = "email"     # Supabase's default (GOTRUE_OAUTH_SERVER_DEFAULT_SCOPE)
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
CHALLENGE_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")           # BASE64URL(SHA-256), RFC 7636 §4.2
VERIFIER_RE = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")     # RFC 7636 §4.1
# GoTrue's email check (internal/api/mail.go, after the HTML5 spec's "valid e-mail address").
EMAIL_RE = re.compile(r"^[a-zA-Z0-9.!#$%&'*+/=?^_`{|}~-]+@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?"
                      r"(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$")
OTP_EXPIRED = {"error": "access_denied", "error_code": "otp_expired",
               "error_description": "Email link is invalid or has expired"}
USER_COLUMNS = ("u.email, u.phone, u.raw_app_meta_data, u.raw_user_meta_data, u.is_anonymous, u.id, u.aud, u.role,"
                " u.email_confirmed_at, u.created_at, u.updated_at, u.last_sign_in_at")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def digest(secret: str) -> str:
    """How codes, refresh tokens and client secrets are kept: never in the clear."""
    return b64url(hashlib.sha256(secret.encode()).digest())


def env_int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


class Refusal(Exception):
    """An error response: status, a JSON body, and optional headers."""

    def __init__(self, status, body, headers=None):
        super().__init__(body.get("error") or body.get("error_code"))
        self.status, self.body, self.headers = status, body, headers or {}


def oauth_error(error, description, status=400, headers=None):
    """RFC 6749 §5.2 / RFC 7591 §3.2.2 error."""
    return Refusal(status, {"error": error, "error_description": description}, headers)


def api_error(status, code, message):
    """Supabase Auth's API error shape, as auth-js reads it (code, error_code, msg)."""
    return Refusal(status, {"code": status, "error_code": code, "msg": message})


def grant_error(code, message, error="invalid_grant", status=400):
    """An error of Supabase Auth's own /token endpoint: its API shape (code, error_code, msg)
    and the OAuth fields (error, error_description) older GoTrue and auth-js also read."""
    return Refusal(status, {"code": status, "error_code": code, "msg": message, "error": error,
                            "error_description": message})


# -----------------------------------------------------------------------------
# Keys
# -----------------------------------------------------------------------------
class SigningKey:
    def __init__(self, path=None):
        if path and os.path.exists(path):
            with open(path, "rb") as f:
                self.private = serialization.load_pem_private_key(f.read(), password=None)
            if not isinstance(self.private, ec.EllipticCurvePrivateKey) or self.private.curve.name != "secp256r1":
                raise SystemExit(f"{path}: not a P-256 EC private key")
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            if path:
                pem = self.private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption())
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(pem)
        numbers = self.private.public_key().public_numbers()
        x, y = b64url(numbers.x.to_bytes(32, "big")), b64url(numbers.y.to_bytes(32, "big"))
        # RFC 7638 thumbprint as the key id.
        thumb = json.dumps({"crv": "P-256", "kty": "EC", "x": x, "y": y}, separators=(",", ":"), sort_keys=True)
        self.kid = b64url(hashlib.sha256(thumb.encode()).digest())
        self.jwk = {"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": self.kid, "alg": "ES256", "use": "sig",
                    "key_ops": ["verify"]}

    def sign(self, claims):
        return jwt.encode(claims, self.private, algorithm="ES256", headers={"kid": self.kid, "typ": "JWT"})


# -----------------------------------------------------------------------------
# In-memory state (bounded; everything expires)
# -----------------------------------------------------------------------------
@dataclass
class Pending:
    id: str
    client_id: str
    redirect_uri: str
    scope: str
    state: str
    resource: str
    code_challenge: str
    expires: float
    user_id: str = None


@dataclass
class Code:
    client_id: str
    user_id: str
    redirect_uri: str
    scope: str
    resource: str
    code_challenge: str
    expires: float
    used: bool = False
    session_id: str = None
    reused: bool = False     # presented again while its first exchange was still running


@dataclass
class Refresh:
    session_id: str
    user_id: str
    client_id: str
    scope: str
    resource: str
    expires: float
    used: bool = False


@dataclass
class Otp:
    """An emailed sign-in link's token (kept as its digest)."""
    user_id: str
    redirect_to: str
    expires: float


@dataclass
class State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    pending: dict = field(default_factory=dict)   # authorization_id -> Pending
    codes: dict = field(default_factory=dict)     # digest(code) -> Code
    refresh: dict = field(default_factory=dict)   # digest(refresh token) -> Refresh
    otps: dict = field(default_factory=dict)      # digest(link token) -> Otp
    sent: dict = field(default_factory=dict)      # email -> when it may get its next mail

    def purge(self, now):
        """Drops what has expired. Call with the lock held."""
        for table in (self.pending, self.codes, self.refresh, self.otps):
            for key in [k for k, v in table.items() if v.expires <= now]:
                del table[key]
        for key in [k for k, v in self.sent.items() if v <= now]:
            del self.sent[key]

    def drop_session(self, session_id):
        """Forgets every refresh token of a session. Call with the lock held."""
        for key in [k for k, v in self.refresh.items() if v.session_id == session_id]:
            del self.refresh[key]

    def drop_grant(self, user_id, client_id):
        """Forgets a user's refresh tokens, unused codes and pending requests for a client."""
        for key in [k for k, v in self.refresh.items() if v.user_id == user_id and v.client_id == client_id]:
            del self.refresh[key]
        for key in [k for k, v in self.codes.items() if v.user_id == user_id and v.client_id == client_id]:
            del self.codes[key]
        for key in [k for k, v in self.pending.items() if v.user_id == user_id and v.client_id == client_id]:
            del self.pending[key]


class Mailbox:
    """The development mailbox: the newest MAX_MAILS mails, in memory, in Mailpit's shapes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.mails = []   # oldest first

    def deliver(self, to, subject, text, body_html):
        now = time.time()
        created = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        mail = {"ID": secrets.token_urlsafe(16), "MessageID": f"{uuid.uuid4()}@whereabot-auth-standin",
                "From": {"Name": "Whereabot (development)", "Address": "noreply@whereabot.localhost"},
                "To": [{"Name": "", "Address": to}], "Subject": subject, "Created": created,
                "Text": text, "HTML": body_html}
        with self.lock:
            self.mails.append(mail)
            del self.mails[:-MAX_MAILS]
        return mail["ID"]

    @staticmethod
    def summary(mail):
        return {"ID": mail["ID"], "MessageID": mail["MessageID"], "Read": False, "From": mail["From"],
                "To": mail["To"], "Cc": [], "Bcc": [], "ReplyTo": [], "Subject": mail["Subject"],
                "Created": mail["Created"], "Tags": [], "Size": len(mail["Text"]) + len(mail["HTML"]),
                "Attachments": 0, "Snippet": ""}

    def messages(self, start=0, limit=50):
        with self.lock:
            newest = list(reversed(self.mails))
        page = newest[start:start + limit]
        return {"total": len(newest), "unread": len(newest), "count": len(page), "messages_count": len(newest),
                "start": start, "tags": [], "messages": [self.summary(m) for m in page]}

    def message(self, mail_id):
        with self.lock:
            mail = next((m for m in self.mails if m["ID"] == mail_id), None)
        if mail is None:
            return None
        return {**self.summary(mail), "ReturnPath": mail["From"]["Address"], "Date": mail["Created"],
                "Text": mail["Text"], "HTML": mail["HTML"], "Inline": [], "Attachments": []}

    def delete(self, ids=None):
        with self.lock:
            if ids is None:
                self.mails.clear()
            else:
                self.mails[:] = [m for m in self.mails if m["ID"] not in set(ids)]

    def newest(self):
        with self.lock:
            return list(reversed(self.mails))


# -----------------------------------------------------------------------------
# Validation helpers
# -----------------------------------------------------------------------------
def is_loopback(host):
    return host in LOOPBACK_HOSTS


def check_web_uri(uri, what, error):
    """An absolute https URI, or http on a loopback host; no fragment, no userinfo, no
    whitespace, control characters, backslashes or commas (redirect_uris are stored
    comma-separated, as Supabase Auth stores them)."""
    if not isinstance(uri, str) or not uri:
        raise oauth_error(error, f"{what} must be a non-empty string")
    if len(uri) > MAX_URI:
        raise oauth_error(error, f"{what} cannot exceed {MAX_URI} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7f for c in uri) or "\\" in uri or "," in uri:
        raise oauth_error(error, f"{what} contains characters that are not allowed")
    if "#" in uri:
        raise oauth_error(error, f"{what} must not include a fragment")
    try:
        parts = urllib.parse.urlsplit(uri)
        host = parts.hostname
        parts.port  # raises ValueError for a bad port
    except ValueError:
        raise oauth_error(error, f"{what} is not a valid URL") from None
    if parts.scheme not in ("https", "http") or not parts.netloc or not host:
        raise oauth_error(error, f"{what} must be an absolute https URL (or http on localhost)")
    if "@" in parts.netloc:
        raise oauth_error(error, f"{what} must not include userinfo")
    if parts.scheme == "http" and not is_loopback(host):
        raise oauth_error(error, f"{what}: http is only allowed for localhost, 127.0.0.1 and [::1]")
    return uri


def single(query, name):
    """A query parameter given at most once (RFC 6749 §3.1); '' when absent; None when repeated."""
    values = query.get(name, [])
    if len(values) > 1:
        return None
    return values[0] if values else ""


# -----------------------------------------------------------------------------
# The server
# -----------------------------------------------------------------------------
class StandIn:
    def __init__(self, database_url, public_url):
        self.database_url = database_url
        self.public_url = public_url.rstrip("/")
        self.issuer = self.public_url + "/auth/v1"
        self.site_url = os.environ.get("AUTH_SITE_URL", "http://127.0.0.1:8080").rstrip("/")
        consent_path = os.environ.get("STANDIN_CONSENT_PATH", "/app/oauth/consent")
        self.consent_url = self.site_url + ("" if consent_path.startswith("/") else "/") + consent_path
        site = urllib.parse.urlsplit(self.site_url)
        self.site_origin = f"{site.scheme}://{site.netloc}"
        self.jwt_secret = os.environ.get("SUPABASE_JWT_SECRET") or None
        self.code_seconds = env_int("STANDIN_CODE_SECONDS", 300)
        self.authorization_seconds = env_int("STANDIN_AUTHORIZATION_SECONDS", 600)
        self.access_seconds = env_int("STANDIN_ACCESS_SECONDS", 3600)
        self.refresh_seconds = env_int("STANDIN_REFRESH_SECONDS", 30 * 24 * 3600)
        self.audience_hook = os.environ.get("STANDIN_AUDIENCE_HOOK") == "1"
        self.otp_seconds = env_int("STANDIN_OTP_SECONDS", 3600)
        self.otp_interval = env_int("STANDIN_OTP_INTERVAL_SECONDS", 2)
        self.key = SigningKey(os.environ.get("STANDIN_KEY_FILE") or None)
        self.state = State()
        self.mailbox = Mailbox()

    def db(self):
        return psycopg.connect(self.database_url, autocommit=True, connect_timeout=5)

    # --- documents --------------------------------------------------------------
    def metadata(self):
        return {
            "issuer": self.issuer,
            "authorization_endpoint": self.issuer + "/oauth/authorize",
            "token_endpoint": self.issuer + "/oauth/token",
            "registration_endpoint": self.issuer + "/oauth/clients/register",
            "jwks_uri": self.issuer + "/.well-known/jwks.json",
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
            "scopes_supported": list(SCOPES),
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
        }

    def jwks(self):
        return {"keys": [self.key.jwk]}

    # --- clients ----------------------------------------------------------------
    def register(self, body):
        if not isinstance(body, dict):
            raise oauth_error("invalid_client_metadata", "the body must be a JSON object")
        uris = body.get("redirect_uris")
        if not isinstance(uris, list) or not uris:
            raise oauth_error("invalid_redirect_uri", "redirect_uris is required (a non-empty array)")
        if len(uris) > MAX_REDIRECT_URIS:
            raise oauth_error("invalid_redirect_uri", f"redirect_uris cannot exceed {MAX_REDIRECT_URIS} items")
        uris = [check_web_uri(u, "redirect_uri", "invalid_redirect_uri") for u in uris]
        uris = list(dict.fromkeys(uris))

        def optional_string(name, limit):
            value = body.get(name)
            if value is None:
                return None
            if not isinstance(value, str) or len(value) > limit:
                raise oauth_error("invalid_client_metadata", f"{name} must be a string of at most {limit} characters")
            return value

        name = optional_string("client_name", MAX_CLIENT_NAME)
        if name is not None and any(ord(c) < 0x20 or ord(c) == 0x7f for c in name):
            raise oauth_error("invalid_client_metadata", "client_name contains control characters")
        client_uri = optional_string("client_uri", MAX_URI)
        logo_uri = optional_string("logo_uri", MAX_URI)
        for label, value in (("client_uri", client_uri), ("logo_uri", logo_uri)):
            if value:
                check_web_uri(value, label, "invalid_client_metadata")
        method = body.get("token_endpoint_auth_method", "none")
        if method not in ("none", "client_secret_basic", "client_secret_post"):
            raise oauth_error("invalid_client_metadata",
                              "token_endpoint_auth_method must be none, client_secret_basic or client_secret_post")
        client_type = "public" if method == "none" else "confidential"
        if body.get("client_type") not in (None, client_type):
            raise oauth_error("invalid_client_metadata",
                              f"client_type must be '{client_type}' for token_endpoint_auth_method '{method}'")
        grant_types = body.get("grant_types", ["authorization_code", "refresh_token"])
        if (not isinstance(grant_types, list) or not grant_types or "authorization_code" not in grant_types
                or any(g not in ("authorization_code", "refresh_token") for g in grant_types)):
            raise oauth_error("invalid_client_metadata",
                              "grant_types must include authorization_code and may add refresh_token only")
        grant_types = list(dict.fromkeys(grant_types))
        response_types = body.get("response_types", ["code"])
        if response_types != ["code"]:
            raise oauth_error("invalid_client_metadata", "response_types must be [\"code\"]")

        client_id = uuid.uuid4()
        secret = secrets.token_urlsafe(32) if client_type == "confidential" else None
        with self.db() as conn:
            row = conn.execute(
                "insert into auth.oauth_clients (id, client_secret_hash, registration_type, redirect_uris, grant_types,"
                " client_name, client_uri, logo_uri, client_type)"
                " values (%s, %s, 'dynamic', %s, %s, %s, %s, %s, %s) returning created_at, updated_at",
                (client_id, digest(secret) if secret else None, ",".join(uris), ",".join(grant_types), name,
                 client_uri, logo_uri, client_type)).fetchone()
        response = {
            "client_id": str(client_id),
            "client_id_issued_at": int(row[0].timestamp()),
            "client_name": name or "",
            "redirect_uris": uris,
            "grant_types": grant_types,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "client_type": client_type,
            "registration_type": "dynamic",
            "created_at": row[0].isoformat(),
            "updated_at": row[1].isoformat(),
        }
        if client_uri:
            response["client_uri"] = client_uri
        if logo_uri:
            response["logo_uri"] = logo_uri
        if secret:
            response["client_secret"] = secret
            response["client_secret_expires_at"] = 0
        return response

    def client(self, conn, client_id):
        """The live client row as a dict, or None (also for a malformed id)."""
        try:
            client_id = str(uuid.UUID(client_id))
        except (ValueError, TypeError, AttributeError):
            return None
        row = conn.execute(
            "select id, client_secret_hash, redirect_uris, grant_types, client_name, client_uri, logo_uri, client_type"
            " from auth.oauth_clients where id = %s and deleted_at is null", (client_id,)).fetchone()
        if row is None:
            return None
        return {"id": str(row[0]), "secret_hash": row[1],
                "redirect_uris": [u for u in re.split(r"[,\s]+", row[2] or "") if u],
                "grant_types": [g for g in re.split(r"[,\s]+", row[3] or "") if g],
                "name": row[4] or "", "uri": row[5] or "", "logo_uri": row[6] or "", "type": row[7]}

    # --- authorize ----------------------------------------------------------------
    def authorize(self, query):
        """Returns ('page', status, text) or ('redirect', url)."""
        client_id, redirect_uri = single(query, "client_id"), single(query, "redirect_uri")
        if not client_id:
            return ("page", 400, "client_id is required and must be given once")
        if not redirect_uri:
            return ("page", 400, "redirect_uri is required and must be given once")
        with self.db() as conn:
            client = self.client(conn, client_id)
        if client is None:
            return ("page", 400, "invalid client_id")
        if redirect_uri not in client["redirect_uris"]:
            return ("page", 400, "redirect_uri is not registered for this client")
        state = single(query, "state")

        def fail(description, error="invalid_request"):
            return ("redirect", with_query(redirect_uri, error=error, error_description=description,
                                           state=state or None))

        if state is None:
            return ("redirect", with_query(redirect_uri, error="invalid_request",
                                           error_description="state must be given once"))
        if len(state) > MAX_STATE:
            return ("redirect", with_query(redirect_uri, error="invalid_request",
                                           error_description=f"state cannot exceed {MAX_STATE} characters"))
        values = {}
        for name in ("response_type", "scope", "code_challenge", "code_challenge_method", "resource", "nonce"):
            values[name] = single(query, name)
            if values[name] is None:
                return fail(f"{name} must be given at most once")
        if values["response_type"] != "code":
            return fail("response_type must be code", "unsupported_response_type" if values["response_type"] else
                        "invalid_request")
        scope = " ".join(dict.fromkeys(values["scope"].split())) or DEFAULT_SCOPE
        for s in scope.split(" "):
            if s not in SCOPES:
                return fail(f"unsupported scope: {s[:64]}", "invalid_scope")
        if not values["code_challenge"] or not values["code_challenge_method"]:
            return fail("PKCE is required: code_challenge and code_challenge_method=S256")
        if values["code_challenge_method"] != "S256":
            return fail("code_challenge_method must be S256")
        if not CHALLENGE_RE.match(values["code_challenge"]):
            return fail("code_challenge must be the 43-character BASE64URL of a SHA-256")
        resource = values["resource"]
        if resource:
            try:
                parts = urllib.parse.urlsplit(resource)
            except ValueError:
                return fail("resource must be an absolute URI", "invalid_target")
            if (len(resource) > MAX_URI or not parts.scheme or not parts.netloc or "#" in resource or parts.query
                    or any(c.isspace() for c in resource)):
                return fail("resource must be an absolute URI without query or fragment", "invalid_target")
        now = time.time()
        pending = Pending(id=str(uuid.uuid4()), client_id=client["id"], redirect_uri=redirect_uri, scope=scope,
                          state=state, resource=resource, code_challenge=values["code_challenge"],
                          expires=now + self.authorization_seconds)
        with self.state.lock:
            self.state.purge(now)
            if len(self.state.pending) >= MAX_PENDING:
                return fail("too many pending authorization requests; try again later", "temporarily_unavailable")
            self.state.pending[pending.id] = pending
        return ("redirect", f"{self.consent_url}?authorization_id={pending.id}")

    # --- the user's bearer --------------------------------------------------------
    def user_from_bearer(self, header, conn, with_session=False):
        """The signed-in user (id, email; and the session id `with_session`) behind
        `Authorization: Bearer <token>`: a token of the user's own session (not an OAuth
        client's), whose session still exists."""
        if not header:
            raise api_error(401, "no_authorization", "This endpoint requires a Bearer token")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise api_error(401, "no_authorization", "This endpoint requires a Bearer token")
        token = token.strip()
        try:
            alg = jwt.get_unverified_header(token).get("alg")
            options = {"require": ["exp", "sub", "iat"]}
            if alg == "ES256":
                claims = jwt.decode(token, self.key.private.public_key(), algorithms=["ES256"],
                                    audience="authenticated", issuer=self.issuer, options=options, leeway=5)
            elif alg == "HS256" and self.jwt_secret:
                claims = jwt.decode(token, self.jwt_secret, algorithms=["HS256"], audience="authenticated",
                                    options=options, leeway=5)
                if "iss" in claims and claims["iss"] != self.issuer:
                    raise jwt.InvalidIssuerError("issuer")
            else:
                raise jwt.InvalidAlgorithmError("algorithm not accepted")
        except jwt.PyJWTError:
            raise api_error(403, "bad_jwt", "invalid JWT: unable to parse or verify signature") from None
        if claims.get("client_id"):
            raise api_error(403, "bad_jwt", "an OAuth client's token cannot be used here; sign in as the user")
        try:
            user_id, session_id = str(uuid.UUID(str(claims["sub"]))), str(uuid.UUID(str(claims.get("session_id"))))
        except ValueError:
            raise api_error(403, "bad_jwt", "invalid claim: sub and session_id must be UUIDs") from None
        row = conn.execute(
            "select u.email from auth.sessions s join auth.users u on u.id = s.user_id"
            " where s.id = %s and s.user_id = %s and s.oauth_client_id is null and u.deleted_at is null"
            " and (u.banned_until is null or u.banned_until < now()) and (s.not_after is null or s.not_after > now())",
            (session_id, user_id)).fetchone()
        if row is None:
            raise api_error(403, "session_not_found", "Session from session_id claim in JWT does not exist")
        return (user_id, row[0] or "", session_id) if with_session else (user_id, row[0] or "")

    # --- consent API ----------------------------------------------------------------
    def pending_for(self, authorization_id, user_id, bind):
        """The pending authorization, bound to this user (the first GET binds it)."""
        with self.state.lock:
            self.state.purge(time.time())
            pending = self.state.pending.get(authorization_id)
            if pending is not None and pending.user_id is None and bind:
                pending.user_id = user_id
            if pending is None or pending.user_id != user_id:
                raise api_error(404, "oauth_authorization_not_found", "authorization not found")
            return pending

    def issue_code(self, pending):
        """Turns an approved pending authorization into a code; returns the redirect URL."""
        code = secrets.token_urlsafe(32)
        now = time.time()
        with self.state.lock:
            self.state.purge(now)
            if self.state.pending.pop(pending.id, None) is None:
                raise api_error(404, "oauth_authorization_not_found", "authorization not found")
            if len(self.state.codes) >= MAX_CODES:
                return with_query(pending.redirect_uri, error="temporarily_unavailable",
                                  error_description="too many authorization codes; try again later",
                                  state=pending.state or None)
            self.state.codes[digest(code)] = Code(
                client_id=pending.client_id, user_id=pending.user_id, redirect_uri=pending.redirect_uri,
                scope=pending.scope, resource=pending.resource, code_challenge=pending.code_challenge,
                expires=now + self.code_seconds)
        return with_query(pending.redirect_uri, code=code, state=pending.state or None)

    def authorization_details(self, authorization_id, bearer):
        with self.db() as conn:
            user_id, email = self.user_from_bearer(bearer, conn)
            pending = self.pending_for(authorization_id, user_id, bind=True)
            client = self.client(conn, pending.client_id)
            if client is None:
                raise api_error(404, "oauth_authorization_not_found", "authorization not found")
            consent = conn.execute(
                "select scopes from auth.oauth_consents where user_id = %s and client_id = %s and revoked_at is null",
                (user_id, pending.client_id)).fetchone()
        if consent is not None and set(pending.scope.split()) <= set(consent[0].split()):
            return {"redirect_url": self.issue_code(pending)}
        return {"authorization_id": pending.id, "redirect_uri": pending.redirect_uri,
                "client": {"id": client["id"], "name": client["name"], "uri": client["uri"],
                           "logo_uri": client["logo_uri"]},
                "user": {"id": user_id, "email": email}, "scope": pending.scope}

    def consent(self, authorization_id, bearer, body):
        if not isinstance(body, dict) or body.get("action") not in ("approve", "deny"):
            raise api_error(400, "validation_failed", "action must be 'approve' or 'deny'")
        with self.db() as conn:
            user_id, _ = self.user_from_bearer(bearer, conn)
            pending = self.pending_for(authorization_id, user_id, bind=False)
            if body["action"] == "deny":
                with self.state.lock:
                    self.state.pending.pop(pending.id, None)
                return {"redirect_url": with_query(pending.redirect_uri, error="access_denied",
                                                   error_description="User denied the request",
                                                   state=pending.state or None)}
            if self.client(conn, pending.client_id) is None:
                raise api_error(404, "oauth_authorization_not_found", "authorization not found")
            conn.execute(
                "insert into auth.oauth_consents (id, user_id, client_id, scopes, granted_at)"
                " values (%s, %s, %s, %s, now())"
                " on conflict (user_id, client_id) do update set scopes = excluded.scopes,"
                " granted_at = now(), revoked_at = null",
                (uuid.uuid4(), user_id, pending.client_id, pending.scope))
        return {"redirect_url": self.issue_code(pending)}

    # --- grants -------------------------------------------------------------------------
    def list_grants(self, bearer):
        with self.db() as conn:
            user_id, _ = self.user_from_bearer(bearer, conn)
            rows = conn.execute(
                "select c.id, c.client_name, c.client_uri, c.logo_uri, g.scopes, g.granted_at"
                " from auth.oauth_consents g join auth.oauth_clients c on c.id = g.client_id"
                " where g.user_id = %s and g.revoked_at is null and c.deleted_at is null"
                " order by g.granted_at, c.id", (user_id,)).fetchall()
        return [{"client": {"id": str(r[0]), "name": r[1] or "", "uri": r[2] or "", "logo_uri": r[3] or ""},
                 "scopes": r[4].split(), "granted_at": r[5].isoformat()} for r in rows]

    def revoke_grant(self, bearer, query):
        client_id = single(query, "client_id")
        if not client_id:
            raise api_error(400, "validation_failed", "client_id query parameter is required")
        try:
            client_id = str(uuid.UUID(client_id))
        except ValueError:
            raise api_error(400, "validation_failed", "invalid client_id format") from None
        with self.db() as conn:
            user_id, _ = self.user_from_bearer(bearer, conn)
            with conn.transaction():
                revoked = conn.execute(
                    "update auth.oauth_consents set revoked_at = now()"
                    " where user_id = %s and client_id = %s and revoked_at is null returning id",
                    (user_id, client_id)).fetchone()
                if revoked is None:
                    raise api_error(404, "oauth_consent_not_found", "No active grant found for this client")
                conn.execute("delete from auth.sessions where user_id = %s and oauth_client_id = %s",
                             (user_id, client_id))
            with self.state.lock:
                self.state.drop_grant(user_id, client_id)

    # --- token endpoint -------------------------------------------------------------------
    def authenticate_client(self, conn, form, authorization):
        """The client making a token request (RFC 6749 §2.3): a public client by its
        client_id alone, a confidential one by its secret (HTTP Basic or in the form)."""
        basic = None
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "basic":
                raise oauth_error("invalid_client", "only HTTP Basic client authentication is accepted", 401)
            try:
                user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                raise oauth_error("invalid_client", "malformed HTTP Basic credentials", 401,
                                  {"WWW-Authenticate": 'Basic realm="oauth"'}) from None
            if not sep:
                raise oauth_error("invalid_client", "malformed HTTP Basic credentials", 401,
                                  {"WWW-Authenticate": 'Basic realm="oauth"'})
            basic = (urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password))
        form_id, form_secret = form.get("client_id", ""), form.get("client_secret", "")
        if basic and form_secret:
            raise oauth_error("invalid_request", "use one client authentication method, not two")
        if basic and form_id and form_id != basic[0]:
            raise oauth_error("invalid_request", "client_id does not match the HTTP Basic credentials")
        client_id = basic[0] if basic else form_id
        secret = basic[1] if basic else form_secret
        if not client_id:
            raise oauth_error("invalid_client", "client_id is required", 401)
        client = self.client(conn, client_id)
        headers = {"WWW-Authenticate": 'Basic realm="oauth"'} if basic else None
        if client is None:
            raise oauth_error("invalid_client", "unknown client", 401, headers)
        if client["type"] == "public":
            if secret or basic:
                raise oauth_error("invalid_client", "a public client must not authenticate with a secret", 401, headers)
        elif not secret or not client["secret_hash"] or not hmac.compare_digest(digest(secret), client["secret_hash"]):
            raise oauth_error("invalid_client", "client authentication failed", 401, headers)
        return client

    def token(self, form, authorization, user_agent, ip):
        grant_type = form.get("grant_type", "")
        with self.db() as conn:
            if grant_type not in ("authorization_code", "refresh_token"):
                if not grant_type:
                    raise oauth_error("invalid_request", "grant_type is required")
                raise oauth_error("unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
            client = self.authenticate_client(conn, form, authorization)
            if grant_type not in client["grant_types"]:
                raise oauth_error("unauthorized_client", f"this client may not use {grant_type}")
            if grant_type == "authorization_code":
                return self.exchange_code(conn, client, form, user_agent, ip)
            return self.refresh_grant(conn, client, form)

    def revoke_session(self, conn, session_id):
        conn.execute("delete from auth.sessions where id = %s", (session_id,))
        with self.state.lock:
            self.state.drop_session(session_id)

    def exchange_code(self, conn, client, form, user_agent, ip):
        code, verifier, redirect_uri = form.get("code", ""), form.get("code_verifier", ""), form.get("redirect_uri", "")
        if not code:
            raise oauth_error("invalid_request", "code is required")
        if not verifier:
            raise oauth_error("invalid_request", "code_verifier is required (PKCE)")
        if not redirect_uri:
            raise oauth_error("invalid_request", "redirect_uri is required")
        now = time.time()
        key = digest(code)
        with self.state.lock:
            entry = self.state.codes.get(key)
            if entry is not None and entry.expires <= now:
                del self.state.codes[key]
                raise oauth_error("invalid_grant", "authorization code has expired")
            if entry is None:
                raise oauth_error("invalid_grant", "invalid authorization code")
            if entry.client_id != client["id"]:
                raise oauth_error("invalid_grant", "authorization code was not issued to this client")
            reused = entry.used
            if reused:
                entry.reused = True
            else:
                # Single use: whatever happens next, this code is spent.
                entry.used = True
        if reused:
            # RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it.
            if entry.session_id:
                self.revoke_session(conn, entry.session_id)
            raise oauth_error("invalid_grant", "authorization code has already been used")
        if redirect_uri != entry.redirect_uri:
            raise oauth_error("invalid_grant", "redirect_uri does not match the authorization request")
        if not VERIFIER_RE.match(verifier) or not hmac.compare_digest(
                b64url(hashlib.sha256(verifier.encode("ascii")).digest()), entry.code_challenge):
            raise oauth_error("invalid_grant", "PKCE verification failed")
        resource = form.get("resource", "")
        if resource and resource != entry.resource:
            raise oauth_error("invalid_target", "resource does not match the authorization request")
        user = conn.execute(
            "select u.email, u.phone, u.raw_app_meta_data, u.raw_user_meta_data, u.is_anonymous"
            " from auth.users u join auth.oauth_consents g on g.user_id = u.id"
            " where u.id = %s and g.client_id = %s and g.revoked_at is null and u.deleted_at is null"
            " and (u.banned_until is null or u.banned_until < now())", (entry.user_id, client["id"])).fetchone()
        if user is None:
            raise oauth_error("invalid_grant", "the grant is no longer valid")
        session_id = str(uuid.uuid4())
        conn.execute(
            "insert into auth.sessions (id, user_id, created_at, updated_at, aal, user_agent, ip, oauth_client_id)"
            " values (%s, %s, now(), now(), 'aal1', %s, %s, %s)",
            (session_id, entry.user_id, (user_agent or "")[:512] or None, ip, client["id"]))
        with self.state.lock:
            entry.session_id = session_id
            raced = entry.reused
        if raced:
            self.revoke_session(conn, session_id)
            raise oauth_error("invalid_grant", "authorization code has already been used")
        return self.tokens(entry.user_id, session_id, client["id"], entry.scope, entry.resource, user,
                           "oauth_provider/authorization_code")

    def refresh_grant(self, conn, client, form):
        token = form.get("refresh_token", "")
        if not token:
            raise oauth_error("invalid_request", "refresh_token is required")
        entry, user = self.rotate_refresh(conn, token, client["id"],
                                          lambda code, description: oauth_error("invalid_grant", description))
        return self.tokens(entry.user_id, entry.session_id, client["id"], entry.scope, entry.resource, user,
                           "oauth_provider/refresh_token")

    def rotate_refresh(self, conn, token, client_id, fail):
        """The one refresh-token rotation, for OAuth clients' sessions (`client_id`) and the
        users' own (None, from a sign-in link). Spends `token`; returns (its entry, the user
        row). `fail(error_code, description)` makes the refusal in the caller's shape."""
        now = time.time()
        key = digest(token)
        with self.state.lock:
            self.state.purge(now)
            entry = self.state.refresh.get(key)
            if entry is None:
                raise fail("refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found")
            if entry.client_id != client_id:
                raise fail("refresh_token_not_found", "refresh token was not issued to this client")
            reused = entry.used
            if not reused:
                # Rotation: this token is spent. Only the newest spent token of a session is
                # remembered (to detect its reuse), so the map stays at two per session.
                for old in [k for k, v in self.state.refresh.items()
                            if v.used and v.session_id == entry.session_id]:
                    del self.state.refresh[old]
                entry.used = True
        if reused:
            # A rotated-out refresh token presented again: someone else may hold it. The
            # whole session goes (RFC 9700 §4.14.2).
            self.revoke_session(conn, entry.session_id)
            raise fail("refresh_token_already_used", "Invalid Refresh Token: Already Used")
        live = (" u.deleted_at is null and (u.banned_until is null or u.banned_until < now())"
                " and (s.not_after is null or s.not_after > now())")
        if client_id is None:
            user = conn.execute(
                f"select {USER_COLUMNS} from auth.sessions s join auth.users u on u.id = s.user_id"
                " where s.id = %s and s.user_id = %s and s.oauth_client_id is null and" + live,
                (entry.session_id, entry.user_id)).fetchone()
        else:
            user = conn.execute(
                f"select {USER_COLUMNS} from auth.sessions s join auth.users u on u.id = s.user_id"
                " join auth.oauth_consents g on g.user_id = u.id and g.client_id = s.oauth_client_id"
                " where s.id = %s and s.user_id = %s and s.oauth_client_id = %s and g.revoked_at is null and" + live,
                (entry.session_id, entry.user_id, client_id)).fetchone()
        if user is None:
            with self.state.lock:
                self.state.drop_session(entry.session_id)
            raise fail("session_not_found", "the session or grant is no longer valid")
        conn.execute("update auth.sessions set refreshed_at = now(), updated_at = now() where id = %s",
                     (entry.session_id,))
        return entry, user

    def tokens(self, user_id, session_id, client_id, scope, resource, user, method):
        """An access token and a refresh token for a session: an OAuth client's (`client_id`,
        `scope`) or, with client_id None, the user's own (no client_id or scope claim)."""
        now = int(time.time())
        email, phone, app_meta, user_meta, anonymous = user[:5]
        aud = ["authenticated", resource] if self.audience_hook and resource else "authenticated"
        claims = {"iss": self.issuer, "sub": user_id, "aud": aud, "exp": now + self.access_seconds, "iat": now,
                  "email": email or "", "phone": phone or "", "app_metadata": app_meta or {},
                  "user_metadata": user_meta or {}, "role": "authenticated", "aal": "aal1",
                  "amr": [{"method": method, "timestamp": now}], "session_id": session_id,
                  "is_anonymous": bool(anonymous)}
        if client_id is not None:
            claims["client_id"], claims["scope"] = client_id, scope
        refresh = secrets.token_urlsafe(32)
        with self.state.lock:
            self.state.purge(now)
            if len(self.state.refresh) >= MAX_REFRESH:
                if client_id is None:
                    raise api_error(503, "over_request_rate_limit", "too many refresh tokens; try again later")
                raise oauth_error("temporarily_unavailable", "too many refresh tokens; try again later", 503)
            self.state.refresh[digest(refresh)] = Refresh(
                session_id=session_id, user_id=user_id, client_id=client_id, scope=scope, resource=resource,
                expires=now + self.refresh_seconds)
        answer = {"access_token": self.key.sign(claims), "token_type": "bearer", "expires_in": self.access_seconds,
                  "refresh_token": refresh}
        if client_id is not None:
            answer["scope"] = scope
        else:
            answer["expires_at"] = claims["exp"]
        return answer

    # --- sign-in by magic link (the users' own sessions) --------------------------------
    def allowed_redirect(self, url):
        """`url` when it may receive a sign-in (same origin as AUTH_SITE_URL), else the site:
        as Supabase Auth falls back to SITE_URL for a redirect_to not on its allow-list."""
        if not url or not isinstance(url, str) or len(url) > MAX_URI or "#" in url or "\\" in url:
            return self.site_url
        if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7f for c in url):
            return self.site_url
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port
        except ValueError:
            return self.site_url
        if f"{parts.scheme.lower()}://{parts.netloc.lower()}" != self.site_origin.lower() or "@" in parts.netloc:
            return self.site_url
        return url

    def link_user(self, email, create_user, data):
        """The user a link for `email` signs in: found, or created (`create_user`)."""
        with self.db() as conn:
            find = ("select id, deleted_at is not null or coalesce(banned_until > now(), false)"
                    " from auth.users where lower(email) = %s and is_sso_user = false order by created_at limit 1")
            row = conn.execute(find, (email,)).fetchone()
            if row is None:
                if not create_user:
                    raise api_error(422, "otp_disabled", "Signups not allowed for otp")
                conn.execute(
                    "insert into auth.users (instance_id, id, aud, role, email, raw_app_meta_data, raw_user_meta_data,"
                    " created_at, updated_at, is_sso_user, is_anonymous)"
                    " values ('00000000-0000-0000-0000-000000000000', %s, 'authenticated', 'authenticated', %s, %s,"
                    " %s, now(), now(), false, false) on conflict do nothing",
                    (uuid.uuid4(), email, json.dumps({"provider": "email", "providers": ["email"]}),
                     json.dumps(data or {})))
                row = conn.execute(find, (email,)).fetchone()
            if row is None or row[1]:
                raise api_error(403, "user_banned", "User is banned")
            conn.execute("update auth.users set recovery_sent_at = now() where id = %s", (row[0],))
        return str(row[0])

    def send_magic_link(self, query, body):
        """POST /otp: a one-time sign-in link, mailed to the development mailbox. 200 {}."""
        if not isinstance(body, dict):
            raise api_error(400, "validation_failed", "the body must be a JSON object")
        if body.get("phone"):
            raise api_error(400, "validation_failed", "phone sign-in is not supported by the stand-in")
        if body.get("code_challenge") or body.get("code_challenge_method"):
            raise api_error(400, "validation_failed",
                            "the PKCE flow is not supported by the stand-in; use the implicit flow")
        email = body.get("email")
        if not isinstance(email, str) or not email.strip():
            raise api_error(400, "validation_failed", "An email address is required")
        email = email.strip().lower()
        if len(email) > MAX_EMAIL:
            raise api_error(400, "validation_failed", "An email address is too long")
        if not EMAIL_RE.match(email):
            raise api_error(400, "validation_failed", "Unable to validate email address: invalid format")
        create_user = body.get("create_user", True)
        data = body.get("data")
        if not isinstance(create_user, bool) or (data is not None and not isinstance(data, dict)):
            raise api_error(400, "validation_failed", "create_user must be a boolean and data an object")
        redirect = single(query, "redirect_to")
        if redirect is None:
            raise api_error(400, "validation_failed", "redirect_to must be given once")
        if not redirect and isinstance(body.get("redirect_to"), str):
            redirect = body["redirect_to"]
        redirect = self.allowed_redirect(redirect)
        now = time.time()
        with self.state.lock:
            self.state.purge(now)
            if email in self.state.sent:
                wait = max(1, int(self.state.sent[email] - now + 0.999))
                raise api_error(429, "over_email_send_rate_limit",
                                f"For security purposes, you can only request this after {wait} seconds.")
            if len(self.state.sent) >= MAX_OTPS:
                raise api_error(429, "over_email_send_rate_limit", "Email rate limit exceeded")
            if self.otp_interval > 0:
                self.state.sent[email] = now + self.otp_interval
        try:
            user_id = self.link_user(email, create_user, data)
        except BaseException:
            with self.state.lock:   # a refused request does not hold the address up
                self.state.sent.pop(email, None)
            raise
        token = secrets.token_urlsafe(32)
        with self.state.lock:
            # As Supabase Auth keeps one link per user and kind: a new link replaces the last.
            for key in [k for k, v in self.state.otps.items() if v.user_id == user_id]:
                del self.state.otps[key]
            if len(self.state.otps) >= MAX_OTPS:
                raise api_error(429, "over_email_send_rate_limit", "too many sign-in links pending; try again later")
            self.state.otps[digest(token)] = Otp(user_id=user_id, redirect_to=redirect,
                                                 expires=now + self.otp_seconds)
        link = self.issuer + "/verify?" + urllib.parse.urlencode(
            {"token": token, "type": "magiclink", "redirect_to": redirect})
        text = ("Magic Link\n\nFollow this link to login:\n\n" + link + "\n\n"
                "(Whereabot's local development stand-in for Supabase Auth; the link works once,"
                f" for {self.otp_seconds} seconds.)\n")
        body_html = ("<h2>Magic Link</h2>\n<p>Follow this link to login:</p>\n<p><a href=\"" + html.escape(link) +
                     "\">Log In</a></p>\n")
        self.mailbox.deliver(email, "Your Magic Link", text, body_html)
        return {}

    def verify_link(self, query, user_agent, ip):
        """GET /verify: spends a link's token and returns the URL to 303 to: the page that
        asked, with the session in the fragment (implicit flow) or Supabase's error."""
        token, kind = single(query, "token"), single(query, "type")
        if kind != "magiclink":
            raise api_error(400, "validation_failed", "Verify requires a verification type (magiclink)")
        if not token:
            raise api_error(400, "validation_failed", "Verify requires a token")
        now = time.time()
        with self.state.lock:
            self.state.purge(now)
            entry = self.state.otps.pop(digest(token), None)   # single use
        if entry is None:
            asked = single(query, "redirect_to")
            return self.allowed_redirect(asked) + "#" + urllib.parse.urlencode(OTP_EXPIRED)
        with self.db() as conn:
            user = conn.execute(
                "update auth.users u set email_confirmed_at = coalesce(u.email_confirmed_at, now()),"
                " last_sign_in_at = now(), updated_at = now()"
                " where u.id = %s and u.deleted_at is null and (u.banned_until is null or u.banned_until < now())"
                f" returning {USER_COLUMNS}", (entry.user_id,)).fetchone()
            if user is None:
                return entry.redirect_to + "#" + urllib.parse.urlencode(OTP_EXPIRED)
            session_id = str(uuid.uuid4())
            conn.execute(
                "insert into auth.sessions (id, user_id, created_at, updated_at, aal, user_agent, ip)"
                " values (%s, %s, now(), now(), 'aal1', %s, %s)",
                (session_id, entry.user_id, (user_agent or "")[:512] or None, ip))
        answer = self.tokens(entry.user_id, session_id, None, None, None, user, "otp")
        fragment = urllib.parse.urlencode({
            "access_token": answer["access_token"], "expires_at": answer["expires_at"],
            "expires_in": answer["expires_in"], "refresh_token": answer["refresh_token"],
            "token_type": "bearer", "type": "magiclink"})
        return entry.redirect_to + "#" + fragment

    @staticmethod
    def user_json(user):
        email, phone, app_meta, user_meta, anonymous, user_id, aud, role, confirmed, created, updated, last = user
        stamp = lambda t: t.isoformat() if t else None  # noqa: E731
        return {"id": str(user_id), "aud": aud or "authenticated", "role": role or "authenticated",
                "email": email or "", "email_confirmed_at": stamp(confirmed), "phone": phone or "",
                "confirmed_at": stamp(confirmed), "last_sign_in_at": stamp(last),
                "app_metadata": app_meta or {}, "user_metadata": user_meta or {}, "is_anonymous": bool(anonymous),
                "created_at": stamp(created), "updated_at": stamp(updated)}

    def user_token_grant(self, query, body):
        """POST /token?grant_type=refresh_token with JSON {refresh_token}: Supabase Auth's
        own refresh (what auth-js and the browser phone send), for sessions from a link."""
        grant_type = single(query, "grant_type")
        if grant_type != "refresh_token":
            raise grant_error("validation_failed", "grant_type must be refresh_token (the stand-in signs in by"
                                                   " magic link only)", "unsupported_grant_type")
        token = body.get("refresh_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise grant_error("validation_failed", "refresh_token is required", "invalid_request")
        with self.db() as conn:
            entry, user = self.rotate_refresh(conn, token, None, grant_error)
        # As Supabase Auth, a refreshed token keeps the session's sign-in method in `amr`.
        answer = self.tokens(entry.user_id, entry.session_id, None, None, None, user, "otp")
        answer["user"] = self.user_json(user)
        return answer

    def logout(self, bearer, query):
        """POST /logout: ends the bearer's session (scope local, the default here), or all
        the user's own sessions (global), or all but this one (others). Never OAuth
        clients' sessions: those end when their grant is revoked."""
        scope = single(query, "scope") or "local"
        if scope not in ("local", "global", "others"):
            raise api_error(400, "validation_failed", "scope must be local, global or others")
        with self.db() as conn:
            user_id, _, session_id = self.user_from_bearer(bearer, conn, with_session=True)
            if scope == "local":
                gone = [session_id]
            else:
                gone = [str(r[0]) for r in conn.execute(
                    "select id from auth.sessions where user_id = %s and oauth_client_id is null"
                    " and (%s or id <> %s)", (user_id, scope == "global", session_id)).fetchall()]
            for sid in gone:
                self.revoke_session(conn, sid)


def with_query(url, **params):
    """`url` with `params` (None values left out) added to its query."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, v) for k, v in params.items() if v is not None]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


# -----------------------------------------------------------------------------
# HTTP
# -----------------------------------------------------------------------------
AUTHZ_RE = re.compile(r"^/auth/v1/oauth/authorizations/([^/]{1,64})$")
CONSENT_RE = re.compile(r"^/auth/v1/oauth/authorizations/([^/]{1,64})/consent$")
PUBLIC_PATHS = {
    "/.well-known/oauth-authorization-server/auth/v1": "metadata",
    "/auth/v1/.well-known/oauth-authorization-server": "metadata",
    "/auth/v1/.well-known/jwks.json": "jwks",
    "/auth/v1/oauth/clients/register": "register",
    "/auth/v1/oauth/authorize": "authorize",
    "/auth/v1/oauth/token": "token",
    "/auth/v1/user/oauth/grants": "grants",
    "/auth/v1/otp": "otp",
    "/auth/v1/verify": "verify",
    "/auth/v1/token": "user_token",
    "/auth/v1/logout": "logout",
}
METHODS = {"metadata": ("GET",), "jwks": ("GET",), "register": ("POST",), "authorize": ("GET",),
           "token": ("POST",), "grants": ("GET", "DELETE"), "details": ("GET",), "consent": ("POST",),
           "otp": ("POST",), "verify": ("GET",), "user_token": ("POST",), "logout": ("POST",)}


class Handler(BaseHTTPRequestHandler):
    server_version = "whereabot-auth-standin"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 15
    standin: StandIn = None
    route_label = "-"

    # Log the route only: never a query string, a code, a token or an authorization id.
    def log_request(self, code="-", size="-"):
        sys.stderr.write(f"standin: {self.command} {self.route_label} {code}\n")

    def log_message(self, format, *args):
        pass

    def send(self, status, body=None, headers=None, content_type="application/json"):
        data = b""
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", content_type if content_type != "application/json"
                             else "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Pragma", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Expose-Headers", "Content-Length, Content-Type, X-Supabase-Api-Version")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def page(self, status, message):
        text = ("<!doctype html><meta charset=utf-8><title>Authorization error</title>"
                "<h1>Authorization error</h1><p>" + html.escape(message) + "</p>"
                "<p>(Whereabot's local development stand-in for Supabase Auth)</p>")
        self.send(status, text.encode(), {"Content-Security-Policy": "default-src 'none'"}, "text/html; charset=utf-8")

    def read_body(self):
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise Refusal(411, {"error": "invalid_request", "error_description": "send Content-Length, not chunks"})
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        if not length.isdigit():
            raise Refusal(400, {"error": "invalid_request", "error_description": "bad Content-Length"})
        length = int(length)
        self.body_read = True
        if length > MAX_BODY:
            self.close_connection = True
            raise Refusal(413, {"error": "invalid_request", "error_description": f"the body exceeds {MAX_BODY} bytes"})
        return self.rfile.read(length)

    def json_body(self, error):
        body = self.read_body()
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise error("the body must be application/json")
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise error("the body is not valid JSON") from None

    def form_body(self):
        body = self.read_body()
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            raise oauth_error("invalid_request", "the body must be application/x-www-form-urlencoded")
        try:
            pairs = urllib.parse.parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=bool(body),
                                           max_num_fields=32)
        except (UnicodeDecodeError, ValueError):
            raise oauth_error("invalid_request", "the body is not a valid form") from None
        form = {}
        for name, value in pairs:
            if name in form:
                raise oauth_error("invalid_request", f"{name[:64]} must be given once")
            form[name] = value
        return form

    def check_origin(self):
        """As Supabase Auth: the consent API answers only the site's own pages (or no Origin)."""
        origin = self.headers.get("Origin")
        if origin and origin.rstrip("/") != self.standin.site_origin:
            raise api_error(400, "validation_failed", "unauthorized request origin")

    def do_OPTIONS(self):
        self.route_label = urllib.parse.urlsplit(self.path).path[:80]
        self.send(204, None, {"Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS",
                              "Access-Control-Allow-Headers": "authorization, content-type, apikey, x-client-info,"
                                                              " x-supabase-api-version",
                              "Access-Control-Max-Age": "600"})

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def dispatch(self):
        self.body_read = False
        try:
            self.route()
        finally:
            # A body this request did not read would be taken for the next request.
            if self.headers.get("Transfer-Encoding") or (
                    not self.body_read and self.headers.get("Content-Length", "0") != "0"):
                self.close_connection = True

    def route(self):
        standin = self.standin
        try:
            parts = urllib.parse.urlsplit(self.path)
        except ValueError:
            return self.send(400, {"error": "invalid_request", "error_description": "bad request target"})
        path, authorization_id = parts.path, None
        route = PUBLIC_PATHS.get(path)
        if route is None and (m := CONSENT_RE.match(path)):
            route, authorization_id = "consent", m.group(1)
        elif route is None and (m := AUTHZ_RE.match(path)):
            route, authorization_id = "details", m.group(1)
        self.route_label = {"details": "/auth/v1/oauth/authorizations/{id}",
                            "consent": "/auth/v1/oauth/authorizations/{id}/consent"}.get(route, path if route else "?")
        if route is None:
            return self.send(404, {"code": 404, "error_code": "not_found", "msg": "no such endpoint"})
        if self.command not in METHODS[route]:
            return self.send(405, {"code": 405, "error_code": "method_not_allowed", "msg": "method not allowed"},
                             {"Allow": ", ".join(METHODS[route] + ("OPTIONS",))})
        try:
            query = urllib.parse.parse_qs(parts.query, keep_blank_values=True, max_num_fields=32)
        except ValueError:
            return self.send(400, {"error": "invalid_request", "error_description": "too many query parameters"})
        bearer = self.headers.get("Authorization")
        try:
            if route == "metadata":
                return self.send(200, standin.metadata())
            if route == "jwks":
                return self.send(200, standin.jwks())
            if route == "register":
                body = self.json_body(lambda d: oauth_error("invalid_client_metadata", d))
                return self.send(201, standin.register(body))
            if route == "authorize":
                result = standin.authorize(query)
                if result[0] == "page":
                    return self.page(result[1], result[2])
                return self.send(302, None, {"Location": result[1]})
            if route == "token":
                form = self.form_body()
                return self.send(200, standin.token(form, bearer, self.headers.get("User-Agent"),
                                                    self.client_address[0]))
            # Sign-in by magic link: Supabase Auth's own endpoints, its error shape.
            if route == "otp":
                body = self.json_body(lambda d: api_error(400, "bad_json", d))
                return self.send(200, standin.send_magic_link(query, body))
            if route == "verify":
                location = standin.verify_link(query, self.headers.get("User-Agent"), self.client_address[0])
                return self.send(303, None, {"Location": location, "Referrer-Policy": "no-referrer"})
            if route == "user_token":
                body = self.json_body(lambda d: grant_error("bad_json", d, "invalid_request"))
                return self.send(200, standin.user_token_grant(query, body))
            if route == "logout":
                standin.logout(bearer, query)
                return self.send(204)
            self.check_origin()
            if route == "details":
                return self.send(200, standin.authorization_details(authorization_id, bearer))
            if route == "consent":
                body = self.json_body(lambda d: api_error(400, "bad_json", d))
                return self.send(200, standin.consent(authorization_id, bearer, body))
            if self.command == "GET":
                return self.send(200, standin.list_grants(bearer))
            standin.revoke_grant(bearer, query)
            return self.send(204)
        except Refusal as refusal:
            return self.send(refusal.status, refusal.body, refusal.headers)
        except psycopg.Error as error:
            sys.stderr.write(f"standin: database error on {self.route_label}: {type(error).__name__}\n")
            return self.send(500, {"error": "server_error", "error_description": "database error"})


class Server(ThreadingHTTPServer):
    """At most MAX_CONNECTIONS connections at once; more are closed at once."""
    daemon_threads = True
    request_queue_size = 128
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class MailboxServer(Server):
    slots = threading.BoundedSemaphore(MAX_MAILBOX_CONNECTIONS)


MESSAGE_RE = re.compile(r"^/api/v1/message/([A-Za-z0-9_-]{1,64})$")


class MailboxHandler(BaseHTTPRequestHandler):
    """The development mailbox, with Mailpit's API shape: GET /api/v1/messages (newest
    first; `start`, `limit`), GET /api/v1/message/{ID}, DELETE /api/v1/messages (all, or
    `{"IDs": [...]}`), and a page at / to read them. No CORS, and only a loopback Host
    (DNS rebinding): no other web page may read the links."""
    server_version = "whereabot-auth-standin-mailbox"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 15
    mailbox: Mailbox = None
    route_label = "-"

    def log_request(self, code="-", size="-"):
        sys.stderr.write(f"mailbox: {self.command} {self.route_label} {code}\n")

    def log_message(self, format, *args):
        pass

    def send(self, status, body, content_type="application/json; charset=utf-8", headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        self.handle_mailbox()

    def do_DELETE(self):
        self.handle_mailbox()

    def do_POST(self):
        self.handle_mailbox()

    def handle_mailbox(self):
        length = self.headers.get("Content-Length", "0")
        if self.headers.get("Transfer-Encoding") or not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            self.route_label = "?"
            return self.send(400, {"error": "bad body"})
        raw = self.rfile.read(int(length)) if int(length) else b""
        parts = urllib.parse.urlsplit(self.path)
        match = MESSAGE_RE.match(parts.path)
        self.route_label = "/api/v1/message/{id}" if match else parts.path[:80]
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        if host not in ("127.0.0.1", "localhost", "[::1]"):
            return self.send(403, {"error": "the mailbox answers loopback hosts only"})
        if parts.path == "/api/v1/messages" and self.command == "GET":
            try:
                query = urllib.parse.parse_qs(parts.query, max_num_fields=32)
                start = int(query.get("start", ["0"])[0])
                limit = int(query.get("limit", ["50"])[0])
            except ValueError:
                return self.send(400, {"error": "start and limit must be integers"})
            return self.send(200, self.mailbox.messages(max(start, 0), min(max(limit, 0), MAX_MAILS) or 50))
        if parts.path == "/api/v1/messages" and self.command == "DELETE":
            ids = None
            if raw.strip():
                try:
                    body = json.loads(raw)
                    ids = body.get("IDs") or body.get("ids") or None
                    if ids is not None and not all(isinstance(i, str) for i in ids):
                        raise ValueError
                except (ValueError, AttributeError, TypeError, RecursionError):
                    return self.send(400, {"error": "the body must be {\"IDs\": [...]}"})
            self.mailbox.delete(ids)
            return self.send(200, b"ok", "text/plain; charset=utf-8")
        if match and self.command == "GET":
            mail = self.mailbox.message(match.group(1))
            if mail is None:
                return self.send(404, b"message not found", "text/plain; charset=utf-8")
            return self.send(200, mail)
        if parts.path == "/" and self.command == "GET":
            items = "".join(
                "<article><p><b>" + html.escape(m["Subject"]) + "</b> to " + html.escape(m["To"][0]["Address"]) +
                " <small>" + html.escape(m["Created"]) + "</small></p>" + m["HTML"] + "</article><hr>"
                for m in self.mailbox.newest())
            page = ("<!doctype html><meta charset=utf-8><title>Development mailbox</title>"
                    "<h1>Development mailbox</h1><p>The auth stand-in's mails, newest first (not a real mail"
                    " server; reload to see new ones).</p><hr>" + (items or "<p>No mail yet.</p>"))
            return self.send(200, page.encode(), "text/html; charset=utf-8",
                             {"Content-Security-Policy": "default-src 'none'", "Referrer-Policy": "no-referrer"})
        return self.send(404, b"not found", "text/plain; charset=utf-8")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Local development stand-in for Supabase Auth's OAuth 2.1 server."
                                                 " Production never uses it.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("STANDIN_PORT", "54321")))
    parser.add_argument("--database-url", default=os.environ.get("STANDIN_DATABASE_URL"))
    parser.add_argument("--mailbox-port", type=int, default=int(os.environ.get("STANDIN_MAILBOX_PORT", "54324")),
                        help="the development mailbox's port on 127.0.0.1 (0: a free port)")
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("--database-url (or STANDIN_DATABASE_URL) is required")
    httpd = Server((args.host, args.port), Handler)
    try:
        mailbox_httpd = MailboxServer(("127.0.0.1", args.mailbox_port), MailboxHandler)
    except OSError as error:
        httpd.server_close()
        raise SystemExit(f"standin: cannot open the mailbox on 127.0.0.1:{args.mailbox_port}: {error.strerror}"
                         " (is Mailpit or another stand-in running? --mailbox-port 0 picks a free port)")
    host, port = httpd.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    public_url = os.environ.get("STANDIN_PUBLIC_URL") or f"http://{shown}:{port}"
    Handler.standin = StandIn(args.database_url, public_url)
    MailboxHandler.mailbox = Handler.standin.mailbox
    threading.Thread(target=mailbox_httpd.serve_forever, name="mailbox", daemon=True).start()
    print(f"listening on http://{shown}:{port}", flush=True)
    print(f"mailbox on http://127.0.0.1:{mailbox_httpd.server_address[1]}", flush=True)
    sys.stderr.write("standin: DEVELOPMENT STAND-IN for Supabase Auth's OAuth 2.1 server; never use in production\n")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        mailbox_httpd.server_close()


if __name__ == "__main__":
    main()
