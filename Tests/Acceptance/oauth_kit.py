"""The relay's own authorization server (docs/agents.md, "Signing in") driven with plain
HTTP (httpx), as a client nobody here wrote would: register, authorize with PKCE, the
person's consent through the relay's consent API, the token endpoint."""
import base64
import hashlib
import hmac
import secrets
import time
import urllib.parse

import httpx2 as httpx
import jwt
import psycopg

from conftest import ADMIN_URL
import relay_server

REDIRECT = "http://127.0.0.1:9/callback"


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def user_token(user, session, email):
    """The person's Supabase session token (a phone credential: no client_id)."""
    return relay_server.token(user, session, email)


def register(base, **fields):
    """POST /oauth/register of a public client (a field given as None is left out)."""
    body = {"redirect_uris": [REDIRECT], "client_name": "Test Agent", "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], **fields}
    body = {name: value for name, value in body.items() if value is not None}
    return httpx.post(base + "/oauth/register", json=body, timeout=10)


def authorize(base, client, challenge, /, **params):
    query = {"response_type": "code", "client_id": client, "redirect_uri": REDIRECT, "code_challenge": challenge,
             "code_challenge_method": "S256", "state": "st-" + secrets.token_hex(4), "resource": base + "/mcp", **params}
    query = {name: value for name, value in query.items() if value is not None}
    return httpx.get(base + "/oauth/authorize", params=query, timeout=10)


def consent_location(base, client, challenge, state):
    """The consent page's path an authorization request sends the browser to, and its id."""
    response = authorize(base, client, challenge, state=state)
    return response.headers["location"], request_id(response)


def request_id(response):
    assert response.status_code == 302, (response.status_code, response.text)
    location = response.headers["location"]
    assert location.startswith("/app/oauth/consent?request="), location
    return location.split("=", 1)[1]


def consent(base, request, bearer, action="approve"):
    headers = {"Authorization": "Bearer " + bearer}
    details = httpx.get(f"{base}/oauth/consent/{request}", headers=headers, timeout=10)
    assert details.status_code == 200, details.text
    decided = httpx.post(f"{base}/oauth/consent/{request}", headers=headers, timeout=10,
                         json={"action": action, "consent_token": details.json()["consent_token"]})
    assert decided.status_code == 200, decided.text
    return details.json(), decided.json()["redirect_url"]


def query_of(url):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def token(base, **form):
    return httpx.post(base + "/oauth/token", data=form, timeout=10)


def redeem(base, client_id, code, verifier):
    """The token response for a code (which must redeem)."""
    answer = token(base, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=verifier,
                   client_id=client_id)
    assert answer.status_code == 200, answer.text
    return answer.json()


def connect_agent(base, person_bearer, name="Test Agent"):
    """An agent registered, approved by the person through the consent API (as the page uses
    it) and given its tokens: (client_id, access token)."""
    client_id = register(base, client_name=name).json()["client_id"]
    verifier, challenge = pkce()
    state = "st-" + secrets.token_hex(4)
    details, redirect = consent(base, request_id(authorize(base, client_id, challenge, state=state)), person_bearer)
    assert details["client_name"] == name and details["client_host"] == "127.0.0.1:9"
    query = query_of(redirect)
    assert redirect.startswith(REDIRECT + "?") and query["state"] == state and query["iss"] == base
    return client_id, redeem(base, client_id, query["code"], verifier)["access_token"]


def sign_in(base, who, client_id=None, scope="location offline_access", resource=None, **register_fields):
    """The whole flow for `who` = (user, session, email): the client (registered unless
    given), its code, and the token response."""
    if client_id is None:
        registered = register(base, **register_fields)
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
    verifier, challenge = pkce()
    request = request_id(authorize(base, client_id, challenge, scope=scope,
                                   resource=resource if resource is not None else base + "/mcp"))
    _, redirect = consent(base, request, user_token(*who))
    code = query_of(redirect)["code"]
    answer = token(base, grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=verifier,
                   client_id=client_id)
    assert answer.status_code == 200, answer.text
    return client_id, answer.json()


def age_registrations():
    """Moves every registration of a client more than an hour back, so that the per-address
    budget (20 an hour) counts only what the next test registers."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        conn.execute("update private.oauth_clients set created_at = created_at - interval '2 hours'")


def signing_key():
    """The key the relay signs its access tokens with (derived from the secret it reads)."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as conn:
        secret = conn.execute("select private.agent_key_secret()").fetchone()[0]
    return hmac.new(bytes(secret), b"whereabot oauth access token v1", hashlib.sha256).digest()


def mcp_status(base, access_token):
    """The status of an MCP tools/list with `access_token`."""
    response = httpx.post(base + "/mcp", timeout=10, headers={
        "Authorization": "Bearer " + access_token, "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    return response.status_code


def refused_within(seconds, *checks):
    """Whether every check (a callable → status) answers 401 within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(check() == 401 for check in checks):
            return True
        time.sleep(0.2)
    return False


def decode(access_token, audience):
    return jwt.decode(access_token, signing_key(), algorithms=["HS256"], audience=audience)
