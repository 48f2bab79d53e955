"""Agents sign in with OAuth 2.1 against the relay's own authorization server
(docs/agents.md, "Signing in"), end to end with clients nobody here wrote, while the local
Supabase Auth stand-in behaves as Supabase does today (supabase/auth#2820 on: it would
refuse every one of these requests) and only signs the person in: the official MCP Python
SDK's OAuthClientProvider — discovery from the relay's 401 (RFC 9728, RFC 8414), `resource`
(RFC 8707), PKCE, and either dynamic registration or a client ID metadata document served
over https by the test with its own CA — with a redirect handler that drives Debian's
headless Chromium through Playwright: the consent page, sign-in by magic link from the
development mailbox, Approve. Then get_phone_location reaches the browser phone, whose
prompt names the client, and Allow returns the fix. The time from the client's first 401
to its first tool result, and the requests on the way, are printed."""
import asyncio
import time
import urllib.parse

import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from playwright.async_api import async_playwright, expect

import relay_server
from cimd_server import documents  # noqa: F401 (fixture)
from relay_server import RelayServer
from test_auth_standin import SECRET as STANDIN_SECRET, StandIn
from test_browser_phone import chromium_binary

AGENT = "Whereabot SDK test agent"
LAT, LON = 47.3768866, 8.5416940
SITE_PORT = relay_server.free_port()  # the stand-in's sign-in links return to this relay's /app/
CALLBACK = f"http://127.0.0.1:{relay_server.free_port()}/oauth/callback"


@pytest.fixture(scope="module")
def standin():
    server = StandIn({"AUTH_SITE_URL": f"http://127.0.0.1:{SITE_PORT}", "STANDIN_ISSUE_2820": None})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def relay(standin, documents):
    patch = pytest.MonkeyPatch()
    patch.setattr(relay_server, "free_port", lambda: SITE_PORT)
    try:
        server = RelayServer(SUPABASE_URL=standin.base, SUPABASE_JWKS_URL=standin.issuer + "/.well-known/jwks.json",
                             SUPABASE_JWT_SECRET=STANDIN_SECRET, SUPABASE_ANON_KEY="anon-key-for-tests",
                             OAUTH_CIMD_ALLOW_LOOPBACK="1", OAUTH_CIMD_CA_FILE=str(documents.ca))
    finally:
        patch.undo()
    yield server
    server.stop()


class MemoryStorage:
    def __init__(self):
        self.tokens, self.client = None, None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info):
        self.client = info


class Declined(Exception):
    """The authorization server sent the browser back with an OAuth error."""


async def magic_link(page, standin, email):
    """Signs the page's browser in as `email` through the development mailbox."""
    await page.fill("#email", email)
    await page.click("#email-form button[type=submit]")
    await expect(page.locator("#email-sent")).to_be_visible(timeout=10000)
    deadline, message = time.monotonic() + 10, None
    while message is None and time.monotonic() < deadline:
        _, listing = standin.mail("GET", "/api/v1/messages")
        message = next((m for m in listing["messages"] if m["To"][0]["Address"] == email), None)
        await asyncio.sleep(0.1)
    assert message, "the sign-in mail reached the mailbox"
    _, body = standin.mail("GET", f"/api/v1/message/{message['ID']}")
    await page.goto(next(word for word in body["Text"].split() if "/auth/v1/verify?" in word))


async def sign_in_through_the_browser(relay, standin, decision, client_metadata_url=None):
    email = f"grace-{int(time.time() * 1000)}@test.example"
    requests = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_binary(), headless=True, args=["--no-sandbox"])
        context = await browser.new_context(permissions=["geolocation"],
                                            geolocation={"latitude": LAT, "longitude": LON, "accuracy": 9})
        consent = await context.new_page()
        returned = asyncio.get_running_loop().create_future()

        async def back_at_the_client(route):
            if not returned.done():
                returned.set_result(route.request.url)
            await route.fulfill(body="You can close this window.")

        await consent.route(CALLBACK + "**", back_at_the_client)
        seen = {}

        async def redirect_handler(url):
            seen["authorize"] = url
            await consent.goto(url)  # the relay's /oauth/authorize → 302 → its consent page
            seen["page"] = consent.url
            await expect(consent.locator("#consent-signin")).to_be_visible(timeout=10000)  # signed out: sign in first
            await consent.click("#consent-signin-link")
            await magic_link(consent, standin, email)
            await consent.wait_for_url("**/app/oauth/consent?request=*", timeout=10000)  # and back
            await expect(consent.locator("#consent-ask")).to_be_visible(timeout=10000)
            seen["text"] = await consent.locator("#consent-text").text_content()
            seen["host"] = await consent.locator("#consent-host").text_content()
            seen["email"] = await consent.locator("#consent-email").text_content()
            await consent.click("#consent-approve" if decision == "approve" else "#consent-deny")

        async def callback_handler():
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(await asyncio.wait_for(returned, 30)).query))
            seen["callback"] = query
            if "error" in query:
                raise Declined(query["error"])
            return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

        storage = MemoryStorage()
        provider = OAuthClientProvider(
            server_url=relay.base + "/mcp",
            client_metadata=OAuthClientMetadata(redirect_uris=[CALLBACK], client_name=AGENT, response_types=["code"],
                                                grant_types=["authorization_code", "refresh_token"],
                                                token_endpoint_auth_method="none"),
            storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler,
            client_metadata_url=client_metadata_url)

        async def count(request):
            requests.append(f"{request.method} {request.url.path}")

        http = create_mcp_http_client(auth=provider)
        http.event_hooks["request"].append(count)
        outcome = {}
        started = time.monotonic()
        try:
            async with Client(streamable_http_client(relay.base + "/mcp", http_client=http), cache=None) as client:
                outcome["signed_in"] = time.monotonic() - started
                phone = await context.new_page()  # the same browser, now signed in: the person's phone
                await phone.goto(relay.base + "/app/")
                await expect(phone.locator("#status")).to_have_text("Connected", timeout=10000)
                call = asyncio.create_task(client.call_tool("get_phone_location", {"timeout_secs": 30}))
                await expect(phone.locator("#prompt")).to_be_visible(timeout=15000)
                outcome["prompt"] = await phone.locator("#prompt").text_content()
                await phone.click("#allow")
                outcome["result"] = await asyncio.wait_for(call, 30)
        except Exception as error:  # noqa: BLE001 (the deny case: what the SDK raised)
            outcome["error"] = error
        finally:
            await browser.close()
        seen["email_used"] = email
        return seen, outcome, storage, requests


def check_signed_in(relay, seen, outcome, storage, requests, shown_host):
    assert "error" not in outcome, repr(outcome.get("error"))
    authorize = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(seen["authorize"]).query))
    assert seen["authorize"].startswith(relay.base + "/oauth/authorize?")
    assert authorize["code_challenge_method"] == "S256" and authorize["resource"] == relay.base + "/mcp"
    assert seen["page"].startswith(relay.base + "/app/oauth/consent?request=")
    assert seen["text"] == f"{AGENT} will be able to ask for your location. You are asked every time unless you choose Always allow."
    assert seen["host"] == shown_host and seen["email"] == seen["email_used"]
    assert seen["callback"]["iss"] == relay.base
    assert AGENT in outcome["prompt"]  # the prompt names the client
    result = outcome["result"]
    assert not result.is_error, result.content
    assert '"latitude"' in result.content[0].text
    assert storage.tokens is not None and storage.tokens.refresh_token
    print(f"\nsign-in: {len(requests)} requests by the SDK ({', '.join(requests)}); "
          f"first 401 to signed in {outcome['signed_in']:.2f} s (browser and mailbox included)")


def test_the_sdk_registers_signs_in_and_locates(relay, standin):
    seen, outcome, storage, requests = asyncio.run(asyncio.wait_for(sign_in_through_the_browser(relay, standin, "approve"), 120))
    check_signed_in(relay, seen, outcome, storage, requests, urllib.parse.urlsplit(CALLBACK).netloc)
    assert storage.client.client_id.startswith("wbc_")  # dynamic registration


def test_the_sdk_signs_in_with_a_client_metadata_document(relay, standin, documents):
    url = documents.serve_client("/sdk/client.json", AGENT, [CALLBACK])
    seen, outcome, storage, requests = asyncio.run(asyncio.wait_for(
        sign_in_through_the_browser(relay, standin, "approve", client_metadata_url=url), 120))
    check_signed_in(relay, seen, outcome, storage, requests, f"127.0.0.1:{documents.port}")
    assert dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(seen["authorize"]).query))["client_id"] == url
    assert not any(request.endswith("/oauth/register") for request in requests)


def test_deny_gives_the_sdk_an_oauth_error_and_no_token(relay, standin):
    seen, outcome, storage, _ = asyncio.run(asyncio.wait_for(sign_in_through_the_browser(relay, standin, "deny"), 120))
    error = outcome.get("error")
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, Declined) and str(error) == "access_denied", repr(outcome)
    assert storage.tokens is None
