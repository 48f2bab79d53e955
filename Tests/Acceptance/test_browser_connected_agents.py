"""Connected agents in the browser phone (docs/agents.md "Signing in"), in Debian's real Chromium
driven by Playwright, against a real `whereabot serve` and the local Supabase Auth stand-in
(auth/standin): an agent that went through an OAuth flow — the stand-in's (Supabase Auth's
OAuth server) or the relay's own authorization server — is listed by its registered name;
Revoke ends its tokens, and the relay refuses them on both instances."""
import http.client
import json
import re
import time
import urllib.parse

import pytest
from playwright.sync_api import expect

import relay_server
from relay_server import RelayServer
import oauth_kit
from test_auth_standin import REDIRECT, SECRET as STANDIN_SECRET, StandIn, approve, authorization_id, pkce, register, user_token
from test_browser_phone import browser, show_view  # noqa: F401 (fixture)


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
    # Two instances of one deployment: one PUBLIC_URL, the issuer of the relay's own tokens.
    servers = [site, RelayServer(**environment, PUBLIC_URL=site.base)]
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


def app_page(browser, relay, bearer, view="agents"):
    """The browser phone on `relay`, signed in with the stand-in's `bearer` (a new context),
    showing `view` (the connected agents are in Agents)."""
    context = browser.new_context()
    context.add_init_script("localStorage.setItem('whereabot.session', "
                            + json.dumps(json.dumps({"access_token": bearer, "expires_at": int(time.time()) + 600})) + ")")
    page = context.new_page()
    page.goto(f"{relay.base}/app/#/{view}")
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


def test_an_agent_connected_through_the_relays_own_oauth_server_is_listed_and_revoked(browser, standin, relays, make_user):
    """The relay as its own authorization server: an agent registered, authorized with PKCE
    and approved through the relay's consent API (plain HTTP) is listed with its host and its
    use, next to none of Supabase Auth's; Revoke (confirmed) deletes its grant, and both
    instances refuse its token within 5 s."""
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    _, agent = oauth_kit.connect_agent(relays[0].base, bearer, "Test Agent")
    statuses = [locate_status(relay, agent) for relay in relays]
    assert 401 not in statuses, statuses  # authenticated on both instances (no phone: 503)
    context, page = app_page(browser, relays[0], bearer)
    try:
        rows = page.locator("#grants li")
        expect(rows).to_have_count(1, timeout=10000)
        expect(rows).to_contain_text("Test Agent (127.0.0.1:9) — connected ")
        expect(rows).to_contain_text(re.compile(r", (last used .+|never used)$"))
        expect(page.locator("#grants-empty")).to_be_hidden()
        expect(page.locator("#grants-error")).to_be_hidden()
        dialogs = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))
        with page.expect_response(lambda response: response.request.method == "DELETE") as revoke:
            rows.filter(has_text="Test Agent").locator("button", has_text="Revoke").click()
        assert revoke.value.status == 204
        assert revoke.value.url.startswith(relays[0].base + "/oauth/grants/")
        assert dialogs == ["Disconnect Test Agent? It can no longer ask for your location until you connect it again."]
        revoked_at = time.monotonic()
        while time.monotonic() - revoked_at < 5 and any(locate_status(relay, agent) != 401 for relay in relays):
            time.sleep(0.1)
        assert [locate_status(relay, agent) for relay in relays] == [401, 401]
        assert time.monotonic() - revoked_at < 5, "refused on every instance within 5 s"
        expect(rows).to_have_count(0, timeout=10000)
        expect(page.locator("#grants-empty")).to_be_visible()
        expect(page.locator("#grants-error")).to_be_hidden()
    finally:
        context.close()


def test_one_source_failing_says_so_without_saying_none_is_connected(browser, standin, relays, make_user):
    """Both sources merged: the relay's grant is listed with one of the stand-in's; when
    the stand-in's grants API fails, the relay's grant stays listed and the error names the
    sign-in service; when both fail, there is the error and never "No agent is connected"."""
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    oauth_kit.connect_agent(relays[0].base, bearer, "Relay Agent")
    oauth_agent(standin, bearer, "Standin Agent")
    context = browser.new_context()
    context.add_init_script("localStorage.setItem('whereabot.session', "
                            + json.dumps(json.dumps({"access_token": bearer, "expires_at": int(time.time()) + 600})) + ")")
    page = context.new_page()
    try:
        page.goto(relays[0].base + "/app/#/agents")
        rows = page.locator("#grants li")
        expect(rows).to_have_count(2, timeout=10000)
        expect(rows.nth(0)).to_contain_text("Relay Agent (127.0.0.1:9)")
        expect(rows.nth(1)).to_contain_text("Standin Agent — connected")
        show_view(page, "account")
        expect(page.locator("#stop-all")).to_be_visible()
        show_view(page, "agents")
        page.route("**/auth/v1/user/oauth/grants**", lambda route: route.fulfill(status=500, body="{}"))
        page.reload()
        expect(page.locator("#grants-error")).to_have_text(
            "Could not load the agents connected through the sign-in service. Reload the page to try again.", timeout=10000)
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("Relay Agent")
        expect(page.locator("#grants-empty")).to_be_hidden()
        page.route("**/oauth/grants", lambda route: route.fulfill(status=503, body="{}"))
        page.reload()
        expect(page.locator("#grants-error")).to_have_text(
            "Could not load the agents connected through this relay. Reload the page to try again."
            " Could not load the agents connected through the sign-in service. Reload the page to try again.", timeout=10000)
        expect(rows).to_have_count(0)
        expect(page.locator("#grants-empty")).to_be_hidden()
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
    """Stop all sharing (docs/protocol.md "Stop all sharing") ends the OAuth grants too, through Supabase Auth's grants
    API (here the stand-in): both approved agents are named in the confirmation and refused
    on both instances within 5 s of the result."""
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    agents = [oauth_agent(standin, bearer, "Claude"), oauth_agent(standin, bearer, "Cursor")]
    context, page = app_page(browser, relays[0], bearer)
    try:
        expect(page.locator("#grants li")).to_have_count(2, timeout=10000)
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        show_view(page, "account")
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


def test_stop_all_sharing_counts_the_agents_the_relay_disconnected(browser, standin, relays, make_user):
    """Stop all sharing with one agent connected through the relay's own server and one
    through the stand-in's: the relay deletes its grant (stop_all_sharing), the page revokes
    the stand-in's; the result counts both; both tokens are refused on both instances."""
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    agents = [oauth_kit.connect_agent(relays[0].base, bearer, "Relay Agent")[1], oauth_agent(standin, bearer, "Cursor")]
    context, page = app_page(browser, relays[0], bearer)
    try:
        expect(page.locator("#grants li")).to_have_count(2, timeout=10000)
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        show_view(page, "account")
        page.click("#stop-all")
        expect(page.locator("#stop-all-ends li").nth(3)).to_have_text("2 connected agents")
        page.click("#stop-all-yes")
        stopped_at = time.monotonic()
        # The count first: a probe below sent before Stop all sharing reached the relay would
        # open a request of its own (its agent was still connected) and be counted with it.
        expect(page.locator("#stop-all-result")).to_have_text(
            "Stopped: 0 always-allowed agents, 0 shares and invitations, 0 agent keys, 2 connected agents, 0 waiting requests.",
            timeout=10000)
        while time.monotonic() - stopped_at < 5 and any(locate_status(relay, agent) != 401
                                                         for relay in relays for agent in agents):
            time.sleep(0.1)
        assert [locate_status(relay, agent) for relay in relays for agent in agents] == [401] * 4
        expect(page.locator("#grants li")).to_have_count(0, timeout=10000)
    finally:
        context.close()
