"""Connected agents in the browser phone (issue 26, SPEC §12), in Debian's real Chromium
driven by Playwright, against a real `whereabot serve` and the local Supabase Auth stand-in
(auth/standin): an agent that went through the OAuth flow is listed by its registered name;
Revoke ends its sessions, and the relay refuses its token on both instances."""
import http.client
import json
import time
import urllib.parse

import pytest
from playwright.sync_api import expect

import relay_server
from relay_server import RelayServer
from test_auth_standin import REDIRECT, SECRET as STANDIN_SECRET, StandIn, approve, authorization_id, pkce, register, user_token
from test_browser_phone import browser  # noqa: F401 (fixture)


# The stand-in answers the grants API only for its site's pages (as Supabase Auth checks
# Origin), so the first relay's port is chosen before either starts.
SITE_PORT = relay_server.free_port()


@pytest.fixture(scope="module")
def standin():
    server = StandIn({"AUTH_SITE_URL": f"http://127.0.0.1:{SITE_PORT}"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def relays(standin, monkeypatch_module):
    environment = {"SUPABASE_URL": standin.base, "SUPABASE_JWKS_URL": standin.issuer + "/.well-known/jwks.json",
                   "SUPABASE_JWT_SECRET": STANDIN_SECRET, "SUPABASE_ANON_KEY": "anon-key-for-tests"}
    ports = iter([SITE_PORT])
    monkeypatch_module.setattr(relay_server, "free_port", lambda: next(ports))
    site = RelayServer(**environment)
    monkeypatch_module.undo()
    servers = [site, RelayServer(**environment)]
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def locate_status(relay, token):
    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    try:
        conn.request("POST", "/v1/locate?timeout_secs=1", headers={"Authorization": "Bearer " + token})
        return conn.getresponse().status
    finally:
        conn.close()


def oauth_agent(standin, user_bearer, name):
    """An agent that registered and was approved by the user: its access token."""
    client = register(standin, client_name=name)
    verifier, challenge = pkce()
    code = approve(standin, user_bearer, authorization_id(standin, client["client_id"], challenge))["code"]
    status, tokens = standin.form("/auth/v1/oauth/token", {
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client["client_id"],
        "code_verifier": verifier})
    assert status == 200, tokens
    return tokens["access_token"]


def app_page(browser, relay, bearer):
    """The browser phone on `relay`, signed in with the stand-in's `bearer` (a new context)."""
    context = browser.new_context()
    context.add_init_script("localStorage.setItem('whereabot.session', "
                            + json.dumps(json.dumps({"access_token": bearer, "expires_at": int(time.time()) + 600})) + ")")
    page = context.new_page()
    page.goto(relay.base + "/app/")
    return context, page


def test_connected_agents_are_listed_and_revoked(browser, standin, relays, make_user):
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    agent = oauth_agent(standin, bearer, "Claude <b>Desktop</b>")
    other = oauth_agent(standin, bearer, "Cursor")
    assert [locate_status(relay, agent) for relay in relays] == [503, 503]  # authenticated; no phone
    context, page = app_page(browser, relays[0], bearer)
    try:
        rows = page.locator("#grants li")
        expect(rows).to_have_count(2, timeout=10000)
        expect(page.locator("#grants")).to_contain_text("Claude <b>Desktop</b> — connected")
        assert page.locator("#grants b").count() == 0
        page.on("dialog", lambda dialog: dialog.accept())
        with page.expect_response(lambda response: response.request.method == "DELETE") as revoke:
            rows.filter(has_text="Claude").locator("button").click()
        assert revoke.value.status == 204
        revoked_at = time.monotonic()
        # Every instance refuses the revoked client's token within 5 s of the revoke's
        # response (its sessions are gone; a session check is trusted for 4 s).
        while time.monotonic() - revoked_at < 5 and any(locate_status(relay, agent) != 401 for relay in relays):
            time.sleep(0.1)
        assert time.monotonic() - revoked_at < 5
        assert [locate_status(relay, agent) for relay in relays] == [401, 401]
        expect(rows).to_have_count(1, timeout=10000)
        expect(rows).to_contain_text("Cursor")
        # The other client is untouched: authenticated (this page is its phone now and lets the
        # 1 s request lapse: 408).
        assert all(locate_status(relay, other) in (408, 504) for relay in relays)
    finally:
        context.close()


def test_the_browser_phone_signs_in_by_magic_link_from_the_mailbox(browser, standin, relays, make_user):
    """Locally as on Supabase: the page asks for a link, the mail lands in the development
    mailbox (Mailpit's API), the link opened in another tab signs the page in (the state the
    page stored is in redirect_to), and the phone socket connects with the stand-in's token."""
    email = f"ada-{int(time.time() * 1000)}@test.example"
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(relays[0].base + "/app/")
        page.fill("#email", email)
        page.click("#email-form button[type=submit]")
        expect(page.locator("#email-sent")).to_be_visible(timeout=10000)
        deadline, message = time.monotonic() + 10, None
        while message is None and time.monotonic() < deadline:
            status, listing = standin.mail("GET", "/api/v1/messages")
            message = next((m for m in listing["messages"] if m["To"][0]["Address"] == email), None)
            time.sleep(0.1)
        assert message, "the mail reached the mailbox"
        _, body = standin.mail("GET", f"/api/v1/message/{message['ID']}")
        link = next(word for word in body["Text"].split() if "/auth/v1/verify?" in word)
        redirect = urllib.parse.parse_qs(urllib.parse.urlsplit(link).query)["redirect_to"][0]
        assert redirect.startswith(relays[0].base + "/app/?state=")
        other = context.new_page()  # opened from the mail: another tab
        other.goto(link)
        expect(other.locator("#account")).to_have_text(email, timeout=10000)
        expect(other.locator("#status")).to_have_text("Connected", timeout=10000)
    finally:
        context.close()


def test_stop_all_sharing_disconnects_every_connected_agent(browser, standin, relays, make_user):
    """SPEC §14's Stop all sharing ends the OAuth grants too, through Supabase Auth's grants
    API (here the stand-in): both approved agents are named in the confirmation and refused
    on both instances within 5 s of the result."""
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    agents = [oauth_agent(standin, bearer, "Claude"), oauth_agent(standin, bearer, "Cursor")]
    context, page = app_page(browser, relays[0], bearer)
    try:
        expect(page.locator("#grants li")).to_have_count(2, timeout=10000)
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        page.click("#stop-all")
        expect(page.locator("#stop-all-ends li").nth(3)).to_have_text("2 connected agents")
        page.click("#stop-all-yes")
        expect(page.locator("#stop-all-result")).to_have_text(
            "Stopped: 0 always-allowed agents, 0 shares and invitations, 0 agent keys, 2 connected agents, 0 waiting requests.",
            timeout=10000)
        stopped_at = time.monotonic()
        while time.monotonic() - stopped_at < 5 and any(locate_status(relay, agent) != 401
                                                         for relay in relays for agent in agents):
            time.sleep(0.1)
        assert [locate_status(relay, agent) for relay in relays for agent in agents] == [401] * 4, \
            "every grant ended, on every instance, within 5 s"
        expect(page.locator("#grants li")).to_have_count(0, timeout=10000)
    finally:
        context.close()
