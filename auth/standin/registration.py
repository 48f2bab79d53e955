# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""Metadata (RFC 8414) and dynamic client registration (RFC 7591): auth.oauth_clients."""
import re
import secrets
import uuid

from common import (MAX_CLIENT_NAME, MAX_REDIRECT_URIS, MAX_URI, SCOPES, check_web_uri, digest,
                    oauth_error)


class Registration:
    """The stand-in's metadata document and its clients (a mixin of server.StandIn)."""

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
        # As the real server: it issues refresh tokens whatever was asked, and says so (a
        # registration answer without refresh_token makes ChatGPT refuse the client).
        grant_types = list(dict.fromkeys(grant_types + ["refresh_token"]))
        response_types = body.get("response_types", ["code"])
        if response_types != ["code"]:
            raise oauth_error("invalid_client_metadata", "response_types must be [\"code\"]")

        client_id = uuid.uuid4()
        secret = secrets.token_urlsafe(32) if client_type == "confidential" else None
        with self.db() as conn:
            row = conn.execute(
                "insert into auth.oauth_clients (id, client_secret_hash, registration_type, redirect_uris, grant_types,"
                " client_name, client_uri, logo_uri, client_type, token_endpoint_auth_method)"
                " values (%s, %s, 'dynamic', %s, %s, %s, %s, %s, %s, %s) returning created_at, updated_at",
                (client_id, digest(secret) if secret else None, ",".join(uris), ",".join(grant_types), name,
                 client_uri, logo_uri, client_type, method)).fetchone()
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
