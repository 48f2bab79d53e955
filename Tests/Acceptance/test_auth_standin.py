# DEVELOPMENT STAND-IN ONLY: these tests cover auth/standin/server.py, a local imitation
# of Supabase Auth's OAuth 2.1 server. Production never uses it (production uses Supabase
# Auth's own OAuth 2.1 server, with authorization_url_path `/app/oauth/consent`).
"""The auth stand-in, end to end over HTTP, against the test database: metadata, dynamic
registration, authorize, consent (details, approve, deny), the token endpoint (code with
PKCE, refresh rotation), grants (list, revoke) and every refusal."""
import base64
import hashlib
import http.client
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.parse
import uuid

import jwt
import pytest

from conftest import ADMIN_URL, ROOT

SECRET = "standin-test-secret-at-least-32-characters-long"
SITE = "http://127.0.0.1:8080"
REDIRECT = "http://127.0.0.1:9999/callback"


class StandIn:
    def __init__(self, extra_env=None):
        env = {**os.environ, "SUPABASE_JWT_SECRET": SECRET, "AUTH_SITE_URL": SITE, **(extra_env or {})}
        for name in ("STANDIN_PUBLIC_URL", "STANDIN_KEY_FILE", "STANDIN_CODE_SECONDS", "STANDIN_AUDIENCE_HOOK"):
            if name not in (extra_env or {}):
                env.pop(name, None)
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "auth/standin/server.py"), "--port", "0", "--database-url", ADMIN_URL],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError("the stand-in did not start: " + line + self.proc.stderr.read())
        self.base = line.split()[-1]
        self.site = env["AUTH_SITE_URL"]
        self.port = int(self.base.rsplit(":", 1)[1])
        self.issuer = self.base + "/auth/v1"

    def stop(self):
        self.proc.terminate()
        try:
            _, self.log = self.proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.log = self.proc.communicate()

    def request(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); never follows redirects."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def json(self, method, path, payload=None, token=None, headers=None):
        headers = dict(headers or {})
        body = None
        if payload is not None:
            body = json.dumps(payload).encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = "Bearer " + token
        status, _, data = self.request(method, path, body, headers)
        return status, (json.loads(data) if data else None)

    def form(self, path, fields, headers=None):
        status, _, data = self.request("POST", path, urllib.parse.urlencode(fields).encode(),
                                       dict({"Content-Type": "application/x-www-form-urlencoded"}, **(headers or {})))
        return status, json.loads(data)


@pytest.fixture(scope="module")
def standin():
    server = StandIn()
    yield server
    server.stop()
    # No line of the log carries a code, a token or an authorization id.
    assert "code=" not in server.log and "eyJ" not in server.log and "authorization_id" not in server.log


def user_token(user_id, session_id, email, **extra):
    now = int(time.time())
    claims = {"sub": str(user_id), "aud": "authenticated", "role": "authenticated", "email": email,
              "session_id": str(session_id), "iat": now, "exp": now + 600, **extra}
    return jwt.encode(claims, SECRET, algorithm="HS256")


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def register(server, **fields):
    body = {"redirect_uris": [REDIRECT], "client_name": "Test Agent", **fields}
    status, client = server.json("POST", "/auth/v1/oauth/clients/register", body)
    assert status == 201, client
    return client


def authorize_query(client_id, challenge, /, **params):
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
             "code_challenge_method": "S256", "state": "st-1", "scope": "email", **params}
    return "/auth/v1/oauth/authorize?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})


def authorization_id(server, client_id, challenge, /, **params):
    status, headers, _ = server.request("GET", authorize_query(client_id, challenge, **params))
    assert status == 302
    location = urllib.parse.urlsplit(headers["location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == server.site + "/app/oauth/consent"
    (value,) = urllib.parse.parse_qs(location.query)["authorization_id"]
    uuid.UUID(value)
    return value


def redirect_params(url):
    parts = urllib.parse.urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == REDIRECT
    return {k: v[0] for k, v in urllib.parse.parse_qs(parts.query).items()}


def approve(server, token, auth_id):
    """Reads the details and approves, as the consent page does (or follows the redirect
    when an earlier consent already covers the scopes)."""
    status, details = server.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=token)
    assert status == 200, details
    if "redirect_url" in details:
        return redirect_params(details["redirect_url"])
    status, body = server.json("POST", f"/auth/v1/oauth/authorizations/{auth_id}/consent", {"action": "approve"},
                               token=token)
    assert status == 200, body
    return redirect_params(body["redirect_url"])


@pytest.fixture
def flow(standin, make_user):
    """A registered client and a signed-in user; `code()` runs authorize + consent."""

    class Flow:
        def __init__(self):
            self.user, self.session, self.email = make_user(with_session=True)
            self.token = user_token(self.user, self.session, self.email)
            self.client = register(standin)
            self.client_id = self.client["client_id"]

        def code(self, **params):
            verifier, challenge = pkce()
            params = approve(standin, self.token, authorization_id(standin, self.client_id, challenge, **params))
            assert params["state"] == "st-1"
            return params["code"], verifier

        def exchange(self, code, verifier, /, **fields):
            return standin.form("/auth/v1/oauth/token", {
                "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                "client_id": self.client_id, "code_verifier": verifier, **fields})

        def tokens(self, **params):
            status, body = self.exchange(*self.code(**params))
            assert status == 200, body
            return body

        def refresh(self, refresh_token):
            return standin.form("/auth/v1/oauth/token", {
                "grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": self.client_id})

    return Flow()


def verify(server, access_token, audience="authenticated"):
    status, jwks = server.json("GET", "/auth/v1/.well-known/jwks.json")
    assert status == 200
    (key,) = jwks["keys"]
    assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig")
    assert jwt.get_unverified_header(access_token) == {"alg": "ES256", "kid": key["kid"], "typ": "JWT"}
    return jwt.decode(access_token, jwt.PyJWK(key).key, algorithms=["ES256"], audience=audience,
                      issuer=server.issuer, options={"require": ["exp", "iat", "sub", "iss", "aud"]})


# -----------------------------------------------------------------------------
# Metadata and keys
# -----------------------------------------------------------------------------
def test_metadata_at_both_paths(standin):
    for path in ("/.well-known/oauth-authorization-server/auth/v1", "/auth/v1/.well-known/oauth-authorization-server"):
        status, meta = standin.json("GET", path)
        assert status == 200
        issuer = standin.issuer
        assert meta["issuer"] == issuer
        assert meta["authorization_endpoint"] == issuer + "/oauth/authorize"
        assert meta["token_endpoint"] == issuer + "/oauth/token"
        assert meta["registration_endpoint"] == issuer + "/oauth/clients/register"
        assert meta["jwks_uri"] == issuer + "/.well-known/jwks.json"
        assert meta["response_types_supported"] == ["code"]
        assert meta["grant_types_supported"] == ["authorization_code", "refresh_token"]
        assert meta["code_challenge_methods_supported"] == ["S256"]
        assert meta["token_endpoint_auth_methods_supported"] == ["none", "client_secret_basic", "client_secret_post"]
        assert meta["scopes_supported"] == ["openid", "email", "profile", "phone"]


def test_unknown_paths_and_methods(standin):
    assert standin.request("GET", "/auth/v1/nope")[0] == 404
    status, headers, _ = standin.request("GET", "/auth/v1/oauth/token")
    assert status == 405 and "POST" in headers["allow"]


def test_key_file_keeps_the_key_across_restarts(tmp_path):
    path = tmp_path / "standin-key.pem"
    kids = []
    for _ in range(2):
        server = StandIn({"STANDIN_KEY_FILE": str(path)})
        try:
            kids.append(server.json("GET", "/auth/v1/.well-known/jwks.json")[1]["keys"][0]["kid"])
        finally:
            server.stop()
    assert path.exists() and oct(path.stat().st_mode & 0o777) == "0o600"
    assert kids[0] == kids[1]


# -----------------------------------------------------------------------------
# Dynamic client registration
# -----------------------------------------------------------------------------
def test_registration_of_a_public_client(standin, admin):
    client = register(standin, redirect_uris=[REDIRECT, "https://agent.example/cb"])
    uuid.UUID(client["client_id"])
    assert isinstance(client["client_id_issued_at"], int)
    assert client["redirect_uris"] == [REDIRECT, "https://agent.example/cb"]
    assert client["client_name"] == "Test Agent"
    assert client["token_endpoint_auth_method"] == "none" and "client_secret" not in client
    assert client["grant_types"] == ["authorization_code", "refresh_token"]
    assert client["response_types"] == ["code"]
    row = admin.execute("select redirect_uris, client_name, client_type::text, registration_type::text,"
                        " client_secret_hash from auth.oauth_clients where id = %s", (client["client_id"],)).fetchone()
    assert row == (f"{REDIRECT},https://agent.example/cb", "Test Agent", "public", "dynamic", None)


def test_registration_of_a_confidential_client(standin, admin, make_user):
    client = register(standin, token_endpoint_auth_method="client_secret_basic")
    assert client["client_secret"] and client["token_endpoint_auth_method"] == "client_secret_basic"
    row = admin.execute("select client_type::text, client_secret_hash from auth.oauth_clients where id = %s",
                        (client["client_id"],)).fetchone()
    assert row[0] == "confidential" and row[1] and client["client_secret"] not in row[1]

    user, session, email = make_user(with_session=True)
    verifier, challenge = pkce()
    code = approve(standin, user_token(user, session, email),
                   authorization_id(standin, client["client_id"], challenge))["code"]
    fields = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
    # Without its secret, with a wrong one: 401 invalid_client (and the code is not spent).
    status, body = standin.form("/auth/v1/oauth/token", dict(fields, client_id=client["client_id"]))
    assert (status, body["error"]) == (401, "invalid_client")
    wrong = base64.b64encode(f"{client['client_id']}:nope".encode()).decode()
    status, body = standin.form("/auth/v1/oauth/token", fields, {"Authorization": "Basic " + wrong})
    assert (status, body["error"]) == (401, "invalid_client")
    basic = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
    status, body = standin.form("/auth/v1/oauth/token", fields, {"Authorization": "Basic " + basic})
    assert status == 200, body
    assert verify(standin, body["access_token"])["client_id"] == client["client_id"]
    # The secret in the form (client_secret_post) works too; both at once is refused.
    refresh = {"grant_type": "refresh_token", "refresh_token": body["refresh_token"]}
    status, answer = standin.form("/auth/v1/oauth/token", dict(refresh, client_id=client["client_id"],
                                                               client_secret=client["client_secret"]),
                                  {"Authorization": "Basic " + basic})
    assert (status, answer["error"]) == (400, "invalid_request")
    status, answer = standin.form("/auth/v1/oauth/token", dict(refresh, client_id=client["client_id"],
                                                               client_secret=client["client_secret"]))
    assert status == 200, answer


@pytest.mark.parametrize("uri, error", [
    ("https://user:pw@agent.example/cb", "userinfo"),
    ("https://user@agent.example/cb", "userinfo"),
    ("https://agent.example/cb#frag", "fragment"),
    ("https://agent.example/cb#", "fragment"),
    ("/callback", "absolute"),
    ("agent.example/cb", "absolute"),
    ("http://agent.example/cb", "http is only allowed"),
    ("http://localhost.agent.example/cb", "http is only allowed"),
    ("javascript:alert(1)", "absolute"),
    ("myapp://callback", "absolute"),
    ("https://agent.example/a,b", "not allowed"),
    ("https://agent.example/a b", "not allowed"),
    ("https://agent.example:99999/cb", "valid URL"),
    ("https://agent.example/" + "a" * 2048, "2048"),
    ("", "non-empty"),
])
def test_registration_refuses_bad_redirect_uris(standin, uri, error):
    status, body = standin.json("POST", "/auth/v1/oauth/clients/register", {"redirect_uris": [uri]})
    assert status == 400
    assert body["error"] == "invalid_redirect_uri"
    assert error in body["error_description"]


def test_registration_accepts_loopback_http(standin):
    for uri in ("http://localhost/cb", "http://127.0.0.1:3000/cb", "http://[::1]:3000/cb"):
        assert register(standin, redirect_uris=[uri])["redirect_uris"] == [uri]


@pytest.mark.parametrize("body, error", [
    ({}, "invalid_redirect_uri"),
    ({"redirect_uris": []}, "invalid_redirect_uri"),
    ({"redirect_uris": REDIRECT}, "invalid_redirect_uri"),
    ({"redirect_uris": [REDIRECT] * 11}, "invalid_redirect_uri"),
    ({"redirect_uris": [REDIRECT], "client_name": "x" * 1025}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "client_name": 7}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "client_name": "a\nb"}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "client_type": "confidential"}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "grant_types": ["implicit"]}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "grant_types": ["refresh_token"]}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "response_types": ["token"]}, "invalid_client_metadata"),
    ({"redirect_uris": [REDIRECT], "logo_uri": "http://evil.example/logo.png"}, "invalid_client_metadata"),
    ([REDIRECT], "invalid_client_metadata"),
])
def test_registration_refuses_bad_metadata(standin, body, error):
    status, answer = standin.json("POST", "/auth/v1/oauth/clients/register", body)
    assert (status, answer["error"]) == (400, error), answer


def test_registration_refuses_bad_bodies(standin):
    path = "/auth/v1/oauth/clients/register"
    status, _, data = standin.request("POST", path, b"{not json", {"Content-Type": "application/json"})
    assert status == 400 and json.loads(data)["error"] == "invalid_client_metadata"
    status, _, data = standin.request("POST", path, json.dumps({"redirect_uris": [REDIRECT]}).encode(),
                                      {"Content-Type": "text/plain"})
    assert status == 400 and json.loads(data)["error"] == "invalid_client_metadata"
    status, _, _ = standin.request("POST", path, b"x" * (64 * 1024 + 1), {"Content-Type": "application/json"})
    assert status == 413


# -----------------------------------------------------------------------------
# Authorize
# -----------------------------------------------------------------------------
def test_authorize_redirects_to_the_consent_page(standin, flow):
    authorization_id(standin, flow.client_id, pkce()[1])


@pytest.mark.parametrize("params, error, description", [
    ({"code_challenge": None, "code_challenge_method": None}, "invalid_request", "PKCE is required"),
    ({"code_challenge_method": None}, "invalid_request", "PKCE is required"),
    ({"code_challenge": None}, "invalid_request", "PKCE is required"),
    ({"code_challenge_method": "plain"}, "invalid_request", "S256"),
    ({"code_challenge_method": "s256"}, "invalid_request", "S256"),
    ({"code_challenge": "short"}, "invalid_request", "43-character"),
    ({"response_type": None}, "invalid_request", "response_type"),
    ({"response_type": "token"}, "unsupported_response_type", "response_type"),
    ({"scope": "email admin"}, "invalid_scope", "unsupported scope"),
    ({"resource": "relative/path"}, "invalid_target", "resource"),
    ({"resource": "https://relay.example/mcp#x"}, "invalid_target", "resource"),
    ({"state": "s" * 2049}, "invalid_request", "state"),
])
def test_authorize_refusals_redirect_with_an_error(standin, flow, params, error, description):
    status, headers, _ = standin.request("GET", authorize_query(flow.client_id, pkce()[1], **params))
    assert status == 302
    answer = redirect_params(headers["location"])
    assert answer["error"] == error
    assert description in answer["error_description"]
    assert answer.get("state") == (None if "state" in params else "st-1")
    assert "code" not in answer


def test_authorize_refuses_a_repeated_parameter(standin, flow):
    path = authorize_query(flow.client_id, pkce()[1]) + "&scope=openid"
    status, headers, _ = standin.request("GET", path)
    assert status == 302 and redirect_params(headers["location"])["error"] == "invalid_request"


@pytest.mark.parametrize("params, text", [
    ({"redirect_uri": "http://127.0.0.1:9999/other"}, "not registered"),
    ({"redirect_uri": REDIRECT + "/"}, "not registered"),
    ({"redirect_uri": "https://evil.example/cb"}, "not registered"),
    ({"redirect_uri": None}, "redirect_uri is required"),
    ({"client_id": str(uuid.uuid4())}, "invalid client_id"),
    ({"client_id": "not-a-uuid"}, "invalid client_id"),
    ({"client_id": None}, "client_id is required"),
])
def test_authorize_shows_a_page_and_never_redirects_for_client_errors(standin, flow, params, text):
    status, headers, body = standin.request("GET", authorize_query(flow.client_id, pkce()[1], **params))
    assert status == 400
    assert "location" not in headers
    assert headers["content-type"].startswith("text/html")
    assert text in body.decode()


# -----------------------------------------------------------------------------
# Consent API
# -----------------------------------------------------------------------------
def test_authorization_details(standin, flow):
    auth_id = authorization_id(standin, flow.client_id, pkce()[1], scope="openid email")
    status, details = standin.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=flow.token)
    assert status == 200
    assert details == {"authorization_id": auth_id, "redirect_uri": REDIRECT,
                       "client": {"id": flow.client_id, "name": "Test Agent", "uri": "", "logo_uri": ""},
                       "user": {"id": str(flow.user), "email": flow.email}, "scope": "openid email"}


def test_consent_api_refusals(standin, flow, make_user, admin):
    auth_id = authorization_id(standin, flow.client_id, pkce()[1])
    path = f"/auth/v1/oauth/authorizations/{auth_id}"
    # No bearer, a bad signature, an expired token, a token without aud.
    assert standin.json("GET", path)[0] == 401
    bad = jwt.encode({"sub": str(flow.user), "session_id": str(flow.session), "aud": "authenticated",
                      "iat": int(time.time()), "exp": int(time.time()) + 60}, "wrong-secret-" * 4, algorithm="HS256")
    assert standin.json("GET", path, token=bad)[0] == 403
    assert standin.json("GET", path, token=user_token(flow.user, flow.session, flow.email,
                                                      exp=int(time.time()) - 60))[0] == 403
    no_aud = jwt.encode({"sub": str(flow.user), "session_id": str(flow.session), "iat": int(time.time()),
                         "exp": int(time.time()) + 60}, SECRET, algorithm="HS256")
    assert standin.json("GET", path, token=no_aud)[0] == 403
    # An OAuth client's token cannot consent for the user.
    assert standin.json("GET", path, token=user_token(flow.user, flow.session, flow.email,
                                                      client_id=flow.client_id))[1]["error_code"] == "bad_jwt"
    # A session that is gone.
    assert standin.json("GET", path, token=user_token(flow.user, uuid.uuid4(), flow.email))[1]["error_code"] == \
        "session_not_found"
    # An Origin other than the site's.
    status, body = standin.json("GET", path, token=flow.token, headers={"Origin": "https://evil.example"})
    assert (status, body["error_code"]) == (400, "validation_failed")
    # Unknown authorization; consent before the details were read.
    assert standin.json("GET", f"/auth/v1/oauth/authorizations/{uuid.uuid4()}", token=flow.token)[0] == 404
    status, _ = standin.json("POST", path + "/consent", {"action": "approve"}, token=flow.token)
    assert status == 404
    # The first user to read it owns it; another user gets 404.
    assert standin.json("GET", path, token=flow.token, headers={"Origin": SITE})[0] == 200
    other, other_session, other_email = make_user(with_session=True)
    other_token = user_token(other, other_session, other_email)
    assert standin.json("GET", path, token=other_token)[0] == 404
    assert standin.json("POST", path + "/consent", {"action": "approve"}, token=other_token)[0] == 404
    # A bad action.
    status, body = standin.json("POST", path + "/consent", {"action": "maybe"}, token=flow.token)
    assert (status, body["error_code"]) == (400, "validation_failed")
    # No consent was recorded by any of this.
    assert admin.execute("select count(*) from auth.oauth_consents where client_id = %s",
                         (flow.client_id,)).fetchone()[0] == 0


def test_approve_records_consent_and_returns_a_code(standin, flow, admin):
    code, _ = flow.code(scope="openid email")
    assert len(code) >= 40
    row = admin.execute("select scopes, revoked_at from auth.oauth_consents where user_id = %s and client_id = %s",
                        (flow.user, flow.client_id)).fetchone()
    assert row == ("openid email", None)


def test_deny_redirects_with_access_denied(standin, flow, admin):
    auth_id = authorization_id(standin, flow.client_id, pkce()[1])
    assert standin.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=flow.token)[0] == 200
    status, body = standin.json("POST", f"/auth/v1/oauth/authorizations/{auth_id}/consent", {"action": "deny"},
                                token=flow.token)
    assert status == 200
    answer = redirect_params(body["redirect_url"])
    assert answer["error"] == "access_denied" and answer["state"] == "st-1" and "code" not in answer
    assert admin.execute("select count(*) from auth.oauth_consents where client_id = %s",
                         (flow.client_id,)).fetchone()[0] == 0
    # Decided once: the authorization is gone.
    assert standin.json("POST", f"/auth/v1/oauth/authorizations/{auth_id}/consent", {"action": "approve"},
                        token=flow.token)[0] == 404


def test_an_earlier_consent_covering_the_scopes_redirects_at_once(standin, flow):
    flow.code(scope="openid email")
    verifier, challenge = pkce()
    auth_id = authorization_id(standin, flow.client_id, challenge, scope="email")
    status, body = standin.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=flow.token)
    assert status == 200 and list(body) == ["redirect_url"]
    status, tokens = flow.exchange(redirect_params(body["redirect_url"])["code"], verifier)
    assert status == 200 and tokens["scope"] == "email"
    # Wider scopes need consent again.
    auth_id = authorization_id(standin, flow.client_id, challenge, scope="openid email profile")
    status, body = standin.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=flow.token)
    assert status == 200 and body["authorization_id"] == auth_id


# -----------------------------------------------------------------------------
# Token endpoint
# -----------------------------------------------------------------------------
def test_code_exchange_issues_an_es256_token_for_a_new_session(standin, flow, admin):
    code, verifier = flow.code(scope="openid email")
    before = int(time.time())
    status, body = flow.exchange(code, verifier)
    assert status == 200, body
    assert body["token_type"] == "bearer" and body["expires_in"] == 3600 and body["scope"] == "openid email"
    assert len(body["refresh_token"]) >= 40
    claims = verify(standin, body["access_token"])
    assert claims["iss"] == standin.issuer
    assert claims["sub"] == str(flow.user)
    assert claims["aud"] == "authenticated"
    assert claims["role"] == "authenticated"
    assert claims["email"] == flow.email
    assert claims["client_id"] == flow.client_id
    assert claims["aal"] == "aal1"
    assert claims["scope"] == "openid email"
    assert before - 5 <= claims["iat"] <= int(time.time()) + 5
    assert claims["exp"] == claims["iat"] + 3600
    session = admin.execute("select user_id, oauth_client_id, aal::text from auth.sessions where id = %s",
                            (claims["session_id"],)).fetchone()
    assert session == (flow.user, uuid.UUID(flow.client_id), "aal1")
    assert claims["session_id"] != str(flow.session)


def test_the_audience_hook_adds_the_resource(make_user):
    server = StandIn({"STANDIN_AUDIENCE_HOOK": "1"})
    try:
        user, session, email = make_user(with_session=True)
        client = register(server)
        verifier, challenge = pkce()
        resource = "https://relay.example/mcp"
        code = approve(server, user_token(user, session, email),
                       authorization_id(server, client["client_id"], challenge, resource=resource))["code"]
        fields = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                  "client_id": client["client_id"], "code_verifier": verifier}
        status, body = server.form("/auth/v1/oauth/token", fields)
        assert status == 200, body
        assert verify(server, body["access_token"], audience=resource)["aud"] == ["authenticated", resource]
        status, body = server.form("/auth/v1/oauth/token", {
            "grant_type": "refresh_token", "refresh_token": body["refresh_token"], "client_id": client["client_id"]})
        assert status == 200 and verify(server, body["access_token"], audience=resource)["aud"][1] == resource
    finally:
        server.stop()


def test_without_the_hook_the_resource_is_not_in_aud(standin, flow):
    claims = verify(standin, flow.tokens(resource="https://relay.example/mcp")["access_token"])
    assert claims["aud"] == "authenticated"


def test_wrong_verifier_is_refused_and_spends_the_code(standin, flow, admin):
    code, verifier = flow.code()
    status, body = flow.exchange(code, pkce()[0])
    assert (status, body["error"]) == (400, "invalid_grant")
    assert flow.exchange(code, verifier)[1]["error"] == "invalid_grant"
    assert admin.execute("select count(*) from auth.sessions where oauth_client_id = %s",
                         (flow.client_id,)).fetchone()[0] == 0


def test_token_request_refusals(standin, flow):
    code, verifier = flow.code()
    status, body = flow.exchange(code, verifier, redirect_uri="http://127.0.0.1:9999/other")
    assert (status, body["error"]) == (400, "invalid_grant")
    code, verifier = flow.code()
    for fields, error in [({"code_verifier": ""}, "invalid_request"), ({"redirect_uri": ""}, "invalid_request"),
                          ({"code": ""}, "invalid_request"), ({"code": "not-a-code"}, "invalid_grant"),
                          ({"grant_type": "password"}, "unsupported_grant_type"),
                          ({"grant_type": "client_credentials"}, "unsupported_grant_type")]:
        status, body = flow.exchange(code, verifier, **fields)
        assert (status, body["error"]) == (400, error), fields
    # Another client cannot redeem this client's code, and a public client sends no secret.
    other = register(standin)
    status, body = flow.exchange(code, verifier, client_id=other["client_id"])
    assert (status, body["error"]) == (400, "invalid_grant")
    status, body = flow.exchange(code, verifier, client_id=str(uuid.uuid4()))
    assert (status, body["error"]) == (401, "invalid_client")
    status, body = flow.exchange(code, verifier, client_secret="x")
    assert (status, body["error"]) == (401, "invalid_client")
    # A repeated field, a JSON body.
    body = urllib.parse.urlencode({"grant_type": "authorization_code", "code": code}) + "&code=x"
    status, _, data = standin.request("POST", "/auth/v1/oauth/token", body.encode(),
                                      {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, json.loads(data)["error"]) == (400, "invalid_request")
    status, _, data = standin.request("POST", "/auth/v1/oauth/token", b'{"grant_type":"authorization_code"}',
                                      {"Content-Type": "application/json"})
    assert (status, json.loads(data)["error"]) == (400, "invalid_request")
    # None of it spent the code.
    assert flow.exchange(code, verifier)[0] == 200


def test_a_reused_code_is_refused_and_revokes_its_tokens(standin, flow, admin):
    code, verifier = flow.code()
    status, tokens = flow.exchange(code, verifier)
    assert status == 200
    session_id = verify(standin, tokens["access_token"])["session_id"]
    status, body = flow.exchange(code, verifier)
    assert (status, body["error"]) == (400, "invalid_grant")
    assert admin.execute("select count(*) from auth.sessions where id = %s", (session_id,)).fetchone()[0] == 0
    status, body = flow.refresh(tokens["refresh_token"])
    assert (status, body["error"]) == (400, "invalid_grant")


def test_an_expired_code_is_refused(make_user):
    server = StandIn({"STANDIN_CODE_SECONDS": "1"})
    try:
        user, session, email = make_user(with_session=True)
        client = register(server)
        verifier, challenge = pkce()
        code = approve(server, user_token(user, session, email),
                       authorization_id(server, client["client_id"], challenge))["code"]
        time.sleep(1.2)
        status, body = server.form("/auth/v1/oauth/token", {
            "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
            "client_id": client["client_id"], "code_verifier": verifier})
        assert (status, body["error"]) == (400, "invalid_grant")
        assert "expired" in body["error_description"]
    finally:
        server.stop()


def test_refresh_rotates_and_the_old_token_is_refused(standin, flow, admin):
    first = flow.tokens()
    session_id = verify(standin, first["access_token"])["session_id"]
    status, second = flow.refresh(first["refresh_token"])
    assert status == 200, second
    assert second["refresh_token"] != first["refresh_token"]
    claims = verify(standin, second["access_token"])
    assert claims["session_id"] == session_id and claims["client_id"] == flow.client_id
    assert claims["sub"] == str(flow.user) and claims["scope"] == "email"
    # The old one is spent; presenting it again is taken as theft: the session goes.
    status, body = flow.refresh(first["refresh_token"])
    assert (status, body["error"]) == (400, "invalid_grant")
    assert admin.execute("select count(*) from auth.sessions where id = %s", (session_id,)).fetchone()[0] == 0
    assert flow.refresh(second["refresh_token"])[1]["error"] == "invalid_grant"


def test_refresh_refusals(standin, flow, admin):
    tokens = flow.tokens()
    assert flow.refresh("not-a-token")[1]["error"] == "invalid_grant"
    assert standin.form("/auth/v1/oauth/token", {"grant_type": "refresh_token",
                                                 "client_id": flow.client_id})[1]["error"] == "invalid_request"
    other = register(standin)
    status, body = standin.form("/auth/v1/oauth/token", {
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": other["client_id"]})
    assert (status, body["error"]) == (400, "invalid_grant")
    # A session deleted (signed out elsewhere) stops its refresh token.
    admin.execute("delete from auth.sessions where id = %s", (verify(standin, tokens["access_token"])["session_id"],))
    assert flow.refresh(tokens["refresh_token"])[1]["error"] == "invalid_grant"


# -----------------------------------------------------------------------------
# Grants
# -----------------------------------------------------------------------------
def test_grants_list_and_revoke(standin, flow, admin):
    assert standin.json("GET", "/auth/v1/user/oauth/grants", token=flow.token) == (200, [])
    first = flow.tokens(scope="openid email")
    second = flow.tokens(scope="email")
    unused_code, unused_verifier = flow.code()
    status, grants = standin.json("GET", "/auth/v1/user/oauth/grants", token=flow.token)
    assert status == 200 and len(grants) == 1
    assert grants[0]["client"] == {"id": flow.client_id, "name": "Test Agent", "uri": "", "logo_uri": ""}
    assert grants[0]["scopes"] == ["openid", "email"]  # the second request was inside the first consent
    assert grants[0]["granted_at"]
    sessions = [verify(standin, t["access_token"])["session_id"] for t in (first, second)]
    assert admin.execute("select count(*) from auth.sessions where id = any(%s::uuid[])",
                         (sessions,)).fetchone()[0] == 2

    status, _, body = standin.request("DELETE", f"/auth/v1/user/oauth/grants?client_id={flow.client_id}",
                                      headers={"Authorization": "Bearer " + flow.token})
    assert (status, body) == (204, b"")
    assert admin.execute("select count(*) from auth.sessions where user_id = %s and oauth_client_id = %s",
                         (flow.user, flow.client_id)).fetchone()[0] == 0
    assert admin.execute("select revoked_at is not null from auth.oauth_consents where user_id = %s"
                         " and client_id = %s", (flow.user, flow.client_id)).fetchone()[0]
    # The user's own session is untouched; the grant is gone from the list.
    assert admin.execute("select count(*) from auth.sessions where id = %s", (flow.session,)).fetchone()[0] == 1
    assert standin.json("GET", "/auth/v1/user/oauth/grants", token=flow.token) == (200, [])
    # Refresh tokens and codes from before the revocation are dead.
    for tokens in (first, second):
        assert flow.refresh(tokens["refresh_token"])[1]["error"] == "invalid_grant"
    assert flow.exchange(unused_code, unused_verifier)[1]["error"] == "invalid_grant"
    # Revoking again: 404. A bad client_id: 400.
    assert standin.json("DELETE", f"/auth/v1/user/oauth/grants?client_id={flow.client_id}",
                        token=flow.token)[0] == 404
    assert standin.json("DELETE", "/auth/v1/user/oauth/grants?client_id=nope", token=flow.token)[0] == 400
    assert standin.json("DELETE", "/auth/v1/user/oauth/grants", token=flow.token)[0] == 400
    # A new consent after revocation asks again (no silent redirect).
    auth_id = authorization_id(standin, flow.client_id, pkce()[1])
    status, body = standin.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=flow.token)
    assert status == 200 and body["authorization_id"] == auth_id


def test_grants_need_the_users_own_token(standin, flow):
    assert standin.json("GET", "/auth/v1/user/oauth/grants")[0] == 401
    agent = flow.tokens()["access_token"]
    assert standin.json("GET", "/auth/v1/user/oauth/grants", token=agent)[0] == 403
    assert standin.json("DELETE", f"/auth/v1/user/oauth/grants?client_id={flow.client_id}", token=agent)[0] == 403


def test_cors_preflight(standin):
    status, headers, _ = standin.request("OPTIONS", "/auth/v1/oauth/authorizations/x", headers={
        "Origin": SITE, "Access-Control-Request-Method": "GET"})
    assert status == 204 and headers["access-control-allow-origin"] == "*"
    assert "authorization" in headers["access-control-allow-headers"]


# -----------------------------------------------------------------------------
# With the relay: its tokens pass the relay's checks, and a revoked grant stops them
# -----------------------------------------------------------------------------
def test_the_relay_accepts_the_standins_tokens_until_the_grant_is_revoked(standin, flow):
    from relay_server import RelayServer  # builds the relay when it is missing
    relay = RelayServer(SUPABASE_URL=standin.base, SUPABASE_JWKS_URL=standin.issuer + "/.well-known/jwks.json")
    try:
        def locate(token):
            conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
            try:
                conn.request("POST", "/v1/locate?timeout_secs=1", headers={"Authorization": "Bearer " + token})
                return conn.getresponse().status
            finally:
                conn.close()

        tokens = flow.tokens()
        assert locate(tokens["access_token"]) == 503, "authenticated as the agent (no phone: 503)"
        status, _, _ = standin.request("DELETE", f"/auth/v1/user/oauth/grants?client_id={flow.client_id}",
                                       headers={"Authorization": "Bearer " + flow.token})
        assert status == 204
        # The relay caches an agent's session check for 5 s (Authenticator.defaultSessionCacheTTL).
        deadline = time.monotonic() + 8
        while (status := locate(tokens["access_token"])) != 401 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert status == 401, "the session is gone: the token is revoked"
    finally:
        relay.stop()


# -----------------------------------------------------------------------------
# HTTP limits
# -----------------------------------------------------------------------------
def test_http_limits(standin):
    path = "/auth/v1/oauth/clients/register"
    # A chunked body is refused (411); so is deeply nested JSON (400, not a crash).
    status, _, _ = standin.request("POST", path, iter([b'{"redirect_uris": []}']),
                                   {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    assert status == 411
    deep = b"[" * 20000 + b"]" * 20000
    status, _, data = standin.request("POST", path, deep, {"Content-Type": "application/json"})
    assert status == 413 or (status == 400 and json.loads(data)["error"] == "invalid_client_metadata")
    deep = b"[" * 30000
    assert standin.request("POST", path, deep, {"Content-Type": "application/json"})[0] == 400
    # Too many query parameters.
    query = "&".join(f"p{i}=1" for i in range(40))
    assert standin.request("GET", "/auth/v1/oauth/authorize?" + query)[0] == 400


def test_connections_are_capped(standin):
    import socket
    held = []
    try:
        for _ in range(64):
            held.append(socket.create_connection(("127.0.0.1", standin.port), timeout=5))
        time.sleep(0.2)
        extra = socket.create_connection(("127.0.0.1", standin.port), timeout=5)
        extra.sendall(b"GET /auth/v1/.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n")
        assert extra.recv(100) == b"", "the 65th connection is closed unanswered"
        extra.close()
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert standin.json("GET", "/auth/v1/.well-known/jwks.json")[0] == 200
