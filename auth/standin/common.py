# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""What every part of the auth stand-in shares: its bounds, error shapes and small
validation helpers."""
import base64
import hashlib
import os
import re
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler

MAX_BODY = 64 * 1024
MAX_CONNECTIONS = 64        # connections served at once (each has a thread)
# The caps on what is kept (storage.py): counted in the database for the first three.
MAX_PENDING = 1000          # pending authorization requests (before consent)
MAX_CODES = 1000            # authorization codes, issued or used-and-remembered
MAX_REFRESH = 10000         # refresh tokens (live and rotated-out, for reuse detection)
MAX_OTPS = 1000             # unused sign-in links (in memory)
MAX_MAILS = 200             # mails the development mailbox keeps (the newest)
MAX_MAILBOX_CONNECTIONS = 16
MAX_EMAIL = 255             # GoTrue's limit on an email address
MAX_CLIENT_NAME = 1024
MAX_REDIRECT_URIS = 10
MAX_URI = 2048
MAX_STATE = 2048
SCOPES = ("openid", "email", "profile", "phone", "offline_access")  # offline_access: accepted and ignored (auth#2630)
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


def with_query(url, **params):
    """`url` with `params` (None values left out) added to its query."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query += [(k, v) for k, v in params.items() if v is not None]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


class RouteLoggingHandler(BaseHTTPRequestHandler):
    """What the stand-in's two servers share: HTTP/1.1 keep-alive with a 15-s idle limit, no
    version in the Server header, and one log line per request naming the route only
    (`log_prefix: METHOD route status`): never a query string, a code, a token or an id."""
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = 15
    route_label = "-"
    log_prefix = "-"

    def log_request(self, code="-", size="-"):
        sys.stderr.write(f"{self.log_prefix}: {self.command} {self.route_label} {code}\n")

    def log_message(self, format, *args):
        pass

