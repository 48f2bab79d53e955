"""The relay's own OAuth 2.1 authorization server (Sources/Relay/OAuth) driven with plain
HTTP from Python, for the browser tests: register a public client, authorize with PKCE S256
(the request id read from the 302, not followed), the person's consent through the relay's
consent API, and the code redeemed at the token endpoint."""
import base64
import hashlib
import http.client
import json
import secrets
import urllib.parse

REDIRECT = "http://127.0.0.1:9/cb"


def call(relay, method, path, body=None, form=None, bearer=None):
    """One request to `relay`: (status, headers with lower-case names, JSON body or bytes)."""
    headers = {"Authorization": "Bearer " + bearer} if bearer else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body), "application/json"
    if form is not None:
        data, headers["Content-Type"] = urllib.parse.urlencode(form), "application/x-www-form-urlencoded"
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return response.status, {name.lower(): value for name, value in response.getheaders()}, parsed
    finally:
        conn.close()


def pkce():
    verifier = secrets.token_urlsafe(48)
    return verifier, base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def register(relay, name="Test Agent"):
    """A public client (dynamic registration): the registration response (its client_id, and
    its client_name as the relay keeps it: cleaned and shortened)."""
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"]}
    if name is not None:
        body["client_name"] = name
    status, _, client = call(relay, "POST", "/oauth/register", body)
    assert status == 201, client
    return client


def authorize(relay, client_id, challenge, state):
    """GET /oauth/authorize (not followed): the consent page's path and the request id."""
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "code_challenge": challenge,
        "code_challenge_method": "S256", "state": state, "resource": relay.base + "/mcp"})
    status, headers, body = call(relay, "GET", "/oauth/authorize?" + query)
    assert status == 302, body
    location = headers["location"]
    assert location.startswith("/app/oauth/consent?request="), location
    return location, urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)["request"][0]


def redirect_query(url):
    """The query of a redirect back to REDIRECT, one value per name."""
    parts = urllib.parse.urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == REDIRECT, url
    return {name: values[0] for name, values in urllib.parse.parse_qs(parts.query).items()}


def redeem(relay, client_id, code, verifier):
    """POST /oauth/token with the code: the token response."""
    status, _, tokens = call(relay, "POST", "/oauth/token", form={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier,
        "client_id": client_id})
    assert status == 200, tokens
    return tokens


def connect_agent(relay, person_bearer, name="Test Agent"):
    """An agent registered, approved by the person (the consent API as the page uses it) and
    given its tokens: (client_id, access token)."""
    client_id = register(relay, name)["client_id"]
    verifier, challenge = pkce()
    state = "st-" + secrets.token_hex(4)
    _, request = authorize(relay, client_id, challenge, state)
    status, _, details = call(relay, "GET", f"/oauth/consent/{request}", bearer=person_bearer)
    assert status == 200, details
    assert details["client_name"] == name and details["client_host"] == "127.0.0.1:9"
    status, _, decided = call(relay, "POST", f"/oauth/consent/{request}", bearer=person_bearer,
                              body={"action": "approve", "consent_token": details["consent_token"]})
    assert status == 200, decided
    query = redirect_query(decided["redirect_url"])
    assert query["state"] == state and query["iss"] == relay.base
    return client_id, redeem(relay, client_id, query["code"], verifier)["access_token"]
