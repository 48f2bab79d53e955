# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""The token endpoint (code exchange with PKCE, refresh rotation), the access tokens it
signs (ES256) and the signing key behind the JWKS."""
import base64
import hashlib
import hmac
import json
import os
import secrets
import time
import urllib.parse

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from common import USER_COLUMNS, VERIFIER_RE, api_error, b64url, digest, grant_error, oauth_error


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


class Tokens:
    """The token endpoint and the tokens it issues (a mixin of server.StandIn)."""

    def jwks(self):
        return {"keys": [self.key.jwk]}

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
        # Its refresh tokens go with it (auth.refresh_tokens.session_id: on delete cascade).
        conn.execute("delete from auth.sessions where id = %s", (session_id,))

    def exchange_code(self, conn, client, form, user_agent, ip):
        code, verifier, redirect_uri = form.get("code", ""), form.get("code_verifier", ""), form.get("redirect_uri", "")
        if not code:
            raise oauth_error("invalid_request", "code is required")
        if not verifier:
            raise oauth_error("invalid_request", "code_verifier is required (PKCE)")
        if not redirect_uri:
            raise oauth_error("invalid_request", "redirect_uri is required")
        # One transaction holds the code's row from the first look to the new session: a
        # second exchange of the same code waits, then finds it spent (and its session made).
        with conn.transaction():
            entry = self.store.claim_code(conn, digest(code))
            if entry is not None and entry.expired:
                raise oauth_error("invalid_grant", "authorization code has expired")
            if entry is None:
                raise oauth_error("invalid_grant", "invalid authorization code")
            if entry.client_id != client["id"]:
                raise oauth_error("invalid_grant", "authorization code was not issued to this client")
            if entry.spent:
                # RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it (the
                # session it was exchanged for has the authorization's id).
                self.revoke_session(conn, entry.key)
                error, user = oauth_error("invalid_grant", "authorization code has already been used"), None
            else:
                # Single use: whatever happens next, this code is spent.
                self.store.spend_code(conn, entry)
                error, user = self.redeem(conn, client, entry, form, user_agent, ip)
        if error is not None:
            raise error
        return self.tokens(conn, entry.user_id, entry.key, client["id"], entry.scope, entry.resource, user,
                           "oauth_provider/authorization_code")

    def redeem(self, conn, client, entry, form, user_agent, ip):
        """Checks a code's exchange against its request and makes the session (its id the
        authorization's): (None, the user row), or (the refusal, None)."""
        verifier = form["code_verifier"]
        if form["redirect_uri"] != entry.redirect_uri:
            return oauth_error("invalid_grant", "redirect_uri does not match the authorization request"), None
        if not VERIFIER_RE.match(verifier) or not hmac.compare_digest(
                b64url(hashlib.sha256(verifier.encode("ascii")).digest()), entry.code_challenge):
            return oauth_error("invalid_grant", "PKCE verification failed"), None
        resource = form.get("resource", "")
        if resource and resource != entry.resource:
            return oauth_error("invalid_target", "resource does not match the authorization request"), None
        user = conn.execute(
            "select u.email, u.phone, u.raw_app_meta_data, u.raw_user_meta_data, u.is_anonymous"
            " from auth.users u join auth.oauth_consents g on g.user_id = u.id"
            " where u.id = %s and g.client_id = %s and g.revoked_at is null and u.deleted_at is null"
            " and (u.banned_until is null or u.banned_until < now())", (entry.user_id, client["id"])).fetchone()
        if user is None:
            return oauth_error("invalid_grant", "the grant is no longer valid"), None
        conn.execute(
            "insert into auth.sessions (id, user_id, created_at, updated_at, aal, user_agent, ip, oauth_client_id,"
            " scopes) values (%s, %s, now(), now(), 'aal1', %s, %s, %s, %s)",
            (entry.key, entry.user_id, (user_agent or "")[:512] or None, ip, client["id"], entry.scope))
        return None, user

    def refresh_grant(self, conn, client, form):
        token = form.get("refresh_token", "")
        if not token:
            raise oauth_error("invalid_request", "refresh_token is required")
        entry, user = self.rotate_refresh(conn, token, client["id"],
                                          lambda code, description: oauth_error("invalid_grant", description))
        return self.tokens(conn, entry.user_id, entry.session_id, client["id"], entry.scope, entry.resource, user,
                           "oauth_provider/refresh_token", parent=entry.token)

    def rotate_refresh(self, conn, token, client_id, fail):
        """The one refresh-token rotation, for OAuth clients' sessions (`client_id`) and the
        users' own (None, from a sign-in link). Spends `token`; returns (its entry, the user
        row). `fail(error_code, description)` makes the refusal in the caller's shape."""
        with conn.transaction():   # holds the token's row: the same token twice at once is a reuse
            entry = self.store.claim_refresh(conn, digest(token))
            if entry is None:
                raise fail("refresh_token_not_found", "Invalid Refresh Token: Refresh Token Not Found")
            if entry.client_id != client_id:
                raise fail("refresh_token_not_found", "refresh token was not issued to this client")
            if entry.revoked:
                # A rotated-out refresh token presented again: someone else may hold it. The
                # whole session goes (RFC 9700 §4.14.2).
                self.revoke_session(conn, entry.session_id)
            else:
                self.store.spend_refresh(conn, entry)
        if entry.revoked:
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
            self.store.drop_refresh(conn, entry.session_id)
            raise fail("session_not_found", "the session or grant is no longer valid")
        conn.execute("update auth.sessions set refreshed_at = now(), updated_at = now() where id = %s",
                     (entry.session_id,))
        return entry, user

    def tokens(self, conn, user_id, session_id, client_id, scope, resource, user, method, parent=None):
        """An access token and a refresh token for a session: an OAuth client's (`client_id`,
        `scope`) or, with client_id None, the user's own (no client_id or scope claim).
        `parent`: the digest of the refresh token this one replaces."""
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
        stored = self.store.add_refresh(conn, digest(refresh), user_id, session_id, parent)
        if stored is False:
            if client_id is None:
                raise api_error(503, "over_request_rate_limit", "too many refresh tokens; try again later")
            raise oauth_error("temporarily_unavailable", "too many refresh tokens; try again later", 503)
        if stored is None:   # the session was revoked meanwhile (a reused code or token)
            if client_id is None:
                raise grant_error("session_not_found", "the session is no longer valid")
            raise oauth_error("invalid_grant", "the session is no longer valid")
        answer = {"access_token": self.key.sign(claims), "token_type": "bearer", "expires_in": self.access_seconds,
                  "refresh_token": refresh}
        if client_id is not None:
            answer["scope"] = scope
        else:
            answer["expires_at"] = claims["exp"]
        return answer
