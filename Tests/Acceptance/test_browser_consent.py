"""The OAuth consent page of the browser phone (issue 26, SPEC §12) at
/app/oauth/consent?authorization_id=…, in Debian's real Chromium driven by Playwright
against a real `whereabot serve`. Supabase Auth's consent API is a small fake here with the
shapes auth-js uses (GET /auth/v1/oauth/authorizations/{id} → details or {redirect_url};
POST …/{id}/consent {"action"} → {redirect_url}), CORS as Supabase answers it, and it
checks every request's bearer token and apikey. Hostile input: a client name with HTML, a
redirect URI with userinfo or an IDN lookalike host, a 10 kB authorization id."""
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from playwright.sync_api import expect

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
