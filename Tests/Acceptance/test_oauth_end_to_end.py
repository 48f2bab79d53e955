"""Agents sign in with OAuth 2.1 (issue 26, SPEC §12), end to end with clients nobody here
wrote: the official MCP Python SDK's OAuthClientProvider (discovery from the relay's 401,
RFC 9728 and RFC 8414 metadata, dynamic registration, PKCE) against a real `whereabot
serve` and the local Supabase Auth stand-in (auth/standin), with a redirect handler that
drives Debian's headless Chromium through Playwright: the consent page on the relay, then
Approve (or Deny). After Approve, get_phone_location reaches the browser phone, whose
prompt names the registered client; Allow returns the fix."""
import asyncio
import json
import time
import urllib.parse

import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from playwright.async_api import async_playwright, expect

import relay_server
from relay_server import RelayServer
from test_auth_standin import SECRET as STANDIN_SECRET, StandIn, user_token
from test_browser_phone import chromium_binary

AGENT = "Whereabot SDK test agent"
LAT, LON = 47.3768866, 8.5416940
SITE_PORT = relay_server.free_port()  # the stand-in sends the browser to this relay's consent page
CALLBACK = f"http://127.0.0.1:{relay_server.free_port()}/oauth/callback"


@pytest.fixture(scope="module")
def standin():
    server = StandIn({"AUTH_SITE_URL": f"http://127.0.0.1:{SITE_PORT}"})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def relay(standin):
    patch = pytest.MonkeyPatch()
    patch.setattr(relay_server, "free_port", lambda: SITE_PORT)
    try:
        server = RelayServer(SUPABASE_URL=standin.base, SUPABASE_JWKS_URL=standin.issuer + "/.well-known/jwks.json",
                             SUPABASE_JWT_SECRET=STANDIN_SECRET, SUPABASE_ANON_KEY="anon-key-for-tests")
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


async def sign_in_through_the_browser(relay, standin, make_user, decision):
    user, session, email = make_user(name="Grace Hopper", with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium_binary(), headless=True, args=["--no-sandbox"])
        context = await browser.new_context(permissions=["geolocation"],
                                            geolocation={"latitude": LAT, "longitude": LON, "accuracy": 9})
        await context.add_init_script("localStorage.setItem('whereabot.session', " + json.dumps(json.dumps(
            {"access_token": bearer, "expires_at": int(time.time()) + 600})) + ")")
        phone = await context.new_page()
        await phone.goto(relay.base + "/app/")
        await expect(phone.locator("#status")).to_have_text("Connected", timeout=10000)
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
            await consent.goto(url)  # the stand-in's /authorize → 302 → the relay's consent page
            await expect(consent.locator("#consent-ask")).to_be_visible(timeout=10000)
            seen["page"] = consent.url
            seen["text"] = await consent.locator("#consent-text").text_content()
            seen["host"] = await consent.locator("#consent-host").text_content()
            seen["email"] = await consent.locator("#consent-email").text_content()
            await consent.click("#consent-approve" if decision == "approve" else "#consent-deny")

        async def callback_handler():
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(await asyncio.wait_for(returned, 20)).query))
            if "error" in query:
                raise Declined(query["error"])
            return AuthorizationCodeResult(code=query["code"], state=query.get("state"))

        storage = MemoryStorage()
        provider = OAuthClientProvider(
            server_url=relay.base + "/mcp",
            client_metadata=OAuthClientMetadata(redirect_uris=[CALLBACK], client_name=AGENT, response_types=["code"],
                                                grant_types=["authorization_code", "refresh_token"],
                                                token_endpoint_auth_method="none"),
            storage=storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
        http = create_mcp_http_client(auth=provider)
        outcome = {}
        try:
            async with Client(streamable_http_client(relay.base + "/mcp", http_client=http), cache=None) as client:
                call = asyncio.create_task(client.call_tool("get_phone_location", {"timeout_secs": 30}))
                await expect(phone.locator("#prompt")).to_be_visible(timeout=15000)
                outcome["prompt"] = await phone.locator("#prompt").text_content()
                await phone.click("#allow")
                outcome["result"] = await asyncio.wait_for(call, 30)
        except Exception as error:  # noqa: BLE001 (the deny case: what the SDK raised)
            outcome["error"] = error
        finally:
            await browser.close()
        return seen, outcome, storage


def test_approve_then_locate_through_the_browser_phone(relay, standin, make_user):
    seen, outcome, storage = asyncio.run(asyncio.wait_for(sign_in_through_the_browser(relay, standin, make_user, "approve"), 90))
    assert "error" not in outcome, repr(outcome.get("error"))
    authorize = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(seen["authorize"]).query))
    assert seen["authorize"].startswith(standin.issuer + "/oauth/authorize?")
    assert authorize["code_challenge_method"] == "S256" and authorize["resource"] == relay.base + "/mcp"
    assert seen["page"].startswith(relay.base + "/app/oauth/consent?authorization_id=")
    assert seen["text"] == f"{AGENT} will be able to ask for your location. You are asked every time unless you choose Always allow."
    assert seen["host"] == urllib.parse.urlsplit(CALLBACK).netloc
    assert seen["email"].endswith("@test.example")
    assert AGENT in outcome["prompt"]  # the prompt names the registered client
    result = outcome["result"]
    assert not result.is_error, result.content
    fix = json.loads(result.content[0].text)
    assert (round(fix["latitude"], 5), round(fix["longitude"], 5)) == (round(LAT, 5), round(LON, 5))
    assert storage.tokens is not None and storage.tokens.access_token.count(".") == 2


def test_deny_gives_the_sdk_an_oauth_error_and_no_token(relay, standin, make_user):
    seen, outcome, storage = asyncio.run(asyncio.wait_for(sign_in_through_the_browser(relay, standin, make_user, "deny"), 90))
    error = outcome.get("error")
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, Declined) and str(error) == "access_denied", repr(outcome)
    assert storage.tokens is None
