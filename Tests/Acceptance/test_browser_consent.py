"""The OAuth consent page of the browser phone (docs/agents.md "Signing in") at /app/oauth/consent,
in Debian's real Chromium driven by Playwright against a real `whereabot serve`, for both
flows: the relay's own authorization server (`?request=<uuid>`, at the end of this file:
the relay's real consent API) and Supabase Auth's (`?authorization_id=…`). For the latter,
Supabase Auth's consent API is a small fake here with the shapes auth-js uses (GET
/auth/v1/oauth/authorizations/{id} → details or {redirect_url}; POST …/{id}/consent
{"action"} → {redirect_url}), CORS as Supabase answers it, and it checks every request's
bearer token and apikey. Hostile input: a client name with HTML, a redirect URI with
userinfo or an IDN lookalike host, a 10 kB authorization id, request ids that are not UUIDs."""
import json
import re
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from playwright.sync_api import expect

import oauth_kit
from oauth_kit import httpx
from relay_server import SECRET, RelayServer
from test_browser_phone import browser  # noqa: F401 (fixture)

ANON = "anon-key-for-tests"
HOSTILE_NAME = 'Claude <img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


class FakeAuth:
    """Supabase Auth's consent API, strict about what the page sends."""

    def __init__(self):
        self.requests, self.token = [], None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def cors(self):
                self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin", "*"))
                self.send_header("Access-Control-Allow-Headers", "authorization, apikey, content-type, x-client-info")
                self.send_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.cors()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_OPTIONS(self):
                self.send_response(204)
                self.cors()
                self.end_headers()

            def do_GET(self):
                if self.path.startswith("/callback"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.end_headers()
                    self.wfile.write(b"the agent got it")
                    return
                self.api("GET", None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                self.api("POST", json.loads(self.rfile.read(length) or b"null"))

            def api(self, method, body):
                fake.requests.append((method, self.path, body))
                if self.headers.get("apikey") != ANON or self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self.reply(401, {"code": 401, "error_code": "bad_jwt", "msg": "invalid JWT"})
                prefix = "/auth/v1/oauth/authorizations/"
                if not self.path.startswith(prefix):
                    return self.reply(404, {"msg": "not found"})
                rest = self.path[len(prefix):]
                authorization, _, action = rest.partition("/")
                callback = f"{fake.base}/callback"
                if authorization == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                uris = {"good": callback, "userinfo": "https://agent@evil.example/cb", "idn": "https://exаmple.com/cb"}
                if authorization == "issue2820" and method == "GET":  # Supabase Auth's answer (supabase/auth#2820)
                    return self.reply(400, {"code": 400, "error_code": "validation_failed",
                                            "msg": "authorization request cannot be processed"})
                if authorization == "consented" and method == "GET":
                    return self.reply(200, {"redirect_url": f"{callback}?code=earlier&state=s1"})
                if authorization not in uris:
                    return self.reply(404, {"code": 404, "error_code": "oauth_authorization_not_found", "msg": "not found"})
                if method == "GET" and not action:
                    return self.reply(200, {"authorization_id": authorization, "redirect_uri": uris[authorization],
                                            "client": {"id": str(uuid.uuid4()), "name": HOSTILE_NAME, "uri": "", "logo_uri": ""},
                                            "user": {"id": str(uuid.uuid4()), "email": "grace@example.com"},
                                            "scope": "openid email"})
                if method == "POST" and action == "consent" and body in ({"action": "approve"}, {"action": "deny"}):
                    query = "code=fresh&state=s2" if body["action"] == "approve" else "error=access_denied&state=s2"
                    return self.reply(200, {"redirect_url": f"{callback}?{query}"})
                return self.reply(400, {"msg": "bad request"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def auth():
    fake = FakeAuth()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def relay(auth):
    server = RelayServer(SUPABASE_URL=auth.base, SUPABASE_ANON_KEY=ANON)
    yield server
    server.stop()


def page_signed_in(browser, auth, signed_in=True):
    now = int(time.time())
    token = jwt.encode({"sub": str(uuid.uuid4()), "email": "grace@example.com", "aud": "authenticated", "role": "authenticated",
                        "session_id": str(uuid.uuid4()), "iat": now, "exp": now + 3600}, SECRET, algorithm="HS256")
    auth.token = token
    context = browser.new_context()
    if signed_in:
        context.add_init_script(f"localStorage.setItem('whereabot.session', JSON.stringify({json.dumps({'access_token': token, 'expires_at': now + 3600})}))")
    return context, context.new_page()


def consent_url(relay, authorization):
    return f"{relay.base}/app/oauth/consent?authorization_id={authorization}"


@pytest.mark.parametrize("button, query", [("#consent-approve", "code=fresh&state=s2"), ("#consent-deny", "error=access_denied&state=s2")])
def test_approve_and_deny_follow_the_redirect_the_api_returns(browser, auth, relay, button, query):
    context, page = page_signed_in(browser, auth)
    try:
        auth.requests.clear()
        page.goto(consent_url(relay, "good"))
        expect(page.locator("#consent-ask")).to_be_visible(timeout=10000)
        expect(page.locator("#consent-client")).to_have_text(HOSTILE_NAME[:100])
        expect(page.locator("#consent-text")).to_have_text(
            f"{HOSTILE_NAME[:100]} will be able to ask for your location. You are asked every time unless you choose Always allow.")
        expect(page.locator("#consent-host")).to_have_text(auth.base.removeprefix("http://"))
        expect(page.locator("#consent-email")).to_have_text("grace@example.com")
        assert page.locator("main img, main script").count() == 0 and page.evaluate("window.pwned") is None
        expect(page.locator(button)).to_have_text("Approve" if "approve" in button else "Deny")
        page.click(button)
        page.wait_for_url(f"{auth.base}/callback?{query}", timeout=10000)
        assert ("POST", "/auth/v1/oauth/authorizations/good/consent",
                {"action": "approve" if "approve" in button else "deny"}) in auth.requests
    finally:
        context.close()


def test_an_earlier_consent_redirects_at_once(browser, auth, relay):
    context, page = page_signed_in(browser, auth)
    try:
        page.goto(consent_url(relay, "consented"))
        page.wait_for_url(f"{auth.base}/callback?code=earlier&state=s1", timeout=10000)
    finally:
        context.close()


def test_not_signed_in_asks_to_sign_in_and_comes_back(browser, auth, relay):
    context, page = page_signed_in(browser, auth, signed_in=False)
    try:
        auth.requests.clear()
        page.goto(consent_url(relay, "good"))
        expect(page.locator("#consent-signin")).to_be_visible(timeout=10000)
        stored = json.loads(page.evaluate("localStorage.getItem('whereabot.return_to')"))
        assert stored["path"] == "/app/oauth/consent?authorization_id=good"
        assert auth.requests == []
    finally:
        context.close()


def test_hostile_redirect_uris_ids_and_errors(browser, auth, relay):
    context, page = page_signed_in(browser, auth)
    try:
        page.goto(consent_url(relay, "userinfo"))
        expect(page.locator("#consent-warning")).to_be_visible(timeout=10000)
        expect(page.locator("#consent-approve")).to_be_disabled()
        expect(page.locator("#consent-host")).to_have_text("evil.example")
        page.goto(consent_url(relay, "idn"))
        expect(page.locator("#consent-host")).to_have_text("xn--exmple-4nf.com", timeout=10000)  # the lookalike, spelled out
        auth.requests.clear()
        # 10 kB: over the relay's start-line limit, refused before any page loads.
        assert page.goto(consent_url(relay, "A" * 10_000)).status == 400
        page.goto(consent_url(relay, "A" * 2_000))  # loads, and the page refuses it
        expect(page.locator("#consent-error-text")).to_have_text(
            "This link to connect an agent is not valid. Start again from your agent.", timeout=10000)
        page.goto(consent_url(relay, "%3Cscript%3E"))
        expect(page.locator("#consent-error")).to_be_visible(timeout=10000)
        assert auth.requests == []  # refused before any request
        page.goto(consent_url(relay, "expired"))
        expect(page.locator("#consent-error-text")).to_have_text(
            "This request to connect an agent has expired or was already answered. Start again from your agent.", timeout=10000)
        page.goto(consent_url(relay, "drop"))
        expect(page.locator("#consent-error-text")).to_have_text("Could not reach the sign-in service. Check your connection.",
                                                                 timeout=10000)
        expect(page.locator("#consent-retry")).to_be_visible()
    finally:
        context.close()


def test_supabases_known_refusal_is_explained_to_the_person_and_the_operator(browser, auth, relay):
    """supabase/auth#2820: the real OAuth server answers 400 "authorization request cannot
    be processed" for requests with `resource` or `offline_access`, or from public clients.
    The page says so in words and where the operator looks, instead of "expired"."""
    context, page = page_signed_in(browser, auth)
    try:
        page.goto(consent_url(relay, "issue2820"))
        expect(page.locator("#consent-error-text")).to_have_text(
            "Supabase Auth refused this request to connect an agent: its OAuth server cannot yet handle agents that ask"
            " for a resource or for offline access, or that register as public clients. Trying again will not help. The"
            " operator of this relay can see what to change in docs/deploy.md (\u201cAgents Supabase's OAuth server"
            " refuses\u201d); meanwhile, connect this agent with an agent key from your account page.", timeout=10000)
        expect(page.locator("#consent-retry")).to_be_hidden()
    finally:
        context.close()


# ------------------------------------------------------------------ the relay's own flow
# /oauth/authorize on the relay → 302 to /app/oauth/consent?request=<uuid>; the page reads
# GET /oauth/consent/{id} and answers POST /oauth/consent/{id} with the person's token.


def person_token(auth, user, session, email):
    """A Supabase-shaped session token as this relay checks it (its issuer is the project's
    Auth: SUPABASE_URL + /auth/v1)."""
    now = int(time.time())
    return jwt.encode({"sub": str(user), "email": email, "aud": "authenticated", "role": "authenticated",
                       "session_id": str(session), "iss": auth.base + "/auth/v1", "iat": now, "exp": now + 3600},
                      SECRET, algorithm="HS256")


def relay_person(make_user, auth):
    """A person with a session the relay checks, and their token (a phone credential)."""
    user, session, email = make_user(with_session=True)
    return email, person_token(auth, user, session, email)


def relay_page(browser, bearer):
    context = browser.new_context()
    if bearer:
        context.add_init_script("localStorage.setItem('whereabot.session', " + json.dumps(json.dumps(
            {"access_token": bearer, "expires_at": int(time.time()) + 3600})) + ")")
    page = context.new_page()
    returned = []

    def back_at_the_client(route):
        returned.append(route.request.url)
        route.fulfill(body="You can close this window.")

    page.route(oauth_kit.REDIRECT + "**", back_at_the_client)
    return context, page, returned


def authorize_url(relay, client_id, challenge, state):
    return relay.base + "/oauth/authorize?" + urllib.parse.urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": oauth_kit.REDIRECT, "code_challenge": challenge,
        "code_challenge_method": "S256", "state": state, "resource": relay.base + "/mcp"})


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_the_relays_own_flow_approve_and_deny_return_to_the_agent(browser, auth, relay, make_user, action):
    """The browser follows the relay's /oauth/authorize to the page, which shows the
    client's name as text, its host and the person's email; Approve returns to the agent's
    redirect URI with a code that redeems, the state and iss; Deny with access_denied."""
    email, bearer = relay_person(make_user, auth)
    client = oauth_kit.register(relay.base, client_name=HOSTILE_NAME).json()
    client_id, name = client["client_id"], client["client_name"]
    assert name.startswith("Claude <img src=x onerror=")  # kept as sent, only shortened
    verifier, challenge = oauth_kit.pkce()
    state = "st-" + uuid.uuid4().hex[:8]
    context, page, returned = relay_page(browser, bearer)
    try:
        page.goto(authorize_url(relay, client_id, challenge, state))
        expect(page.locator("#consent-ask")).to_be_visible(timeout=10000)
        assert re.fullmatch(re.escape(relay.base) + r"/app/oauth/consent\?request=[0-9a-f-]{36}", page.url), page.url
        expect(page.locator("#consent-client")).to_have_text(name)
        expect(page.locator("#consent-text")).to_have_text(
            f"{name} will be able to ask for your location. You are asked every time unless you choose Always allow.")
        expect(page.locator("#consent-host")).to_have_text("127.0.0.1:9")
        expect(page.locator("#consent-email")).to_have_text(email)
        expect(page.locator("#consent-warning")).to_be_hidden()
        assert page.locator("main img, main script").count() == 0 and page.evaluate("window.pwned") is None
        with page.expect_request(lambda request: request.method == "POST" and "/oauth/consent/" in request.url) as sent:
            page.click(f"#consent-{action}")
        decision = sent.value.post_data_json
        assert decision["action"] == action and isinstance(decision["consent_token"], str)
        assert sent.value.headers["authorization"] == "Bearer " + bearer
        page.wait_for_url(oauth_kit.REDIRECT + "?**", timeout=10000)
        query = oauth_kit.query_of(returned[0])
        assert query["state"] == state and query["iss"] == relay.base
        if action == "approve":
            assert set(query) == {"code", "state", "iss"}
            tokens = oauth_kit.redeem(relay.base, client_id, query["code"], verifier)
            status = httpx.post(relay.base + "/v1/locate?timeout_secs=1", headers={"Authorization": "Bearer " + tokens["access_token"]}).status_code
            assert status == 503  # the agent's token is good: only no phone is connected
        else:
            assert query["error"] == "access_denied" and "code" not in query
    finally:
        context.close()


def test_the_relays_own_flow_signed_out_or_refused_session_asks_to_sign_in_and_comes_back(browser, auth, relay, make_user):
    """Signed out (nothing stored), the page stores where to come back and asks to sign in;
    a stored session the relay refuses (401) does the same. Signing in with a link then
    brings the person back to the request, which is shown."""
    email, bearer = relay_person(make_user, auth)
    client_id = oauth_kit.register(relay.base, client_name="Test Agent").json()["client_id"]
    _, challenge = oauth_kit.pkce()
    location, _ = oauth_kit.consent_location(relay.base, client_id, challenge, "st-1")
    refused = person_token(auth, uuid.uuid4(), uuid.uuid4(), "nobody@example.com")  # no such session
    for stored in (None, refused):
        context, page, _ = relay_page(browser, stored)
        try:
            page.goto(relay.base + location)
            expect(page.locator("#consent-signin")).to_be_visible(timeout=10000)
            expect(page.locator("#consent-ask")).to_be_hidden()
            stored_return = json.loads(page.evaluate("localStorage.getItem('whereabot.return_to')"))
            assert stored_return["path"] == location
            if stored is None:
                # Signed in with an --app-link style link (after its confirmation): back here.
                page.goto(f"{relay.base}/app/#access_token={bearer}&token_type=bearer&expires_in=3600&whereabot_link=1")
                expect(page.locator("#confirm-text")).to_have_text(f"Sign in as {email} on this browser?", timeout=10000)
                page.click("#confirm-signin")
                page.wait_for_url(relay.base + location, timeout=10000)
                expect(page.locator("#consent-ask")).to_be_visible(timeout=10000)
                expect(page.locator("#consent-client")).to_have_text("Test Agent")
        finally:
            context.close()


def test_the_relays_own_flow_unknown_decided_and_invalid_requests(browser, auth, relay, make_user):
    """An unknown or already decided request says it expired (no retry); an id that is not a
    UUID is refused before any request; a client with no name is "An agent"."""
    email, bearer = relay_person(make_user, auth)
    client_id = oauth_kit.register(relay.base, client_name=None).json()["client_id"]
    _, challenge = oauth_kit.pkce()
    location, request = oauth_kit.consent_location(relay.base, client_id, challenge, "st-1")
    context, page, _ = relay_page(browser, bearer)
    asked = []
    page.on("request", lambda r: asked.append(r.url) if "/oauth/consent/" in r.url else None)
    try:
        page.goto(relay.base + location)
        expect(page.locator("#consent-text")).to_have_text(
            "An agent will be able to ask for your location. You are asked every time unless you choose Always allow.",
            timeout=10000)
        expect(page.locator("#consent-client")).to_have_text("An agent")
        # Decided elsewhere (the API, as another tab would) before this page answers.
        oauth_kit.consent(relay.base, request, bearer, action="deny")
        page.click("#consent-approve")
        expect(page.locator("#consent-error-text")).to_have_text(
            "This request to connect an agent has expired or was already answered. Start again from your agent.", timeout=10000)
        expect(page.locator("#consent-retry")).to_be_hidden()
        page.goto(f"{relay.base}/app/oauth/consent?request={uuid.uuid4()}")
        expect(page.locator("#consent-error-text")).to_have_text(
            "This request to connect an agent has expired or was already answered. Start again from your agent.", timeout=10000)
        asked.clear()
        for bad in ("not-a-uuid", "%3Cscript%3E", "A" * 2000):
            page.goto(f"{relay.base}/app/oauth/consent?request={bad}")
            expect(page.locator("#consent-error-text")).to_have_text(
                "This link to connect an agent is not valid. Start again from your agent.", timeout=10000)
        assert asked == []  # refused before any request
    finally:
        context.close()
