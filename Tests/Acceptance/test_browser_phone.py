"""The browser phone at /app/ (docs/protocol.md "The browser phone", A1-A14) in Debian's real Chromium, driven by
Playwright for Python (never `playwright install`), against real `whereabot serve`
processes; agents are curl, the second phone is `whereabot phone`, Web Push goes through
the fake push service and CDP `ServiceWorker.deliverPushMessage`."""
import base64
import json
import os
import subprocess
import time
import urllib.request
import uuid

import psycopg
import pytest
import websockets.sync.client as ws_client
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from playwright.sync_api import expect, sync_playwright

from conftest import ADMIN_URL, make_oauth_client
from fake_webpush import b64url
from push_kit import Locate, Push, wait_for
from relay_server import BINARY, SECRET, RelayServer, token

LAT, LON, ACC = 52.52, 13.405, 12


def chromium_binary():
    """The package's real binary (`/usr/bin/chromium` is a shell wrapper)."""
    files = subprocess.run(["dpkg", "-L", "chromium"], capture_output=True, text=True, check=True).stdout.split()
    return next(f for f in files if f.endswith("/chromium") and "/lib/" in f and os.path.isfile(f) and os.access(f, os.X_OK))


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_binary(), headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def push():
    fakes = Push()
    yield fakes
    fakes.stop()


ALLOW_FOR_S = 4  # "Allow for 1 hour" lasts this long here: the tests wait seconds, not an hour


@pytest.fixture(scope="module")
def relay(push):
    server = RelayServer(**push.env, ALLOW_FOR_SECONDS=str(ALLOW_FOR_S))
    yield server
    if server.process.poll() is None:
        server.stop()


class Person:
    """A user with a session, an agent called Claude, and an --app-link style link (marked
    `whereabot_link=1`: the page signs in with it after the confirmation naming the account)."""

    def __init__(self, admin, make_user, relay, agent_name="Claude"):
        self.user, self.session, self.email = make_user(name="Grace Hopper", with_session=True)
        self.client_id = str(uuid.uuid4())
        make_oauth_client(admin, self.client_id, agent_name)
        self.agent = token(self.user, self.session, self.email, client_id=self.client_id)
        self.phone = token(self.user, self.session, self.email)
        self.link = f"{relay.base}/app/#access_token={self.phone}&token_type=bearer&expires_in=3600&sb&whereabot_link=1"


def new_page(browser, geolocation=True, init_script=None):
    context = browser.new_context(permissions=["geolocation", "notifications"] if geolocation else ["notifications"],
                                  geolocation={"latitude": LAT, "longitude": LON, "accuracy": ACC})
    if init_script:
        context.add_init_script(init_script)
    return context, context.new_page()


def confirm_sign_in(page, email):
    """An --app-link link signs in only after the confirmation that names the account
    (docs/protocol.md "Signing in the browser")."""
    expect(page.locator("#confirm-text")).to_have_text(f"Sign in as {email} on this browser?", timeout=10000)
    page.click("#confirm-signin")


def signed_in(browser, person, **options):
    context, page = new_page(browser, **options)
    page.goto(person.link)
    confirm_sign_in(page, person.email)
    expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
    expect(page.locator("#account")).to_have_text(person.email)
    return context, page


def show_view(page, view):
    """Opens a view of the page by its tab (README "Try it in a browser": home, requests,
    agents, places, quiet, devices, account) and waits until it is shown."""
    page.click(f"#tabs a[data-tab={view}]")
    expect(page.locator(f"#view-{view}")).to_be_visible()


def get(url):
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


# ------------------------------------------------------------------------------------------ A1
def test_a1_routes_headers_manifest_and_config(relay, push):
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(f"{relay.base}/app")
        raise AssertionError("expected a redirect")
    except urllib.error.HTTPError as error:
        assert error.code == 301 and error.headers["Location"] == "/app/"
    status, headers, body = get(f"{relay.base}/app/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8" and headers["Cache-Control"] == "no-cache"
    assert headers["Content-Security-Policy"].startswith("default-src 'self'; script-src 'self'")
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Referrer-Policy"] == "no-referrer"
    assert b'<script type="module" src="/app/app.js">' in body
    for name, kind in [("app.js", "text/javascript"), ("sw.js", "text/javascript"), ("app.css", "text/css"),
                       ("icon-192.png", "image/png"), ("icon-512.png", "image/png")]:
        status, headers, _ = get(f"{relay.base}/app/{name}")
        assert status == 200 and headers["Content-Type"].startswith(kind), name
    assert get(f"{relay.base}/app/sw.js")[1]["Cache-Control"] == "no-cache"
    status, headers, body = get(f"{relay.base}/app/manifest.webmanifest")
    manifest = json.loads(body)
    assert headers["Content-Type"] == "application/manifest+json"
    assert (manifest["start_url"], manifest["scope"], manifest["display"]) == ("/app/", "/app/", "standalone")
    assert {icon["sizes"] for icon in manifest["icons"]} == {"192x192", "512x512"}
    status, headers, body = get(f"{relay.base}/app/config.json")
    config = json.loads(body)
    assert headers["Cache-Control"] == "no-cache" and config["public_url"] == relay.base
    point = base64.urlsafe_b64decode(config["vapid_public_key"] + "==")
    assert len(point) == 65 and point[0] == 4
    scalar = int.from_bytes(base64.urlsafe_b64decode(push.env["VAPID_PRIVATE_KEY"] + "="), "big")
    derived = ec.derive_private_key(scalar, ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    assert derived == point
    assert get(f"{relay.base}/app/nope.js")[0] == 404 and get(f"{relay.base}/app/../README.md")[0] == 404
    plain = RelayServer()
    try:
        assert json.loads(get(f"{plain.base}/app/config.json")[2])["vapid_public_key"] is None
    finally:
        plain.stop()


# ------------------------------------------------------------------------------------------ A2
def test_a2_sign_in_link(browser, admin, relay):
    email = f"app-{uuid.uuid4().hex[:8]}@example.com"
    env = {**os.environ, "ADMIN_DATABASE_URL": ADMIN_URL, "SUPABASE_JWT_SECRET": SECRET}
    link = subprocess.run([str(BINARY), "token", "--email", email, "--app-link", "--relay", relay.base], env=env,
                          capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    assert link.startswith(f"{relay.base}/app/#access_token=ey")
    assert link.endswith("&token_type=bearer&expires_in=86400&sb&whereabot_link=1")
    context, page = new_page(browser)
    try:
        page.goto(link)
        expect(page.locator("#confirm-text")).to_have_text(f"Sign in as {email} on this browser?", timeout=10000)
        assert page.evaluate("location.hash") == ""
        assert page.evaluate("localStorage.getItem('whereabot.session')") is None, "nothing stored before the confirmation"
        page.click("#confirm-signin")
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#account")).to_have_text(email)
        assert page.evaluate("location.hash") == ""
        stored = page.evaluate("JSON.parse(localStorage.getItem('whereabot.session'))")
        assert link.split("access_token=")[1].startswith(stored["access_token"])
        device = page.evaluate("localStorage.getItem('whereabot.device_id')")
        row = wait_for(lambda: admin.execute("select d.platform, d.name, u.email from public.devices d join auth.users u"
                                             " on u.id = d.user_id where d.id = %s", (device,)).fetchone(), 5)
        assert row == ("web", "Chrome on Linux", email)
        show_view(page, "devices")
        expect(page.locator("#devices li")).to_contain_text("Chrome on Linux (web) — this browser")
    finally:
        context.close()


# ------------------------------------------------------------------------------------------ A3
def test_a3_socket_auth_by_subprotocol(admin, make_user, relay):
    person = Person(admin, make_user, relay)
    url = relay.base.replace("http", "ws") + "/v1/device"
    with ws_client.connect(url, subprotocols=["whereabot.v1", "whereabot.bearer." + person.phone]) as socket:
        assert socket.subprotocol == "whereabot.v1"
        socket.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "web"}))
        assert json.loads(socket.recv(5))["type"] == "always_allowed"

    def refused(protocols, origin=None):
        try:
            with ws_client.connect(url, subprotocols=protocols, origin=origin):
                return 101
        except Exception as error:  # websockets.InvalidStatus
            return error.response.status_code

    assert refused(["whereabot.v1", "whereabot.bearer.not-a-jwt"]) == 401
    assert refused(["whereabot.v1", "whereabot.bearer." + person.agent]) == 403
    assert refused(["whereabot.bearer." + person.phone]) == 400
    assert refused(["whereabot.v1", "whereabot.bearer." + person.phone], origin="https://evil.example") == 403
    assert refused(["whereabot.v1", "whereabot.bearer." + person.phone], origin=relay.base) == 101
    metrics = subprocess.run(["curl", "-s", f"{relay.base}/metrics"], capture_output=True, text=True).stdout
    assert person.phone not in metrics


# ------------------------------------------------------------------------------------- A4 A11
def test_a4_allow_shares_the_browser_position_and_a11_history_has_none(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = Locate(relay.base, person.agent, 20, reason="To pick you up at the station").begin()
        expect(page.locator("#prompt-text")).to_have_text("Your agent Claude wants to know your location", timeout=10000)
        expect(page.locator("#prompt-reason")).to_have_text("“To pick you up at the station”, says Claude")
        expect(page.locator("#prompt-countdown")).to_contain_text("s left")
        page.click("#allow")
        call.join()
        assert call.status == 200, call.body
        fix = json.loads(call.body)
        assert (fix["latitude"], fix["longitude"], fix["accuracy_m"]) == (LAT, LON, ACC)
        expect(page.locator("#last li")).to_contain_text("Claude: Shared")  # home: what asked last
        show_view(page, "requests")
        expect(page.locator("#history li").first).to_contain_text("Claude: Shared")
        # A11: nothing stored on the device holds the position.
        stored = page.evaluate("Object.keys(localStorage).filter(k => k !== 'whereabot.session')"
                               ".map(k => localStorage.getItem(k)).join('\\n')")
        assert "52.52" not in stored and "13.40" not in stored and '"accuracy' not in stored
        assert "Claude" in stored
    finally:
        context.close()


# ------------------------------------------------------------------------------------- A5 A6
def test_a5_reject_and_a6_no_tap(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        page.click("#reject")
        call.join()
        assert (call.status, call.body) == (403, "The user declined to share their location.")
        call = Locate(relay.base, person.agent, 3).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        call.join()
        assert (call.status, call.body) == (408, "The user did not respond on their phone. Ask them before trying again.")
        expect(page.locator("#prompt")).to_be_hidden()
        expect(page.locator("#history li").first).to_contain_text("Not answered")
    finally:
        context.close()


# ------------------------------------------------------------------------------------------ A7
def test_a7_geolocation_not_granted(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person, geolocation=False)
    try:
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        page.click("#allow")
        call.join()
        assert (call.status, call.body) == (
            424, "Location access is off for Whereabot on the user's phone. Ask them to allow it in Settings.")
        expect(page.locator("#history li").first).to_contain_text("Location access is off")
    finally:
        context.close()


# ------------------------------------------------------------------------------------------ A8
def test_a8_always_allow(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        page.click("#always")
        call.join()
        assert call.status == 200
        expect(page.locator("#always-list li")).to_contain_text("Claude")
        assert admin.execute("select client_name from public.always_allowed_agents where user_id = %s and client_id = %s",
                             (person.user, person.client_id)).fetchone() == ("Claude",)
        with psycopg.connect(os.environ.get("WHEREABOT_TEST_RELAY_URL", relay_url()), autocommit=True) as conn:
            assert conn.execute("select relay.is_always_allowed(%s, %s, null)", (person.user, person.client_id)).fetchone()[0]
        call = Locate(relay.base, person.agent, 20).begin()
        call.join()
        assert call.status == 200, "answered without a click"
        expect(page.locator("#banner")).to_have_text("Claude checked your location")
        expect(page.locator("#history li").first).to_contain_text("Shared automatically")
        show_view(page, "agents")
        page.click("#always-list li button:has-text('Remove')")
        expect(page.locator("#always-list li")).to_have_count(0)
        assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s",
                             (person.user,)).fetchone() == (0,)
    finally:
        context.close()


def relay_url():
    from conftest import RELAY_URL
    return RELAY_URL


# ------------------------------------------------------------------------------------------ A9
def test_a9_answered_on_another_device(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    env = {**os.environ, "ADMIN_DATABASE_URL": ADMIN_URL, "SUPABASE_JWT_SECRET": SECRET}
    cli = subprocess.Popen([str(BINARY), "phone", "--relay", relay.base, "--token", person.phone, "--answer", "allow"],
                           env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert "connected" in cli.stdout.readline()
        time.sleep(0.3)
        call = Locate(relay.base, person.agent, 20).begin()
        call.join()
        assert call.status == 200
        expect(page.locator("#history li").first).to_contain_text("Answered on another device", timeout=10000)
        expect(page.locator("#prompt")).to_be_hidden()
    finally:
        cli.terminate()
        cli.wait(10)
        context.close()


# ----------------------------------------------------------------------------------------- A10
def test_a10_a_second_tab_replaces_the_first(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, first = signed_in(browser, person)
    try:
        second = context.new_page()
        second.goto(f"{relay.base}/app/")
        expect(second.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(first.locator("#status")).to_have_text("Opened elsewhere", timeout=10000)
        expect(first.locator("#notice")).to_contain_text("open in another tab")
        time.sleep(3)
        expect(first.locator("#status")).to_have_text("Opened elsewhere")
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A12
def subscription_stub(endpoint, p256dh, auth):
    """Playwright contexts cannot reach a push service: subscribe() resolves this subscription."""
    return """
      (() => {
        const sub = {endpoint: %s, keys: {p256dh: %s, auth: %s}};
        const fake = {endpoint: sub.endpoint, toJSON: () => sub, unsubscribe: async () => true, getKey: () => null};
        if (self.PushManager) {
          PushManager.prototype.subscribe = async function () { return fake; };
          PushManager.prototype.getSubscription = async function () { return fake; };
        }
      })();
    """ % (json.dumps(endpoint), json.dumps(p256dh), json.dumps(auth))


def worker_registration(context, page):
    """A CDP session of `page` and the id of the app's service worker registration, which
    `ServiceWorker.deliverPushMessage` needs: a push service's message reaches the worker
    through it."""
    cdp = context.new_cdp_session(page)
    registrations = []
    cdp.on("ServiceWorker.workerRegistrationUpdated", lambda event: registrations.extend(event["registrations"]))
    cdp.send("ServiceWorker.enable")
    for _ in range(50):  # the sync API delivers CDP events while Playwright is called
        if registrations:
            break
        page.wait_for_timeout(100)
    assert registrations
    return cdp, next(r for r in registrations if r["scopeURL"].endswith("/app/"))["registrationId"]


def test_a12_web_push_end_to_end(browser, admin, make_user, relay, push):
    person = Person(admin, make_user, relay)
    endpoint, p256dh, auth = push.web.subscribe("/sub/a12-" + uuid.uuid4().hex[:6])
    context, page = signed_in(browser, person, init_script=subscription_stub(endpoint, p256dh, auth))
    try:
        page.evaluate("navigator.serviceWorker.ready")
        page.click("#enable-push")
        expect(page.locator("#push-status")).to_have_text("Notifications are on.", timeout=10000)
        assert admin.execute("select count(*) from public.web_push_subscriptions where user_id = %s and endpoint = %s",
                             (person.user, endpoint)).fetchone() == (1,)
        cdp, registration = worker_registration(context, page)
        page.goto("about:blank")  # the page is closed: only a push can reach the person
        time.sleep(0.5)
        call = Locate(relay.base, person.agent, 30).begin()
        path = endpoint[len(push.web.origin):]
        # The bounds below guard against a hang; they assert no timing: a push's trip and a
        # stopped service worker's start take as long as the machine is busy (four test
        # workers beside a fuzz build have kept a notification back for more than 5 s).
        pushed = wait_for(lambda: push.web_for([path]), 60)
        assert pushed and pushed[0]["status"] == 201
        payload = pushed[0]["payload"]
        assert payload["body"] == "Your agent Claude wants to know your location" and payload["kind"] == "alert"
        cdp.send("ServiceWorker.deliverPushMessage", {"origin": relay.base, "registrationId": registration,
                                                      "data": json.dumps(payload)})
        # Read from a page of the scope that is not the app: the app, once its socket has the
        # waiting request, shows the prompt and closes the request's notification, so read
        # there the notification was gone whenever the socket came first (as it does under
        # load).
        page.goto(f"{relay.base}/app/offline-check-does-not-exist")  # any /app/ page can read the registration
        shown = wait_for(lambda: page.evaluate(
            "navigator.serviceWorker.getRegistration('/app/').then(r => r.getNotifications())"
            ".then(ns => ns.map(n => ({title: n.title, body: n.body, tag: n.tag, url: n.data && n.data.url})))"), 60)
        assert shown and shown[0] == {"title": "Whereabot", "body": payload["body"], "tag": payload["request_id"],
                                      "url": f"/app/?request={payload['request_id']}"}
        page.goto(relay.base + shown[0]["url"])
        expect(page.locator("#prompt-text")).to_have_text("Your agent Claude wants to know your location", timeout=10000)
        page.click("#allow")
        call.join()
        assert call.status == 200
        closed = page.evaluate("navigator.serviceWorker.getRegistration('/app/').then(r => r.getNotifications({tag: %s}))"
                               ".then(ns => ns.length)" % json.dumps(payload["request_id"]))
        assert closed == 0, "the answered request's notification is closed"
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A13
def test_a13_names_are_text_never_html(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay, agent_name="<img src=x onerror=window.pwned=1>")
    context, page = signed_in(browser, person)
    try:
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt-text")).to_have_text(
            "Your agent <img src=x onerror=window.pwned=1> wants to know your location", timeout=10000)
        page.click("#reject")
        call.join()
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("img").count() == 0
    finally:
        context.close()


def asked(page, relay, person, **locate):
    """Starts a locate of `person`'s phone (20 s) and waits until the page asks."""
    call = Locate(relay.base, person.agent, 20, **locate).begin()
    expect(page.locator("#prompt-text")).to_have_text("Your agent Claude wants to know your location", timeout=10000)
    return call


# ----------------------------------------------------------------------------------------- A15
def test_a15_the_agents_reason_is_quoted_text_and_kept_in_the_history(browser, admin, make_user, relay):
    """docs/protocol.md "Consent": the prompt shows the agent's reason as its own words, in quotes and
    attributed, as inert text (markup and a right-to-left override from a hostile agent);
    the history keeps it; a request without one shows no quote."""
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = asked(page, relay, person, reason="Pick-up at <img src=x onerror=window.pwned=1>\u202e gate 4")
        expect(page.locator("#prompt-reason")).to_have_text(
            "“Pick-up at <img src=x onerror=window.pwned=1> gate 4”, says Claude")
        page.click("#reject")
        call.join()
        assert call.status == 403, call.body
        expect(page.locator("#history li").first.locator(".history-reason")).to_have_text(
            "Pick-up at <img src=x onerror=window.pwned=1> gate 4")
        assert page.evaluate("typeof window.pwned") == "undefined"
        assert page.locator("img").count() == 0
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt-text")).to_be_visible(timeout=10000)
        expect(page.locator("#prompt-reason")).to_be_hidden()
        page.click("#reject")
        call.join()
        assert call.status == 403
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A16
def test_a16_share_approximate_sends_the_grid_cell_centre(browser, admin, make_user, relay):
    """docs/protocol.md "Consent": "Share approximate" sends the centre of the 0.025° cell holding the fix, at
    least 3 km accurate; the agent's 200 says `precision`; the history says how and from where."""
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = asked(page, relay, person)
        page.click("#approximate")
        call.join()
        assert call.status == 200, call.body
        fix = json.loads(call.body)
        assert (fix["latitude"], fix["longitude"]) == (52.5125, 13.4125), "the cell's centre, not the fix"
        assert fix["accuracy_m"] == 3000 and fix["precision"] == "approximate"
        assert "altitude_m" not in fix and "speed_mps" not in fix
        expect(page.locator("#history li").first).to_contain_text("Claude: Shared approximately from Chrome")
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt-text")).to_be_visible(timeout=10000)
        page.click("#allow")
        call.join()
        assert json.loads(call.body)["precision"] == "precise"
        assert (json.loads(call.body)["latitude"], json.loads(call.body)["longitude"]) == (LAT, LON)
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A17
def test_a17_allow_for_a_while_answers_silently_until_it_ends(browser, admin, make_user, relay):
    """docs/protocol.md "Consent": "Allow for 1 hour" answers this request and always-allows the agent until
    then (ALLOW_FOR_SECONDS here); the list shows precision and the end with Remove; a
    request after the end asks again. The row's expiry is the database's."""
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = asked(page, relay, person)
        page.click("#hour")
        call.join()
        assert call.status == 200, call.body
        expect(page.locator("#always-list li").first).to_contain_text("Claude (precise, until ", timeout=5000)
        row = admin.execute("select precision, extract(epoch from expires_at - created_at)::int from public.always_allowed_agents"
                            " where user_id = %s and client_id = %s", (person.user, person.client_id)).fetchone()
        assert row == ("precise", ALLOW_FOR_S)
        call = Locate(relay.base, person.agent, 20).begin()
        call.join()
        assert call.status == 200, "answered without asking while it lasts"
        expect(page.locator("#history li").first).to_contain_text("Claude: Shared automatically")
        time.sleep(ALLOW_FOR_S + 0.5)
        call = asked(page, relay, person)
        page.click("#reject")
        call.join()
        assert call.status == 403, "after the end it asks again"
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A19
def test_a19_an_approximate_always_allow_is_answered_approximately(browser, admin, make_user, relay):
    """docs/protocol.md "Consent": an always-allow can be approximate; the phone then answers that agent with
    the grid cell's centre, without asking and never precisely."""
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = asked(page, relay, person)
        page.check("#approximately")
        page.click("#always")
        call.join()
        assert call.status == 200 and json.loads(call.body)["precision"] == "approximate", call.body
        expect(page.locator("#always-list li").first).to_contain_text("Claude (approximate)", timeout=5000)
        assert admin.execute("select precision, expires_at from public.always_allowed_agents where user_id = %s",
                             (person.user,)).fetchone() == ("approximate", None)
        call = Locate(relay.base, person.agent, 20).begin()
        call.join()
        fix = json.loads(call.body)
        assert call.status == 200 and fix["precision"] == "approximate", "answered without asking, approximately"
        assert (fix["latitude"], fix["longitude"], fix["accuracy_m"]) == (52.5125, 13.4125, 3000)
        expect(page.locator("#history li").first).to_contain_text("Claude: Shared automatically approximately")
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A20
def test_a20_a_removed_always_allow_is_removed_on_every_device(browser, admin, make_user, relay):
    """A removal holds on every device (docs/security.md "Sharing"): the person always allows Claude on one
    browser phone, opens a second (which holds the list with Claude), then removes Claude on
    the first. The second must ask — not answer Claude silently with the precise fix, as it
    did when it answered by the list it got at hello. A narrowing to approximate elsewhere
    holds the same way: the ping carries the relay's decision."""
    person = Person(admin, make_user, relay)
    first, first_page = signed_in(browser, person)
    second = None
    try:
        call = asked(first_page, relay, person)
        first_page.click("#always")
        call.join()
        assert call.status == 200, call.body
        second, second_page = signed_in(browser, person)
        expect(second_page.locator("#always-list li")).to_contain_text("Claude", timeout=5000)
        show_view(first_page, "agents")
        first_page.click("#always-list li button:has-text('Remove')")
        expect(first_page.locator("#always-list li")).to_have_count(0)
        assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s",
                             (person.user,)).fetchone()[0] == 0
        call = asked(second_page, relay, person)
        expect(first_page.locator("#prompt-text")).to_have_text("Your agent Claude wants to know your location")
        second_page.click("#reject")
        call.join()
        assert call.status == 403, f"the second phone answered an agent the person had removed: {call.body}"

        # Always allowed again, then narrowed to approximate in the database (as from another
        # device): both phones answer approximately, whatever their own lists say.
        call = asked(first_page, relay, person)
        first_page.click("#always")
        call.join()
        admin.execute("update public.always_allowed_agents set precision = 'approximate' where user_id = %s",
                      (person.user,))
        call = Locate(relay.base, person.agent, 20).begin()
        call.join()
        assert call.status == 200 and json.loads(call.body)["precision"] == "approximate", call.body
    finally:
        first.close()
        if second:
            second.close()


# ----------------------------------------------------------------------------------------- A18
def test_a18_reject_from_the_notification_answers_without_a_window(browser, admin, make_user, relay, push):
    """docs/protocol.md "Notifications and the service worker": a Web Push notification carries Reject and Allow; Reject answers `denied`
    from the service worker (POST /v1/device/answer with the stored session), so the agent
    gets 403 and no window opens; the page's history records it when it next opens. The
    push arrives by CDP's ServiceWorker.deliverPushMessage; the action's click is the event
    the browser would dispatch, made in the worker."""
    person = Person(admin, make_user, relay)
    endpoint, p256dh, auth = push.web.subscribe("/sub/a18-" + uuid.uuid4().hex[:6])
    context, page = signed_in(browser, person, init_script=subscription_stub(endpoint, p256dh, auth))
    try:
        page.evaluate("navigator.serviceWorker.ready")
        page.click("#enable-push")
        expect(page.locator("#push-status")).to_have_text("Notifications are on.", timeout=10000)
        cdp, registration = worker_registration(context, page)
        page.goto("about:blank")  # no page of the app is open: only the notification can answer
        time.sleep(0.5)
        call = Locate(relay.base, person.agent, 30, reason="Running late?").begin()
        path = endpoint[len(push.web.origin):]
        # The bounds below guard against a hang; they assert no timing: a push's trip and a
        # stopped service worker's start take as long as the machine is busy (four test
        # workers beside a fuzz build have kept a notification back for more than 5 s).
        pushed = wait_for(lambda: push.web_for([path]), 60)
        assert pushed and pushed[0]["status"] == 201
        payload = pushed[0]["payload"]
        cdp.send("ServiceWorker.deliverPushMessage", {"origin": relay.base, "registrationId": registration,
                                                      "data": json.dumps(payload)})
        worker = wait_for(lambda: next((w for w in context.service_workers if w.url.endswith("/app/sw.js")), None), 5)
        assert worker
        actions = wait_for(lambda: worker.evaluate("""async (id) => {
            const n = (await self.registration.getNotifications()).find((n) => n.tag === id);
            return n ? n.actions.map((a) => a.action) : null;
        }""", payload["request_id"]), 5)
        assert actions == ["reject", "allow"]
        pages_before = len(context.pages)
        worker.evaluate("""async (id) => {
            const n = (await self.registration.getNotifications()).find((n) => n.tag === id);
            self.dispatchEvent(new NotificationEvent("notificationclick", { notification: n, action: "reject" }));
        }""", payload["request_id"])
        call.join()
        assert call.status == 403, call.body
        assert call.body == "The user declined to share their location."
        time.sleep(0.5)
        assert len(context.pages) == pages_before, "Reject opened no window"
        page.goto(f"{relay.base}/app/")
        expect(page.locator("#history li").first).to_contain_text("Claude: Declined from a notification", timeout=10000)
        expect(page.locator("#history li").first.locator(".history-reason")).to_have_text("Running late?")
    finally:
        context.close()


# ----------------------------------------------------------------------------------------- A14
def test_a14_endpoint_outside_the_allow_list_is_refused(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    key = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    context, page = signed_in(browser, person, init_script=subscription_stub("https://evil.example/push", b64url(key),
                                                                              b64url(os.urandom(16))))
    try:
        page.evaluate("navigator.serviceWorker.ready")
        page.click("#enable-push")
        expect(page.locator("#push-status")).to_have_text("Notifications refused by the relay (endpoint_not_allowed).",
                                                          timeout=10000)
        assert admin.execute("select count(*) from public.web_push_subscriptions where user_id = %s",
                             (person.user,)).fetchone() == (0,)
    finally:
        context.close()


def test_a20_a_busy_relay_is_obeyed_not_hammered(browser, admin, make_user, relay):
    """docs/protocol.md "The socket from a browser": a browser cannot read a refused upgrade's status, so the relay refuses a
    phone that speaks whereabot.v1 on the socket, with 1013 "retry after N"; the page waits
    those N seconds (not its 1 s back-off) and then connects."""
    person = Person(admin, make_user, relay)
    url = relay.base.replace("http", "ws") + "/v1/device"
    # The account's five places before hello are taken (sockets that never say hello).
    silent = [ws_client.connect(url, additional_headers={"Authorization": "Bearer " + person.phone}) for _ in range(5)]
    # The page's own clock times the wait: its sockets' opens and closes as the page saw them
    # (the close listener added first, so the app's reconnect timer starts no earlier). The
    # times at which Playwright hands the events to this process lag by as much as the
    # machine is busy (a busy machine has shown 4.99 s between two of them).
    timing = """
      (() => {
        const Native = window.WebSocket, log = (window.__sockets = []);
        window.WebSocket = class extends Native {
          constructor(...args) {
            super(...args);
            const entry = { opened: performance.now() };
            log.push(entry);
            this.addEventListener("close", () => { entry.closed = performance.now(); });
          }
        };
      })();
    """
    context, page = new_page(browser, init_script=timing)
    attempts, closes = [], []
    page.on("websocket", lambda socket: (attempts.append(time.monotonic()),
                                         socket.on("close", lambda _: closes.append(time.monotonic()))))
    try:
        page.goto(person.link)
        confirm_sign_in(page, person.email)
        deadline = time.monotonic() + 10
        while not closes and time.monotonic() < deadline:
            page.wait_for_timeout(50)  # Playwright delivers events while it runs
        assert closes, "the first socket was refused"
        for socket in silent:
            socket.close()
        expect(page.locator("#status")).to_have_text("Connected", timeout=15000)
        assert len(attempts) == 2, f"one refusal, then the socket that connected: {len(attempts)} attempts"
        sockets = page.evaluate("window.__sockets")
        assert len(sockets) == 2 and "closed" in sockets[0], sockets
        waited = (sockets[1]["opened"] - sockets[0]["closed"]) / 1000
        assert waited >= 5, f"the page came back {waited:.3f} s later, not after 5 s"
    finally:
        for socket in silent:
            socket.close()
        context.close()


def test_relay_logs_hold_no_token(relay):
    """After the browser tests: the bearer subprotocol never reached the logs."""
    relay.stop()
    assert "whereabot.bearer." not in relay.logs and "eyJ" not in relay.logs
    assert "52.52" not in relay.logs and "13.405" not in relay.logs
