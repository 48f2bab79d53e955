# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""The authorization endpoint, the consent API the consent page calls, and the user's
grants (list, revoke)."""
import secrets
import urllib.parse
import uuid

import jwt

from common import CHALLENGE_RE, DEFAULT_SCOPE, MAX_STATE, MAX_URI, SCOPES, api_error, digest, single, with_query


class Authorization:
    """Authorize, consent and grants (a mixin of server.StandIn)."""

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
        if "\x00" in state:   # PostgreSQL text cannot hold it (the request is stored)
            return ("redirect", with_query(redirect_uri, error="invalid_request",
                                           error_description="state contains characters that are not allowed"))
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
                    or any(c.isspace() or c == "\x00" for c in resource)):
                return fail("resource must be an absolute URI without query or fragment", "invalid_target")
        with self.db() as conn:
            authorization_id = self.store.add_pending(conn, client["id"], redirect_uri, scope, state, resource,
                                                      values["code_challenge"])
        if authorization_id is None:
            return fail("too many pending authorization requests; try again later", "temporarily_unavailable")
        return ("redirect", f"{self.consent_url}?authorization_id={authorization_id}")

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
    def pending_for(self, conn, authorization_id, user_id, bind):
        """The pending authorization, bound to this user (the first GET binds it)."""
        try:
            uuid.UUID(authorization_id)   # what authorize hands out; anything else is unknown
        except ValueError:
            raise api_error(404, "oauth_authorization_not_found", "authorization not found") from None
        pending = self.store.pending(conn, authorization_id, user_id, bind)
        if pending is None:
            raise api_error(404, "oauth_authorization_not_found", "authorization not found")
        return pending

    def issue_code(self, conn, pending):
        """Turns an approved pending authorization into a code; returns the redirect URL."""
        code = secrets.token_urlsafe(32)
        approved = self.store.approve(conn, pending, digest(code))
        if approved is None:
            raise api_error(404, "oauth_authorization_not_found", "authorization not found")
        if not approved:
            return with_query(pending.redirect_uri, error="temporarily_unavailable",
                              error_description="too many authorization codes; try again later",
                              state=pending.state or None)
        return with_query(pending.redirect_uri, code=code, state=pending.state or None)

    def authorization_details(self, authorization_id, bearer):
        with self.db() as conn:
            user_id, email = self.user_from_bearer(bearer, conn)
            pending = self.pending_for(conn, authorization_id, user_id, bind=True)
            client = self.client(conn, pending.client_id)
            if client is None:
                raise api_error(404, "oauth_authorization_not_found", "authorization not found")
            if self.issue_2820 and (pending.resource or "offline_access" in pending.scope.split()
                                    or client["type"] == "public"):
                raise api_error(400, "validation_failed", "authorization request cannot be processed")
            consent = conn.execute(
                "select scopes from auth.oauth_consents where user_id = %s and client_id = %s and revoked_at is null",
                (user_id, pending.client_id)).fetchone()
            if consent is not None and set(pending.scope.split()) <= set(consent[0].split()):
                return {"redirect_url": self.issue_code(conn, pending)}
        return {"authorization_id": pending.id, "redirect_uri": pending.redirect_uri,
                "client": {"id": client["id"], "name": client["name"], "uri": client["uri"],
                           "logo_uri": client["logo_uri"]},
                "user": {"id": user_id, "email": email}, "scope": pending.scope}

    def consent(self, authorization_id, bearer, body):
        if not isinstance(body, dict) or body.get("action") not in ("approve", "deny"):
            raise api_error(400, "validation_failed", "action must be 'approve' or 'deny'")
        with self.db() as conn:
            user_id, _ = self.user_from_bearer(bearer, conn)
            pending = self.pending_for(conn, authorization_id, user_id, bind=False)
            if body["action"] == "deny":
                self.store.deny(conn, pending)
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
            return {"redirect_url": self.issue_code(conn, pending)}

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
                self.store.drop_grant(conn, user_id, client_id)
