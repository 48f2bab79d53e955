# DEVELOPMENT STAND-IN ONLY: these tests cover auth/standin/server.py, a local imitation
# of Supabase Auth's OAuth 2.1 server. Production never uses it (production uses Supabase
# Auth's own OAuth 2.1 server, with authorization_url_path `/app/oauth/consent`).
"""The auth stand-in, end to end over HTTP, against the test database: metadata, dynamic
registration, authorize, consent (details, approve, deny), the token endpoint (code with
PKCE, refresh rotation), grants (list, revoke), sign-in by magic link (otp, the development
mailbox, verify, the user's refresh grant, logout) and every refusal."""
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
        # The stand-in's own tests check its Supabase-shaped OAuth server, which supabase/auth#2820
        # would refuse for most of them: off here unless a test asks (None: the default, on).
        env = {**os.environ, "SUPABASE_JWT_SECRET": SECRET, "AUTH_SITE_URL": SITE, "STANDIN_ISSUE_2820": "0",
               **(extra_env or {})}
        env = {name: value for name, value in env.items() if value is not None}
        for name in ("STANDIN_PUBLIC_URL", "STANDIN_KEY_FILE", "STANDIN_CODE_SECONDS", "STANDIN_AUDIENCE_HOOK",
                     "STANDIN_OTP_SECONDS", "STANDIN_OTP_INTERVAL_SECONDS", "STANDIN_MAILBOX_PORT"):
            if name not in (extra_env or {}):
                env.pop(name, None)
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "auth/standin/server.py"), "--port", "0", "--mailbox-port", "0",
             "--database-url", ADMIN_URL],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError("the stand-in did not start: " + line + self.proc.stderr.read())
        mailbox = self.proc.stdout.readline()
        assert mailbox.startswith("mailbox on http://127.0.0.1:"), mailbox
        self.mailbox_port = int(mailbox.strip().rsplit(":", 1)[1])
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

    def mail(self, method, path, body=None, headers=None):
        """A request to the development mailbox: (status, JSON or text)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.mailbox_port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            data = response.read()
            if response.getheader("Content-Type", "").startswith("application/json"):
                return response.status, json.loads(data)
            return response.status, data.decode()
        finally:
            conn.close()

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
    assert "token=" not in server.log and "verify?" not in server.log and "redirect_to" not in server.log


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
        assert meta["scopes_supported"] == ["openid", "email", "profile", "phone", "offline_access"]


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


def test_registration_always_answers_with_the_refresh_grant(standin, admin):
    """As the real server (it issues refresh tokens whatever was asked): a client that asked
    for authorization_code only is told it has refresh_token too; ChatGPT refuses a
    registration answer without it."""
    client = register(standin, grant_types=["authorization_code"])
    assert client["grant_types"] == ["authorization_code", "refresh_token"]
    row = admin.execute("select grant_types, token_endpoint_auth_method::text from auth.oauth_clients where id = %s",
                        (client["client_id"],)).fetchone()
    assert row == ("authorization_code,refresh_token", "none")


def test_issue_2820_mode_refuses_details_as_supabase_does(make_user):
    """By default (STANDIN_ISSUE_2820 unset) the authorization details answer 400
    "authorization request cannot be processed" for a request with `resource` or
    `offline_access`, or from a public client, as Supabase's OAuth server does today
    (supabase/auth#2820); a confidential client's plain request is served."""
    server = StandIn({"STANDIN_ISSUE_2820": None})
    try:
        user, session, email = make_user(with_session=True)
        token = user_token(user, session, email)
        public = register(server)["client_id"]
        confidential = register(server, token_endpoint_auth_method="client_secret_basic")["client_id"]
        for client_id, params in ((public, {}), (confidential, {"resource": "https://relay.example/mcp"}),
                                  (confidential, {"scope": "email offline_access"})):
            auth_id = authorization_id(server, client_id, pkce()[1], **params)
            status, body = server.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=token)
            assert (status, body) == (400, {"code": 400, "error_code": "validation_failed",
                                            "msg": "authorization request cannot be processed"}), params
        auth_id = authorization_id(server, confidential, pkce()[1])
        assert server.json("GET", f"/auth/v1/oauth/authorizations/{auth_id}", token=token)[0] == 200
    finally:
        server.stop()


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
    ({"state": "s\x00t"}, "invalid_request", "state"),
    ({"resource": "https://relay.example/m\x00cp"}, "invalid_target", "resource"),
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
# State in the database: a restart forgets nothing
# -----------------------------------------------------------------------------
def sha256_digest(secret):
    """How the stand-in keeps codes and refresh tokens (never in the clear)."""
    return base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()).rstrip(b"=").decode()


def test_a_restart_keeps_tokens_codes_and_pending_authorizations(tmp_path, make_user, admin):
    """Restarted on the same database and key (as `make auth` restarts it), the stand-in
    still knows what it issued: (a) a refresh token works and rotates, (b) a code not yet
    exchanged is exchanged, once, (c) a pending authorization is approved, whether the
    consent page read it before the restart or not; a sign-in link's refresh token works,
    and one spent before the restart is still caught as a reuse. Kept in memory, as the
    stand-in once kept them, each of these was forgotten."""
    env = {"STANDIN_KEY_FILE": str(tmp_path / "key.pem")}
    user, session, email = make_user(with_session=True)
    token = user_token(user, session, email)

    def exchange(server, code, verifier):
        return server.form("/auth/v1/oauth/token", {"grant_type": "authorization_code", "code": code,
                                                    "redirect_uri": REDIRECT, "client_id": client_id,
                                                    "code_verifier": verifier})

    def refresh(server, refresh_token):
        return server.form("/auth/v1/oauth/token", {"grant_type": "refresh_token", "refresh_token": refresh_token,
                                                    "client_id": client_id})

    server = StandIn(env)
    try:
        client_id = register(server)["client_id"]
        verifier, challenge = pkce()
        status, first = exchange(server, approve(server, token, authorization_id(server, client_id, challenge))["code"],
                                 verifier)
        assert status == 200, first
        first_session = verify(server, first["access_token"])["session_id"]
        status, second = refresh(server, first["refresh_token"])
        assert status == 200, second
        code_verifier, challenge = pkce()
        code = approve(server, token, authorization_id(server, client_id, challenge))["code"]
        # Two requests for more than the consent covers: the consent page read one (which
        # binds it to the user) before the restart, the other not.
        read_verifier, challenge = pkce()
        read = authorization_id(server, client_id, challenge, scope="openid email")
        status, details = server.json("GET", f"/auth/v1/oauth/authorizations/{read}", token=token)
        assert status == 200 and details["scope"] == "openid email", details
        unread_verifier, challenge = pkce()
        unread = authorization_id(server, client_id, challenge, scope="email profile")
        # The browser phone's sessions: one refreshed after the restart, one whose spent
        # token comes back after it.
        _, phone = sign_in(server)
        _, stolen = sign_in(server)
        status, rotated = refresh_user(server, stolen["refresh_token"])
        assert status == 200, rotated
    finally:
        server.stop()

    server = StandIn(env)
    try:
        # (a) The refresh token still works, and rotates.
        status, third = refresh(server, second["refresh_token"])
        assert status == 200, third
        assert third["refresh_token"] not in (first["refresh_token"], second["refresh_token"])
        claims = verify(server, third["access_token"])
        assert claims["session_id"] == first_session
        assert (claims["client_id"], claims["scope"], claims["sub"]) == (client_id, "email", str(user))
        assert refresh(server, second["refresh_token"])[1]["error"] == "invalid_grant"   # spent: a reuse
        assert admin.execute("select count(*) from auth.sessions where id = %s",
                             (claims["session_id"],)).fetchone()[0] == 0

        # (b) The code issued before the restart is exchanged, once.
        status, tokens = exchange(server, code, code_verifier)
        assert status == 200, tokens
        status, body = exchange(server, code, code_verifier)
        assert (status, body["error"]) == (400, "invalid_grant")
        assert refresh(server, tokens["refresh_token"])[1]["error"] == "invalid_grant"   # the reuse revoked it

        # (c) The pending requests are approved: the read one straight away (it is still
        # this user's), the other after its details are read, as the consent page does.
        status, body = server.json("POST", f"/auth/v1/oauth/authorizations/{read}/consent", {"action": "approve"},
                                   token=token)
        assert status == 200, body
        status, tokens = exchange(server, redirect_params(body["redirect_url"])["code"], read_verifier)
        assert status == 200 and tokens["scope"] == "openid email", tokens
        status, tokens = exchange(server, approve(server, token, unread)["code"], unread_verifier)
        assert status == 200 and tokens["scope"] == "email profile", tokens
        assert verify(server, tokens["access_token"])["scope"] == "email profile"

        # The browser phone stays signed in; a token spent before the restart ends its session.
        status, fresh = refresh_user(server, phone["refresh_token"])
        assert status == 200 and fresh["refresh_token"] != phone["refresh_token"], fresh
        status, body = refresh_user(server, stolen["refresh_token"])
        assert (status, body["error_code"]) == (400, "refresh_token_already_used")
        assert refresh_user(server, rotated["refresh_token"])[1]["error"] == "invalid_grant"
    finally:
        server.stop()


def test_codes_and_refresh_tokens_are_kept_in_supabases_tables(standin, flow, admin):
    """auth.oauth_authorizations holds the request (pending, then approved with its code),
    auth.refresh_tokens the refresh tokens (revoked once rotated out, `parent` the one
    replaced); codes and tokens as SHA-256 digests only. The session takes the
    authorization's id and its scopes."""
    verifier, challenge = pkce()
    resource = "https://relay.example/mcp"
    auth_id = authorization_id(standin, flow.client_id, challenge, resource=resource)
    columns = ("select status::text, user_id, client_id, redirect_uri, scope, state, resource, code_challenge,"
               " code_challenge_method::text, response_type::text, authorization_code, approved_at is not null,"
               " expires_at > now(), id from auth.oauth_authorizations where authorization_id = %s")
    row = admin.execute(columns, (auth_id,)).fetchone()
    assert row[:-1] == ("pending", None, uuid.UUID(flow.client_id), REDIRECT, "email", "st-1", resource, challenge,
                        "s256", "code", None, False, True)
    code = approve(standin, flow.token, auth_id)["code"]
    row = admin.execute(columns, (auth_id,)).fetchone()
    assert row[:2] == ("approved", flow.user) and row[10] == sha256_digest(code) and row[11:13] == (True, True)
    status, tokens = flow.exchange(code, verifier)
    assert status == 200, tokens
    session_id = verify(standin, tokens["access_token"])["session_id"]
    assert session_id == str(row[-1])
    assert admin.execute(columns, (auth_id,)).fetchone()[0] == "expired"   # spent, kept to catch a reuse
    assert admin.execute("select scopes from auth.sessions where id = %s", (session_id,)).fetchone() == ("email",)

    status, fresh = flow.refresh(tokens["refresh_token"])
    assert status == 200, fresh
    rows = admin.execute("select token, user_id, revoked, parent, instance_id::text from auth.refresh_tokens"
                         " where session_id = %s order by id", (session_id,)).fetchall()
    old, new = sha256_digest(tokens["refresh_token"]), sha256_digest(fresh["refresh_token"])
    nil = "00000000-0000-0000-0000-000000000000"
    assert rows == [(old, str(flow.user), True, None, nil), (new, str(flow.user), False, old, nil)]
    everything = admin.execute("select string_agg(token, ' ') from auth.refresh_tokens").fetchone()[0]
    assert tokens["refresh_token"] not in everything and fresh["refresh_token"] not in everything


def test_the_bounds_are_counted_in_the_database(standin, flow, admin):
    """1000 pending requests, 1000 codes, 10000 refresh tokens: counted in the database
    (shared by every stand-in on it); past them, temporarily_unavailable."""
    tokens = flow.tokens()
    waiting = authorization_id(standin, flow.client_id, pkce()[1], scope="openid email")
    filler = register(standin)["client_id"]
    fill = ("insert into auth.oauth_authorizations (id, authorization_id, client_id, redirect_uri, scope,"
            " code_challenge, code_challenge_method, status, authorization_code, expires_at)"
            " select gen_random_uuid(), 'filler-' || i, %s, %s, 'email', 'x', 's256', %s,"
            " case when %s = 'approved' then 'filler-code-' || i end, now() + interval '1 hour'"
            " from generate_series(1, 1000) i")
    try:
        admin.execute(fill, (filler, REDIRECT, "pending", "pending"))
        status, headers, _ = standin.request("GET", authorize_query(flow.client_id, pkce()[1]))
        assert status == 302 and redirect_params(headers["location"])["error"] == "temporarily_unavailable"
        admin.execute("delete from auth.oauth_authorizations where client_id = %s", (filler,))

        admin.execute(fill, (filler, REDIRECT, "approved", "approved"))
        params = approve(standin, flow.token, waiting)
        assert params["error"] == "temporarily_unavailable" and "code" not in params
        admin.execute("delete from auth.oauth_authorizations where client_id = %s", (filler,))

        admin.execute("insert into auth.refresh_tokens (token, revoked, created_at, updated_at)"
                      " select 'filler-' || i, false, now(), now() from generate_series(1, 10000) i")
        status, body = flow.refresh(tokens["refresh_token"])
        assert (status, body["error"]) == (503, "temporarily_unavailable")
    finally:
        admin.execute("delete from auth.refresh_tokens where token like 'filler-%'")
        admin.execute("delete from auth.oauth_clients where id = %s", (filler,))
    assert flow.tokens()["refresh_token"]


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


# -----------------------------------------------------------------------------
# Sign-in by magic link (the browser phone's emailLink, takeFragment, refresh)
# -----------------------------------------------------------------------------
OTP_EXPIRED = {"error": "access_denied", "error_code": "otp_expired",
               "error_description": "Email link is invalid or has expired"}


def new_email():
    return f"{uuid.uuid4().hex[:12]}@test.example"


def ask_link(server, email, redirect_to=None, **fields):
    """What session.js emailLink sends: redirect_to in the query, {email, create_user}, apikey."""
    path = "/auth/v1/otp"
    if redirect_to is not None:
        path += "?redirect_to=" + urllib.parse.quote(redirect_to, safe="")
    return server.json("POST", path, {"email": email, "create_user": True, **fields},
                       headers={"apikey": "anon-key", "Origin": SITE})


def mails_to(server, email):
    status, listing = server.mail("GET", "/api/v1/messages")
    assert status == 200
    return [m for m in listing["messages"] if [t["Address"] for t in m["To"]] == [email]]


def link_in_mail(server, email):
    """The sign-in link of the newest mail to `email` (from its Text; the HTML has it too)."""
    import html
    import re
    mine = mails_to(server, email)
    assert mine, "no mail to " + email
    status, mail = server.mail("GET", f"/api/v1/message/{mine[0]['ID']}")
    assert status == 200 and mail["ID"] == mine[0]["ID"] and mail["Subject"] == "Your Magic Link"
    (link,) = re.findall(r"http://\S+/auth/v1/verify\?\S+", mail["Text"])
    assert f'href="{html.escape(link)}"' in mail["HTML"]
    return link


def open_link(server, link):
    """Follows a sign-in link: (the URL it redirects to without the fragment, the fragment)."""
    parts = urllib.parse.urlsplit(link)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == server.issuer + "/verify"
    status, headers, _ = server.request("GET", f"{parts.path}?{parts.query}")
    assert status == 303, status
    url, _, fragment = headers["location"].partition("#")
    return url, dict(urllib.parse.parse_qsl(fragment, keep_blank_values=True))


def sign_in(server, email=None, state="st-app"):
    email = email or new_email()
    assert ask_link(server, email, f"{SITE}/app/?state={state}") == (200, {})
    url, fragment = open_link(server, link_in_mail(server, email))
    assert url == f"{SITE}/app/?state={state}" and "access_token" in fragment, fragment
    return email, fragment


def refresh_user(server, refresh_token):
    """What session.js refresh sends."""
    return server.json("POST", "/auth/v1/token?grant_type=refresh_token", {"refresh_token": refresh_token},
                       headers={"apikey": "anon-key", "Origin": SITE})


def test_magic_link_signs_in_by_the_implicit_flow(standin, admin):
    email = new_email()
    state = secrets.token_urlsafe(32)
    assert ask_link(standin, email, f"{SITE}/app/?state={state}") == (200, {})
    # A new user, not yet confirmed.
    user_id, confirmed, app_meta = admin.execute(
        "select id, email_confirmed_at, raw_app_meta_data from auth.users where email = %s", (email,)).fetchone()
    assert confirmed is None and app_meta["provider"] == "email"
    # The mail, in Mailpit's shape.
    status, listing = standin.mail("GET", "/api/v1/messages")
    assert status == 200 and listing["total"] >= 1 and listing["count"] == len(listing["messages"])
    (mail,) = mails_to(standin, email)
    assert mail["Subject"] == "Your Magic Link" and mail["From"]["Address"] and mail["Created"]
    link = link_in_mail(standin, email)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))
    assert query["type"] == "magiclink" and len(query["token"]) >= 40
    assert query["redirect_to"] == f"{SITE}/app/?state={state}"

    before = int(time.time())
    url, fragment = open_link(standin, link)
    assert url == f"{SITE}/app/?state={state}", "redirect_to's own query (the page's state) is kept"
    assert list(fragment) == ["access_token", "expires_at", "expires_in", "refresh_token", "token_type", "type"]
    assert (fragment["expires_in"], fragment["token_type"], fragment["type"]) == ("3600", "bearer", "magiclink")
    claims = verify(standin, fragment["access_token"])
    assert claims["sub"] == str(user_id) and claims["email"] == email and claims["iss"] == standin.issuer
    assert claims["aud"] == "authenticated" and claims["role"] == "authenticated" and claims["aal"] == "aal1"
    assert [a["method"] for a in claims["amr"]] == ["otp"] and before - 5 <= claims["amr"][0]["timestamp"]
    assert "client_id" not in claims and "scope" not in claims and claims["is_anonymous"] is False
    assert claims["exp"] == int(fragment["expires_at"]) == claims["iat"] + 3600
    session = admin.execute("select user_id, oauth_client_id, aal::text from auth.sessions where id = %s",
                            (claims["session_id"],)).fetchone()
    assert session == (user_id, None, "aal1")
    assert admin.execute("select email_confirmed_at is not null from auth.users where id = %s",
                         (user_id,)).fetchone()[0]
    # It is the user's own token: the consent and grants API take it.
    assert standin.json("GET", "/auth/v1/user/oauth/grants", token=fragment["access_token"]) == (200, [])

    # Refresh (session.js refresh): rotation, same session and account.
    status, fresh = refresh_user(standin, fragment["refresh_token"])
    assert status == 200, fresh
    assert fresh["token_type"] == "bearer" and fresh["expires_in"] == 3600
    assert fresh["refresh_token"] != fragment["refresh_token"]
    assert fresh["user"]["id"] == str(user_id) and fresh["user"]["email"] == email
    assert fresh["user"]["email_confirmed_at"]
    again = verify(standin, fresh["access_token"])
    assert again["sub"] == str(user_id) and again["session_id"] == claims["session_id"]
    assert again["exp"] == fresh["expires_at"] and "client_id" not in again
    assert [a["method"] for a in again["amr"]] == ["otp"]
    # The old refresh token is spent; presented again it ends the session (reuse).
    status, body = refresh_user(standin, fragment["refresh_token"])
    assert (status, body["error"], body["code"], body["error_code"]) == (
        400, "invalid_grant", 400, "refresh_token_already_used")
    assert admin.execute("select count(*) from auth.sessions where id = %s",
                         (claims["session_id"],)).fetchone()[0] == 0
    assert refresh_user(standin, fresh["refresh_token"])[1]["error"] == "invalid_grant"


def test_logout_ends_the_session_and_its_refresh(standin, admin, make_user):
    user_id, other_session, email = make_user(with_session=True)
    _, fragment = sign_in(standin, email)
    claims = verify(standin, fragment["access_token"])
    assert claims["sub"] == str(user_id), "an existing user signs in as themselves"
    assert admin.execute("select email_confirmed_at is not null from auth.users where id = %s",
                         (user_id,)).fetchone()[0]
    assert standin.json("POST", "/auth/v1/logout")[0] == 401
    status, _, body = standin.request("POST", "/auth/v1/logout", headers={
        "Authorization": "Bearer " + fragment["access_token"], "apikey": "anon-key"})
    assert (status, body) == (204, b"")
    assert admin.execute("select count(*) from auth.sessions where id = %s",
                         (claims["session_id"],)).fetchone()[0] == 0
    assert admin.execute("select count(*) from auth.sessions where id = %s",
                         (other_session,)).fetchone()[0] == 1, "only that session ends"
    status, body = refresh_user(standin, fragment["refresh_token"])
    assert (status, body["error"]) == (400, "invalid_grant")
    status, body = standin.json("POST", "/auth/v1/logout", token=fragment["access_token"])
    assert (status, body["error_code"]) == (403, "session_not_found")


def test_a_used_link_redirects_with_otp_expired(standin):
    email = new_email()
    assert ask_link(standin, email, f"{SITE}/app/?state=used") == (200, {})
    link = link_in_mail(standin, email)
    assert "access_token" in open_link(standin, link)[1]
    assert open_link(standin, link) == (f"{SITE}/app/?state=used", OTP_EXPIRED)
    # An unknown token: the same error, at redirect_to when it is allowed, else the site.
    app = urllib.parse.quote(f"{SITE}/app/?state=x", safe="")
    status, headers, _ = standin.request("GET", f"/auth/v1/verify?token=nope&type=magiclink&redirect_to={app}")
    assert status == 303 and headers["location"] == f"{SITE}/app/?state=x#" + urllib.parse.urlencode(OTP_EXPIRED)
    status, headers, _ = standin.request("GET", "/auth/v1/verify?token=nope&type=magiclink&redirect_to="
                                         + urllib.parse.quote("https://evil.example/", safe=""))
    assert status == 303 and headers["location"] == SITE + "#" + urllib.parse.urlencode(OTP_EXPIRED)


def test_an_expired_link_redirects_with_otp_expired():
    server = StandIn({"STANDIN_OTP_SECONDS": "1"})
    try:
        email = new_email()
        assert ask_link(server, email, f"{SITE}/app/?state=late") == (200, {})
        link = link_in_mail(server, email)
        time.sleep(1.2)
        assert open_link(server, link) == (f"{SITE}/app/?state=late", OTP_EXPIRED)
    finally:
        server.stop()


@pytest.mark.parametrize("redirect_to", [
    "https://evil.example/app/?state=x", "http://127.0.0.1:8081/app/", "https://127.0.0.1:8080/app/",
    "http://user@127.0.0.1:8080/app/", "http://127.0.0.1:8080/app/#frag", "//evil.example/app/", "/app/",
    "javascript:alert(1)", "http://127.0.0.1:8080/" + "a" * 2100, ""])
def test_a_redirect_to_on_another_origin_falls_back_to_the_site(standin, redirect_to):
    email = new_email()
    assert ask_link(standin, email, redirect_to) == (200, {})
    link = link_in_mail(standin, email)
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(link).query))["redirect_to"] == SITE
    url, fragment = open_link(standin, link)
    assert url == SITE and "access_token" in fragment


def test_redirect_to_in_the_body_and_none(standin):
    email = new_email()
    assert ask_link(standin, email, redirect_to=f"{SITE}/app/?state=b") == (200, {})  # the query one
    email = new_email()
    status, _ = standin.json("POST", "/auth/v1/otp", {"email": email, "redirect_to": f"{SITE}/app/?state=body"})
    assert status == 200
    assert open_link(standin, link_in_mail(standin, email))[0] == f"{SITE}/app/?state=body"
    email = new_email()
    assert standin.json("POST", "/auth/v1/otp", {"email": email}) == (200, {})
    assert open_link(standin, link_in_mail(standin, email))[0] == SITE
    # A repeated redirect_to is refused.
    status, body = standin.json("POST", "/auth/v1/otp?redirect_to=a&redirect_to=b", {"email": new_email()})
    assert (status, body["error_code"]) == (400, "validation_failed")


@pytest.mark.parametrize("payload", [
    {}, {"email": ""}, {"email": "   "}, {"email": 42}, {"email": None}, {"email": "not-an-email"},
    {"email": "a@b@test.example"}, {"email": "a b@test.example"}, {"email": "a@-test.example"},
    {"email": "x" * 250 + "@test.example"}, {"email": "a@test.example\n"[:-1] + "\r\nBcc: x@y.z"},
    {"email": ["a@test.example"]}, {"email": "ok@test.example", "create_user": "yes"},
    {"email": "ok@test.example", "data": "x"}, {"phone": "+15555550100"},
    {"email": "ok@test.example", "code_challenge": "c" * 43, "code_challenge_method": "s256"},
])
def test_a_bad_otp_request_is_refused(standin, payload):
    status, body = standin.json("POST", "/auth/v1/otp", payload)
    assert (status, body["code"], body["error_code"]) == (400, 400, "validation_failed"), body
    assert body["msg"]
    assert not mails_to(standin, "ok@test.example")


def test_otp_refuses_bodies_and_unknown_users_without_create_user(standin, admin):
    for body, ctype in ((b"email=a@test.example", "application/x-www-form-urlencoded"), (b"{", "application/json"),
                        (b"[1]", "application/json")):
        status, _, data = standin.request("POST", "/auth/v1/otp", body, {"Content-Type": ctype})
        assert (status, json.loads(data)["code"]) == (400, 400)
    email = new_email()
    status, body = standin.json("POST", "/auth/v1/otp", {"email": email, "create_user": False})
    assert (status, body["error_code"]) == (422, "otp_disabled")
    assert admin.execute("select count(*) from auth.users where email = %s", (email,)).fetchone()[0] == 0
    assert not mails_to(standin, email)


def test_verify_refusals(standin):
    for query in ("token=x", "token=x&type=signup", "type=magiclink", "token=&type=magiclink",
                  "token=x&token=y&type=magiclink"):
        status, _, data = standin.request("GET", "/auth/v1/verify?" + query)
        assert (status, json.loads(data)["error_code"]) == (400, "validation_failed"), query
    assert standin.request("POST", "/auth/v1/verify")[0] == 405


def test_otp_is_rate_limited_per_email(standin):
    email = new_email()
    assert ask_link(standin, email) == (200, {})
    for again in (email, email.upper()):
        status, body = ask_link(standin, again)
        assert (status, body["code"], body["error_code"]) == (429, 429, "over_email_send_rate_limit")
        assert "after 2 seconds" in body["msg"]
    assert ask_link(standin, new_email()) == (200, {}), "another address is not held up"
    assert len(mails_to(standin, email)) == 1


def test_the_rate_limit_is_configurable_and_a_new_link_replaces_the_last():
    server = StandIn({"STANDIN_OTP_INTERVAL_SECONDS": "1"})
    try:
        email = new_email()
        assert ask_link(server, email, f"{SITE}/app/?state=1") == (200, {})
        first = link_in_mail(server, email)
        assert ask_link(server, email)[0] == 429
        time.sleep(1.1)
        assert ask_link(server, email, f"{SITE}/app/?state=2") == (200, {})
        second = link_in_mail(server, email)
        assert second != first and len(mails_to(server, email)) == 2
        assert open_link(server, first) == (f"{SITE}/app/?state=1", OTP_EXPIRED)
        assert "access_token" in open_link(server, second)[1]
    finally:
        server.stop()


def test_user_refresh_refusals(standin, flow):
    _, fragment = sign_in(standin)
    for path, payload in (("/auth/v1/token", {"refresh_token": fragment["refresh_token"]}),
                          ("/auth/v1/token?grant_type=password", {"email": "a@test.example", "password": "x"})):
        status, body = standin.json("POST", path, payload)
        assert (status, body["error"], body["code"]) == (400, "unsupported_grant_type", 400)
    status, body = standin.json("POST", "/auth/v1/token?grant_type=refresh_token", {})
    assert (status, body["error"]) == (400, "invalid_request")
    status, _, data = standin.request("POST", "/auth/v1/token?grant_type=refresh_token",
                                      urllib.parse.urlencode({"refresh_token": fragment["refresh_token"]}).encode(),
                                      {"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, json.loads(data)["error"]) == (400, "invalid_request")
    status, body = refresh_user(standin, "not-a-token")
    assert (status, body["error"], body["error_code"]) == (400, "invalid_grant", "refresh_token_not_found")
    # An OAuth client's refresh token is not the user's, and the user's is not a client's.
    agent = flow.tokens()
    assert refresh_user(standin, agent["refresh_token"])[1]["error"] == "invalid_grant"
    assert flow.refresh(fragment["refresh_token"])[1]["error"] == "invalid_grant"
    # None of that spent them.
    assert refresh_user(standin, fragment["refresh_token"])[0] == 200
    assert flow.refresh(agent["refresh_token"])[0] == 200


def test_the_mailbox_api(standin):
    first, second = new_email(), new_email()
    assert ask_link(standin, first) == (200, {}) and ask_link(standin, second) == (200, {})
    status, listing = standin.mail("GET", "/api/v1/messages")
    assert [m["To"][0]["Address"] for m in listing["messages"][:2]] == [second, first], "newest first"
    assert standin.mail("GET", "/api/v1/messages?limit=1")[1]["count"] == 1
    assert standin.mail("GET", "/api/v1/message/nope")[0] == 404
    assert standin.mail("GET", "/api/v1/messages?limit=x")[0] == 400
    status, page = standin.mail("GET", "/")
    assert status == 200 and "Your Magic Link" in page
    # Only loopback Host names (no DNS rebinding), and no CORS: other pages cannot read links.
    assert standin.mail("GET", "/api/v1/messages", headers={"Host": "evil.example"})[0] == 403
    conn = http.client.HTTPConnection("127.0.0.1", standin.mailbox_port, timeout=10)
    conn.request("GET", "/api/v1/messages", headers={"Origin": "https://evil.example"})
    response = conn.getresponse()
    response.read()
    conn.close()
    assert response.getheader("Access-Control-Allow-Origin") is None
    # Delete some, then all.
    (mail,) = mails_to(standin, first)
    assert standin.mail("DELETE", "/api/v1/messages", json.dumps({"IDs": [mail["ID"]]}).encode()) == (200, "ok")
    assert not mails_to(standin, first) and mails_to(standin, second)
    assert standin.mail("DELETE", "/api/v1/messages") == (200, "ok")
    assert standin.mail("GET", "/api/v1/messages")[1]["total"] == 0


def test_the_mailbox_keeps_the_last_200_mails():
    server = StandIn()
    try:
        emails = [new_email() for _ in range(203)]
        for email in emails:
            assert ask_link(server, email) == (200, {})
        status, listing = server.mail("GET", "/api/v1/messages?limit=500")
        assert listing["total"] == 200 and listing["count"] == 200
        assert listing["messages"][0]["To"][0]["Address"] == emails[-1]
        assert listing["messages"][-1]["To"][0]["Address"] == emails[3]
    finally:
        server.stop()


def test_cors_for_the_sign_in_endpoints(standin):
    for path in ("/auth/v1/otp", "/auth/v1/token?grant_type=refresh_token", "/auth/v1/logout"):
        status, headers, _ = standin.request("OPTIONS", path, headers={
            "Origin": SITE, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "apikey, content-type"})
        assert status == 204 and headers["access-control-allow-origin"] == "*"
        assert "apikey" in headers["access-control-allow-headers"]
    status, headers, _ = standin.request("POST", "/auth/v1/otp", json.dumps({"email": new_email()}).encode(),
                                         {"Content-Type": "application/json", "Origin": SITE})
    assert status == 200 and headers["access-control-allow-origin"] == "*"


def test_a_banned_user_gets_no_link_and_a_refused_request_does_not_hold_the_address(standin, admin, make_user):
    user_id, _, email = make_user(with_session=True)
    admin.execute("update auth.users set banned_until = now() + interval '1 hour' where id = %s", (user_id,))
    status, body = ask_link(standin, email)
    assert (status, body["error_code"]) == (403, "user_banned") and not mails_to(standin, email)
    # Banned after the link was sent: the link no longer signs in.
    user_id, _, email = make_user(with_session=True)
    assert ask_link(standin, email, f"{SITE}/app/?state=b") == (200, {})
    admin.execute("update auth.users set banned_until = now() + interval '1 hour' where id = %s", (user_id,))
    assert open_link(standin, link_in_mail(standin, email)) == (f"{SITE}/app/?state=b", OTP_EXPIRED)
    # otp_disabled (no such user, create_user false) does not count against the rate limit.
    email = new_email()
    assert ask_link(standin, email, create_user=False)[0] == 422
    assert ask_link(standin, email) == (200, {})
