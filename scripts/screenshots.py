#!/usr/bin/env python3
"""The README's screenshots of the browser phone (README "Try it in a browser", "Living with
it") at phone size, light and dark, English and German: a relay on the test database serving
this checkout's Sources/Relay/Resources/app (APP_DIR), Debian's Chromium driven by Playwright
(never `playwright install`), agents asking with curl. Writes docs/app-*.png.

    scripts/db.sh reset-test   # the test database (or WHEREABOT_TEST_ADMIN_URL / _RELAY_URL of another)
    .venv/bin/python scripts/screenshots.py [NAME …]   # only the named shots, e.g. app-prompt-de
"""
import os
import pathlib
import re
import sys
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "Acceptance"))
os.environ.setdefault("APP_DIR", str(ROOT / "Sources" / "Relay" / "Resources" / "app"))
for name in ("SUPABASE_URL", "SUPABASE_ANON_KEY", "SUPABASE_JWKS_URL", "DATABASE_URL"):
    os.environ.pop(name, None)  # the relay here checks the tests' own tokens (`make env` sets these for `make run`)

import psycopg  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

import oauth_kit  # noqa: E402
from conftest import ADMIN_URL, make_oauth_client  # noqa: E402
from push_kit import Locate, Push  # noqa: E402
from relay_server import RelayServer, token  # noqa: E402
from test_browser_phone import chromium_binary  # noqa: E402

DOCS = ROOT / "docs"
PHONE = {"width": 390, "height": 844}
REMINDER_S = 3
HERE = {"latitude": 52.52, "longitude": 13.405, "accuracy": 12}
REASONS = {"en": "To pick you up at the station", "de": "Um dich am Bahnhof abzuholen"}


class Person:
    """Grace, signed in on the page, with an agent called Claude."""

    def __init__(self, admin, relay):
        self.user, self.session = uuid.uuid4(), uuid.uuid4()
        self.email = f"grace.{self.user.hex[:4]}@example.com"
        admin.execute("insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)"
                      " values (%s, 'authenticated', 'authenticated', %s, '{\"full_name\": \"Grace Hopper\"}', now(), now())",
                      (self.user, self.email))
        admin.execute("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())", (self.session, self.user))
        self.client_id = str(uuid.uuid4())
        make_oauth_client(admin, self.client_id, "Claude")
        self.agent = token(self.user, self.session, self.email, client_id=self.client_id)
        self.phone = token(self.user, self.session, self.email)
        oauth_kit.connect_agent(relay.base, self.phone, "Claude Desktop")  # a connected agent in Agents


def phone(browser, person, scheme="light", locale="en-GB"):
    """A phone-sized page signed in as `person` (the session stored before the page loads)."""
    context = browser.new_context(viewport=PHONE, device_scale_factor=1.5, is_mobile=True, has_touch=True,
                                  color_scheme=scheme, locale=locale, permissions=["geolocation", "notifications"],
                                  geolocation=HERE, timezone_id="Europe/Berlin")
    context.add_init_script("localStorage.setItem('whereabot.session', JSON.stringify(%s))"
                            % f'{{"access_token": "{person.phone}", "expires_at": {int(time.time()) + 3600}}}')
    page = context.new_page()
    return context, page


def connected(page, relay, view=""):
    page.goto(f"{relay.base}/app/#/{view}")
    expect(page.locator("#tabs")).to_be_visible(timeout=10000)
    expect(page.locator("#status")).to_have_text(re.compile("^(Connected|Verbunden)$"), timeout=10000)


def shoot(page, name, wanted):
    if wanted and name not in wanted:
        return
    page.wait_for_timeout(300)  # transitions and fonts settle
    page.screenshot(path=str(DOCS / f"{name}.png"))
    print("wrote", DOCS / f"{name}.png")


def ask(page, relay, person, reason=None, seconds=60):
    call = Locate(relay.base, person.agent, seconds, reason=reason).begin()
    expect(page.locator("#prompt")).to_be_visible(timeout=10000)
    return call


def answer(page, call, button):
    page.click(button)
    call.join()


def prompts(browser, relay, person, wanted):
    """The prompt in both schemes and both languages, then home and the history."""
    for scheme in ("light", "dark"):
        for language, locale in (("en", "en-GB"), ("de", "de-DE")):
            context, page = phone(browser, person, scheme, locale)
            try:
                connected(page, relay)
                call = ask(page, relay, person, REASONS[language])
                suffix = ("" if language == "en" else "-de") + ("" if scheme == "light" else "-dark")
                shoot(page, f"app-prompt{suffix}", wanted)
                answer(page, call, "#allow")
                expect(page.locator("#last li")).to_have_count(1, timeout=10000)
                if language == "en":
                    shoot(page, "app-home" + ("" if scheme == "light" else "-dark"), wanted)
            finally:
                context.close()
    context, page = phone(browser, person)
    try:
        connected(page, relay)
        answer(page, ask(page, relay, person, "Are you home yet?"), "#reject")
        answer(page, ask(page, relay, person), "#approximate")
        page.click("#tabs a[data-tab=requests]")
        shoot(page, "app-history", wanted)
    finally:
        context.close()


def living(browser, relay, person, wanted):
    """Agents (always allowed, a key), places, quiet hours, a prompt in quiet hours, stop all sharing."""
    context, page = phone(browser, person)
    try:
        connected(page, relay)
        answer(page, ask(page, relay, person), "#always")
        page.click("#tabs a[data-tab=agents]")
        page.fill("#key-name", "nightly script")
        page.click("#key-form button[type=submit]")
        expect(page.locator("#new-key")).to_be_visible(timeout=10000)
        page.click("#hide-key")
        expect(page.locator("#always-list li")).to_have_count(1)
        expect(page.locator("#grants li")).to_have_count(1, timeout=10000)
        page.evaluate("scrollTo(0, 0)")
        shoot(page, "app-agents", wanted)

        page.click("#tabs a[data-tab=places]")
        page.fill("#place-name", "Home")
        page.click("#place-here")
        expect(page.locator("#place-latitude")).not_to_have_value("", timeout=15000)
        page.click("#place-form button[type=submit]")
        expect(page.locator("#places li")).to_have_count(1)
        page.evaluate("scrollTo(0, 0)")
        shoot(page, "app-places", wanted)

        page.click("#tabs a[data-tab=quiet]")
        page.fill("#quiet-start", time.strftime("%H:00", time.gmtime(time.time() - 3600)))
        page.fill("#quiet-end", time.strftime("%H:00", time.gmtime(time.time() + 7200)))
        page.fill("#quiet-zone", "UTC")
        page.click("#quiet-form button[type=submit]")
        expect(page.locator("#quiet-now")).to_be_visible(timeout=10000)
        page.evaluate("scrollTo(0, 0)")
        shoot(page, "app-quiet-hours", wanted)

        page.click("#tabs a[data-tab=agents]")
        page.check("#always-list li input[type=checkbox]")
        page.click("#always-list li button")  # removed: the next request asks, in quiet hours, as it may wake
        expect(page.locator("#always-list li")).to_have_count(0, timeout=10000)
        page.click("#tabs a[data-tab=home]")
        call = ask(page, relay, person, "Dinner is ready")
        expect(page.locator("#prompt-quiet")).to_be_visible()
        shoot(page, "app-prompt-quiet", wanted)
        answer(page, call, "#reject")

        page.click("#tabs a[data-tab=account]")
        page.click("#stop-all")
        expect(page.locator("#stop-all-confirm")).to_be_visible()
        page.evaluate("scrollTo(0, document.body.scrollHeight)")
        shoot(page, "app-stop-all", wanted)
        page.click("#stop-all-cancel")
    finally:
        context.close()


def reminder(browser, relay, person, wanted):
    """An agent always allowed for longer than the reminder interval: the card with Keep and Remove."""
    context, page = phone(browser, person)
    try:
        connected(page, relay)
        answer(page, ask(page, relay, person), "#always")
        time.sleep(REMINDER_S + 0.5)
        call = Locate(relay.base, person.agent, 20).begin()
        call.join()
        expect(page.locator("#reminders li")).to_have_count(1, timeout=10000)
        page.click("#tabs a[data-tab=agents]")
        expect(page.locator("#always-list li")).to_contain_text("last used", timeout=10000)
        shoot(page, "app-reminder", wanted)
    finally:
        context.close()


def consent(browser, relay, person, wanted):
    """The relay's own OAuth consent page for an agent called Claude Desktop."""
    for scheme, locale, name in (("light", "en-GB", "app-consent"), ("dark", "de-DE", "app-consent-de-dark")):
        client = oauth_kit.register(relay.base, client_name="Claude Desktop").json()["client_id"]
        _, challenge = oauth_kit.pkce()
        path, _ = oauth_kit.consent_location(relay.base, client, challenge, "st-" + uuid.uuid4().hex[:8])
        context, page = phone(browser, person, scheme, locale)
        try:
            page.goto(relay.base + path)
            expect(page.locator("#consent-ask")).to_be_visible(timeout=10000)
            shoot(page, name, wanted)
        finally:
            context.close()


def main():
    wanted = set(sys.argv[1:])
    DOCS.mkdir(exist_ok=True)
    fakes = Push()  # VAPID keys: the page offers notifications
    relay = RelayServer(**fakes.env, GRANT_REMINDER_SECONDS=str(REMINDER_S))
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium_binary(), headless=True, args=["--no-sandbox"])
            for scene in (prompts, living, reminder, consent):
                scene(browser, relay, Person(admin, relay), wanted)
            browser.close()
    finally:
        relay.stop()
        fakes.stop()


if __name__ == "__main__":
    main()
