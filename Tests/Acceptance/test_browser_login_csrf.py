"""Login CSRF on the browser phone (docs/protocol.md "Signing in the browser") and the browser phone
deleting its Web Push subscription at sign-out, in Debian's real Chromium driven
by Playwright (never `playwright install`), against real `whereabot serve` processes.

The page takes a token from a URL only for a sign-in it started itself (a random `state` it
stored, sent in redirect_to and consumed on return) or, for `whereabot token --app-link`
links (marked `whereabot_link=1`), after a confirmation naming the account; it shows the
signed-in email in the header and never switches accounts without a confirmation naming
both. Supabase Auth is a small fake here: `/authorize` and `/verify` redirect to
redirect_to with the implicit-flow fragment, as Supabase does."""
import json
import os
import subprocess
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from playwright.sync_api import expect

from conftest import ADMIN_URL
from push_kit import wait_for
from relay_server import BINARY, SECRET, RelayServer, token
# Debian's chromium, the fake push services and a relay with Web Push on are the browser
# phone tests' fixtures (module-scoped: this module gets instances of its own).
from test_browser_phone import browser, confirm_sign_in, new_page, push, relay, show_view  # noqa: F401 (fixtures)

REFUSED = "A sign-in link this page did not ask for was ignored."


class FakeAuth:
    """Supabase Auth's redirects, as the page uses them (docs/protocol.md "Signing in the browser"): GET /auth/v1/authorize
    (Google) and GET /auth/v1/verify (the emailed link) redirect to redirect_to with
    `#access_token=…&refresh_token=…`; POST /auth/v1/otp records the email and redirect_to.
    Tokens are signed like Supabase's (HS256, iss SUPABASE_URL/auth/v1) for `self.user`."""

    def __init__(self):
        self.requests = []   # (path, query, body, headers)
        self.returned = []   # every URL the fake sent the browser back to
        self.user = None     # (user_id, session_id, email) that "Google" and the email sign in
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def cors(self):
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Access-Control-Allow-Headers", "content-type, apikey")
                self.send_header("Access-Control-Allow-Methods", "POST, GET, OPTIONS")

            def do_OPTIONS(self):
                self.send_response(204)
                self.cors()
                self.end_headers()

            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(url.query))
                fake.requests.append((url.path, query, None, dict(self.headers)))
                if url.path not in ("/auth/v1/authorize", "/auth/v1/verify") or "redirect_to" not in query:
                    self.send_response(404)
                    self.end_headers()
                    return
                back = query["redirect_to"] + "#" + fake.fragment()
                fake.returned.append(back)
                self.send_response(302)
                self.send_header("Location", back)
                self.end_headers()

            def do_POST(self):
                url = urllib.parse.urlsplit(self.path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                fake.requests.append((url.path, dict(urllib.parse.parse_qsl(url.query)), body, dict(self.headers)))
                self.send_response(200 if url.path == "/auth/v1/otp" else 404)
                self.cors()
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def access_token(self):
        user, session, email = self.user
        now = int(time.time())
        return jwt.encode({"sub": str(user), "aud": "authenticated", "role": "authenticated", "email": email,
                           "session_id": str(session), "iat": now, "exp": now + 3600, "iss": self.base + "/auth/v1"},
                          SECRET, algorithm="HS256")

    def fragment(self):
        return urllib.parse.urlencode({"access_token": self.access_token(), "expires_at": int(time.time()) + 3600,
                                       "expires_in": 3600, "refresh_token": uuid.uuid4().hex, "token_type": "bearer",
                                       "type": "magiclink"}) + "&sb"

    def last(self, path):
        return next(r for r in reversed(self.requests) if r[0] == path)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def auth():
    fake = FakeAuth()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def supabase_relay(auth):
    server = RelayServer(SUPABASE_URL=auth.base, SUPABASE_ANON_KEY="anon-test-key")
    yield server
    if server.process.poll() is None:
        server.stop()


def unique(name):
    return f"{name}-{uuid.uuid4().hex[:8]}@example.com"


def app_link(relay, email):
    """The link the real `whereabot token --app-link` prints (it creates the user if needed)."""
    env = {**os.environ, "ADMIN_DATABASE_URL": ADMIN_URL, "SUPABASE_JWT_SECRET": SECRET}
    env.pop("SUPABASE_URL", None)
    link = subprocess.run([str(BINARY), "token", "--email", email, "--app-link", "--relay", relay.base], env=env,
                          capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    assert link.startswith(f"{relay.base}/app/#access_token=") and link.endswith("&whereabot_link=1"), link
    return link


def token_in(link):
    return urllib.parse.parse_qs(urllib.parse.urlsplit(link).fragment)["access_token"][0]


def sub_of(jwt_text):
    return jwt.decode(jwt_text, options={"verify_signature": False})["sub"]


def stored_session(page):
    return page.evaluate("JSON.parse(localStorage.getItem('whereabot.session'))")


def local_storage(page):
    return page.evaluate("Object.keys(localStorage).map(k => k + '=' + localStorage.getItem(k)).join('\\n')")


def foreign_link(base, access_token):
    """Implicit-flow fragment with no state and no mark: what an attacker sends."""
    return f"{base}/app/#access_token={access_token}&token_type=bearer&expires_in=3600&refresh_token=r{uuid.uuid4().hex}&sb"


def signed_in_with_link(browser, relay, email, **options):
    context, page = new_page(browser, **options)
    page.goto(app_link(relay, email))
    confirm_sign_in(page, email)
    expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
    expect(page.locator("#account")).to_have_text(email)
    return context, page


def devices_of(admin, user):
    return admin.execute("select id::text from public.devices where user_id = %s", (user,)).fetchall()


# -------------------------------------------------------------------------------------- (a)
def test_a_foreign_token_never_replaces_a_signed_in_session(browser, admin, make_user, relay):
    victim = unique("victim")
    context, page = signed_in_with_link(browser, relay, victim)
    try:
        victim_token = stored_session(page)["access_token"]
        attacker, attacker_session, attacker_email = make_user(email=unique("attacker"), with_session=True)
        forged = token(attacker, attacker_session, attacker_email)
        attack = foreign_link(relay.base, forged)
        # The same tab (only the fragment changes: no reload, a hashchange), then a new tab
        # of the signed-in browser (a link opened from a mail or chat).
        for opened in (page, context.new_page()):
            opened.goto(attack)
            expect(opened.locator("#notice")).to_contain_text(REFUSED, timeout=10000)
            expect(opened.locator("#status")).to_have_text("Connected", timeout=10000)
            expect(opened.locator("#account")).to_have_text(victim)
            expect(opened.locator("#confirm")).to_be_hidden()
            assert opened.evaluate("location.hash") == "" and opened.url == f"{relay.base}/app/"
            assert stored_session(opened)["access_token"] == victim_token
            assert forged not in local_storage(opened)
        time.sleep(0.5)
        assert devices_of(admin, attacker) == [], "the attacker's account never got this browser as a phone"
    finally:
        context.close()


# -------------------------------------------------------------------------------------- (b)
def test_b_a_fresh_browser_is_not_signed_in_by_a_foreign_link(browser, admin, make_user, relay):
    attacker, attacker_session, attacker_email = make_user(email=unique("attacker"), with_session=True)
    forged = token(attacker, attacker_session, attacker_email)
    context, page = new_page(browser)
    try:
        page.goto(foreign_link(relay.base, forged))
        expect(page.locator("#notice")).to_contain_text(REFUSED, timeout=10000)
        expect(page.locator("#signin")).to_be_visible()
        expect(page.locator("#status")).to_have_text("Signed out")
        expect(page.locator("#account")).to_be_hidden()
        expect(page.locator("#confirm")).to_be_hidden()
        assert page.evaluate("location.hash") == ""
        assert stored_session(page) is None and forged not in local_storage(page)
        time.sleep(0.5)
        assert devices_of(admin, attacker) == []
    finally:
        context.close()


# -------------------------------------------------------------------------------------- (c)
def test_c_an_app_link_signs_in_only_after_the_confirmation(browser, admin, relay):
    email = unique("link")
    link = app_link(relay, email)
    user = sub_of(token_in(link))
    context, page = new_page(browser)
    try:
        page.goto(link)
        expect(page.locator("#confirm-text")).to_have_text(f"Sign in as {email} on this browser?", timeout=10000)
        expect(page.locator("#confirm-signin")).to_have_text("Sign in")
        expect(page.locator("#confirm-cancel")).to_have_text("Cancel")
        expect(page.locator("#status")).to_have_text("Signed out")
        assert page.evaluate("location.hash") == ""
        assert stored_session(page) is None and token_in(link) not in local_storage(page)
        time.sleep(0.5)
        assert devices_of(admin, user) == [], "no socket before the confirmation"
        # Cancel discards the token: signed out, also after a reload.
        page.click("#confirm-cancel")
        expect(page.locator("#signin")).to_be_visible()
        expect(page.locator("#confirm")).to_be_hidden()
        expect(page.locator("#status")).to_have_text("Signed out")
        assert stored_session(page) is None and token_in(link) not in local_storage(page)
        page.reload()
        expect(page.locator("#signin")).to_be_visible()
        assert stored_session(page) is None
        # The same link again (here a same-document navigation): asks again; Sign in signs in.
        page.goto(link)
        expect(page.locator("#confirm-text")).to_have_text(f"Sign in as {email} on this browser?", timeout=10000)
        assert stored_session(page) is None
        page.click("#confirm-signin")
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#account")).to_have_text(email)
        assert sub_of(stored_session(page)["access_token"]) == user
        device = page.evaluate("localStorage.getItem('whereabot.device_id')")
        assert wait_for(lambda: devices_of(admin, user), 5) == [(device,)]
    finally:
        context.close()


# -------------------------------------------------------------------------------------- (d)
def test_d_switching_accounts_asks_naming_both(browser, admin, relay):
    victim, other = unique("victim"), unique("other")
    context, first = signed_in_with_link(browser, relay, victim)
    try:
        victim_token = stored_session(first)["access_token"]
        victim_device = first.evaluate("localStorage.getItem('whereabot.device_id')")
        link = app_link(relay, other)
        first.close()
        # A new tab of the signed-in browser: the confirmation names both; Cancel keeps the victim.
        page = context.new_page()
        page.goto(link)
        expect(page.locator("#confirm-text")).to_have_text(f"You are signed in as {victim}. Switch to {other}?",
                                                           timeout=10000)
        expect(page.locator("#confirm-signin")).to_have_text("Switch")
        expect(page.locator("#account")).to_have_text(victim)
        assert stored_session(page)["access_token"] == victim_token
        page.click("#confirm-cancel")
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#account")).to_have_text(victim)
        assert stored_session(page)["access_token"] == victim_token and token_in(link) not in local_storage(page)
        # The link again in the same tab: Switch signs the victim out and the other account in,
        # on a device id of its own (a device belongs to one account).
        page.goto(link)
        expect(page.locator("#confirm-text")).to_have_text(f"You are signed in as {victim}. Switch to {other}?",
                                                           timeout=10000)
        page.click("#confirm-signin")
        expect(page.locator("#account")).to_have_text(other, timeout=10000)
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        assert sub_of(stored_session(page)["access_token"]) == sub_of(token_in(link))
        device = page.evaluate("localStorage.getItem('whereabot.device_id')")
        assert device != victim_device
        assert wait_for(lambda: devices_of(admin, sub_of(token_in(link))), 5) == [(device,)]
        assert devices_of(admin, sub_of(victim_token)) == [(victim_device,)]
    finally:
        context.close()


# -------------------------------------------------------------------------------------- (e)
def test_e_a_sign_in_the_page_started_is_taken_once(browser, make_user, supabase_relay, auth):
    base = supabase_relay.base
    auth.user = make_user(email=unique("google"), with_session=True)
    email = auth.user[2]
    context, page = new_page(browser)
    try:
        page.goto(f"{base}/app/")
        expect(page.locator("#google")).to_be_visible(timeout=10000)
        page.click("#google")
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#account")).to_have_text(email)
        expect(page.locator("#confirm")).to_be_hidden()
        _, query, _, _ = auth.last("/auth/v1/authorize")
        assert query["provider"] == "google"
        redirect = urllib.parse.urlsplit(query["redirect_to"])
        state = urllib.parse.parse_qs(redirect.query)["state"][0]
        assert f"{redirect.scheme}://{redirect.netloc}{redirect.path}" == f"{base}/app/" and len(state) >= 43
        assert page.url == f"{base}/app/", "state and fragment are removed from the URL"
        assert page.evaluate("localStorage.getItem('whereabot.signin_states')") is None, "the state is consumed"
        returned = auth.returned[-1]
        assert returned.startswith(query["redirect_to"] + "#access_token=")
        # Replaying the very fragment Supabase returned (its state consumed) is refused.
        show_view(page, "account")
        page.click("#signout")
        expect(page.locator("#status")).to_have_text("Signed out", timeout=10000)
        page.goto(returned)
        expect(page.locator("#notice")).to_contain_text(REFUSED, timeout=10000)
        expect(page.locator("#signin")).to_be_visible()
        expect(page.locator("#confirm")).to_be_hidden()
        assert stored_session(page) is None and page.url == f"{base}/app/"
        # The email link: a new state in redirect_to (a query parameter, with the apikey).
        page.fill("#email", email)
        page.click("#email-form button[type=submit]")
        expect(page.locator("#email-sent")).to_be_visible(timeout=10000)
        _, otp_query, otp_body, otp_headers = auth.last("/auth/v1/otp")
        assert otp_body["email"] == email and otp_headers.get("apikey") == "anon-test-key"
        emailed_state = urllib.parse.parse_qs(urllib.parse.urlsplit(otp_query["redirect_to"]).query)["state"][0]
        assert emailed_state != state and len(emailed_state) >= 43
        emailed = f"{auth.base}/auth/v1/verify?token=t{uuid.uuid4().hex}&type=magiclink&redirect_to=" \
                  + urllib.parse.quote(otp_query["redirect_to"], safe="")
        # Another browser cannot use it: the state lives in the browser that asked.
        other_context, other = new_page(browser)
        try:
            other.goto(emailed)
            expect(other.locator("#notice")).to_contain_text(REFUSED, timeout=10000)
            expect(other.locator("#signin")).to_be_visible()
            assert stored_session(other) is None
        finally:
            other_context.close()
        # The browser that asked signs in without a confirmation.
        page.goto(emailed)
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#account")).to_have_text(email)
        expect(page.locator("#confirm")).to_be_hidden()
        assert page.url == f"{base}/app/"
        assert sub_of(stored_session(page)["access_token"]) == str(auth.user[0])
    finally:
        context.close()


# -------------------------------------------------------------------------------------- (f)
def counting_subscription_stub(endpoint, p256dh, auth_secret):
    """subscribe() resolves a fake subscription (Playwright contexts reach no push service);
    unsubscribe() is counted in localStorage and makes getSubscription() null again."""
    return """
      (() => {
        if (!self.PushManager) return;
        const sub = {endpoint: %s, keys: {p256dh: %s, auth: %s}};
        let current = null;
        const fake = {endpoint: sub.endpoint, toJSON: () => sub, getKey: () => null,
                      unsubscribe: async () => {
                        current = null;
                        localStorage.setItem("test.unsubscribed", String(Number(localStorage.getItem("test.unsubscribed") || 0) + 1));
                        return true;
                      }};
        PushManager.prototype.subscribe = async function () { current = fake; return fake; };
        PushManager.prototype.getSubscription = async function () { return current; };
      })();
    """ % (json.dumps(endpoint), json.dumps(p256dh), json.dumps(auth_secret))


def subscriptions(admin, endpoint):
    return admin.execute("select count(*) from public.web_push_subscriptions where endpoint = %s",
                         (endpoint,)).fetchone()[0]


def enable_push(page, admin, endpoint):
    page.evaluate("navigator.serviceWorker.ready")
    page.click("#enable-push")
    expect(page.locator("#push-status")).to_have_text("Notifications are on.", timeout=10000)
    assert subscriptions(admin, endpoint) == 1, "the relay saved it before saying so"


def test_f_sign_out_deletes_the_web_push_subscription(browser, admin, relay, push):
    email = unique("push")
    endpoint, p256dh, auth_secret = push.web.subscribe("/sub/csrf-" + uuid.uuid4().hex[:6])
    context, page = signed_in_with_link(browser, relay, email,
                                        init_script=counting_subscription_stub(endpoint, p256dh, auth_secret))
    try:
        # The socket is up: the relay deletes the row before the socket closes.
        enable_push(page, admin, endpoint)
        show_view(page, "account")
        page.click("#signout")
        expect(page.locator("#status")).to_have_text("Signed out", timeout=10000)
        assert subscriptions(admin, endpoint) == 0, "deleted by the time sign-out is done"
        assert page.evaluate("localStorage.getItem('test.unsubscribed')") == "1", "unsubscribed at the push service"
        assert page.evaluate("localStorage.getItem('whereabot.push')") is None
        expect(page.locator("#push-status")).to_have_text("", timeout=1000)
        # The socket is down (another tab took the device's socket: 4000, no reconnect): the
        # page tells the relay on a socket of its own.
        page.goto(app_link(relay, email))
        confirm_sign_in(page, email)
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        enable_push(page, admin, endpoint)
        second = context.new_page()
        second.goto(f"{relay.base}/app/")
        expect(second.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#status")).to_have_text("Opened elsewhere", timeout=10000)
        second.close()
        show_view(page, "account")
        page.click("#signout")
        expect(page.locator("#status")).to_have_text("Signed out", timeout=15000)
        assert subscriptions(admin, endpoint) == 0
        assert page.evaluate("localStorage.getItem('test.unsubscribed')") == "2"
        assert page.evaluate("localStorage.getItem('whereabot.push')") is None
    finally:
        context.close()


def test_relay_logs_hold_no_token(relay, supabase_relay):
    """After the tests: no token reached either relay's logs."""
    for server in (relay, supabase_relay):
        server.stop()
        assert "whereabot.bearer." not in server.logs and "eyJ" not in server.logs
