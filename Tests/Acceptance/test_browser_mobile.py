"""The browser phone as a mobile app (README "Try it in a browser", "Living with it"), in
Debian's real Chromium driven by Playwright against a real `whereabot serve`: at 360×740 and
390×844, light and dark, every view, the prompt, the sign-in screen and the consent page
scroll only vertically, every visible control is at least 44×44 CSS px, and axe-core finds
no violation of any impact; back, forward and reload keep the view. A person with content in
every list (an always-allowed agent, a connected agent, a key, quiet hours, a place, history),
so that rows and their buttons are checked too."""
import json
import time
import uuid

import psycopg
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

import oauth_kit
from conftest import ADMIN_URL, make_oauth_client
from push_kit import Locate
from relay_server import token
from test_browser_phone import LAT, LON, Person, browser, push, relay, show_view  # noqa: F401 (fixtures)

VIEWS = ["home", "requests", "agents", "places", "quiet", "devices", "account"]
SIZES = [{"width": 360, "height": 740}, {"width": 390, "height": 844}]
SCHEMES = ["light", "dark"]
CONTROLS = "button, a[href], input:not([type=hidden]), select, textarea, summary, [role=button], [tabindex]:not([tabindex='-1'])"
AXE = Axe()


def seeded_storage(person, place="Home", device="Chrome on Linux"):
    """What this browser keeps of its own (places, history): set before the page loads."""
    now = int(time.time() * 1000)
    history = [{"id": str(uuid.uuid4()), "at": now - 60_000, "agent": "Claude", "client_id": person.client_id,
                "requester_name": None, "reason": "To pick you up at the station", "outcome": "shared", "precision": "approximate",
                "device": device},
               {"id": str(uuid.uuid4()), "at": now - 3_600_000, "agent": "Cursor", "client_id": "cursor", "requester_name": "Ada",
                "reason": None, "outcome": "declined", "precision": None, "device": None}]
    places = [{"name": place, "latitude": LAT, "longitude": LON, "radius_m": 250, "share": "name"}]
    session = {"access_token": person.phone, "expires_at": int(time.time()) + 3600}
    return ("if (!localStorage.getItem('whereabot.session')) {"
            f" localStorage.setItem('whereabot.session', {json.dumps(json.dumps(session))});"
            f" localStorage.setItem('whereabot.history', {json.dumps(json.dumps(history))});"
            f" localStorage.setItem('whereabot.places', {json.dumps(json.dumps(places))}); }}")


def new_user(admin, name="Grace Hopper", with_session=True):
    """conftest's make_user, for a module's fixture."""
    user, session = uuid.uuid4(), uuid.uuid4()
    email = f"{user.hex[:12]}@test.example"
    admin.execute("insert into auth.users (id, aud, role, email, raw_user_meta_data, created_at, updated_at)"
                  " values (%s, 'authenticated', 'authenticated', %s, %s, now(), now())", (user, email, json.dumps({"full_name": name})))
    admin.execute("insert into auth.sessions (id, user_id, created_at) values (%s, %s, now())", (session, user))
    return user, session, email


def prepare(browser, relay, locale="en-GB", key_name="nightly script", storage=None):
    """Grace with Claude always allowed (and may wake her), Cursor that asks, an agent key, a
    connected agent and quiet hours that do not hold now; `storage(person)` is the script
    that fills each new browser's own lists."""
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        grace = Person(admin, lambda **fields: new_user(admin, **fields), relay)
        grace.cursor_id = str(uuid.uuid4())
        make_oauth_client(admin, grace.cursor_id, "Cursor")
    grace.cursor = token(grace.user, grace.session, grace.email, client_id=grace.cursor_id)
    oauth_kit.connect_agent(relay.base, grace.phone, "Claude Desktop")
    grace.storage = (storage or seeded_storage)(grace)
    context, page = phone(browser, grace, SIZES[1], "light", locale)
    try:
        page.goto(relay.base + "/app/")
        expect(page.locator("#tabs")).to_be_visible(timeout=10000)
        call = Locate(relay.base, grace.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        page.click("#always")
        call.join()
        assert call.status == 200, call.body
        show_view(page, "agents")
        page.check("#always-list li input[type=checkbox]")
        page.fill("#key-name", key_name)
        page.click("#key-form button[type=submit]")
        expect(page.locator("#new-key")).to_be_visible(timeout=10000)
        page.click("#hide-key")
        show_view(page, "quiet")
        later = time.gmtime(time.time() + 3 * 3600)
        page.fill("#quiet-start", time.strftime("%H:00", later))
        page.fill("#quiet-end", time.strftime("%H:30", later))
        page.fill("#quiet-zone", "UTC")
        page.click("#quiet-form button[type=submit]")
        expect(page.locator("#quiet-list li")).to_have_count(1, timeout=10000)
    finally:
        context.close()
    return grace


@pytest.fixture(scope="module")
def person(browser, relay):
    return prepare(browser, relay)


def phone(browser, person, size, scheme, locale="en-GB"):
    context = browser.new_context(viewport=size, color_scheme=scheme, locale=locale, is_mobile=True, has_touch=True,
                                  permissions=["geolocation", "notifications"],
                                  geolocation={"latitude": LAT, "longitude": LON, "accuracy": 12})
    if person:
        context.add_init_script(person.storage if hasattr(person, "storage") else seeded_storage(person))
    return context, context.new_page()


def check_layout(page, where):
    """No sideways scroll, every visible control at least 44×44, no axe-core violation."""
    width = page.evaluate("[document.documentElement.scrollWidth, document.body.scrollWidth, innerWidth]")
    assert max(width[:2]) <= width[2], f"{where}: scrolls sideways ({width})"
    spilling = page.evaluate("""() => [...document.querySelectorAll('body *')]
        .filter((element) => element.checkVisibility() && element.getBoundingClientRect().right > innerWidth + 0.5)
        .map((element) => `${element.tagName.toLowerCase()}#${element.id}`)""")
    assert spilling == [], f"{where}: past the right edge: {spilling}"
    small = page.evaluate("""(selector) => [...document.querySelectorAll(selector)]
        .filter((element) => element.checkVisibility({ visibilityProperty: true }))
        .map((element) => [element, element.getBoundingClientRect()])
        .filter(([, box]) => box.width > 0 && (box.width < 43.5 || box.height < 43.5))
        .map(([element, box]) => `${element.tagName.toLowerCase()}#${element.id} "${(element.textContent || element.value || '').trim().slice(0, 30)}"`
             + ` ${Math.round(box.width)}x${Math.round(box.height)}`)""", CONTROLS)
    assert small == [], f"{where}: controls under 44×44: {small}"
    results = AXE.run(page, options={"resultTypes": ["violations"]})
    violations = [(v["id"], v["impact"], [node["target"] for node in v["nodes"]][:3]) for v in results.response["violations"]]
    assert violations == [], f"{where}: axe-core: {violations}"


def walk(page, relay, where):
    """Every view through its tab, checked once its lists have loaded."""
    expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
    for view in VIEWS:
        show_view(page, view)
        if view == "agents":
            expect(page.locator("#grants li")).to_have_count(1, timeout=10000)
            expect(page.locator("#agent-keys li")).to_have_count(1, timeout=10000)
            expect(page.locator("#always-list li")).to_have_count(1, timeout=10000)
        if view == "quiet":
            expect(page.locator("#quiet-list li")).to_have_count(1, timeout=10000)
        if view == "devices":
            expect(page.locator("#devices li").first).to_be_visible(timeout=10000)
        check_layout(page, f"{where} {view}")


def asked(page, relay, person):
    call = Locate(relay.base, person.cursor, 20, reason="Running late? Dinner is at 8").begin()
    expect(page.locator("#prompt-text")).to_have_text("Your agent Cursor wants to know your location", timeout=10000)
    return call


def consent_page(browser, relay, person, size, scheme, locale="en-GB"):
    client = oauth_kit.register(relay.base, client_name="Claude Desktop").json()["client_id"]
    _, challenge = oauth_kit.pkce()
    path, _ = oauth_kit.consent_location(relay.base, client, challenge, "st-" + uuid.uuid4().hex[:8])
    context, page = phone(browser, person, size, scheme, locale)
    page.goto(relay.base + path)
    expect(page.locator("#consent-ask")).to_be_visible(timeout=10000)
    return context, page


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", SIZES, ids=["360x740", "390x844"])
def test_every_view_fits_a_phone_with_44_px_targets_and_no_axe_violation(browser, relay, person, size, scheme):
    where = f"{size['width']}x{size['height']} {scheme}"
    context, page = phone(browser, person, size, scheme)
    try:
        page.goto(relay.base + "/app/")
        assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") == (scheme == "dark")
        walk(page, relay, where)
        show_view(page, "quiet")  # a form with the day toggles, scrolled: the prompt still comes on top
        page.evaluate("scrollTo(0, document.body.scrollHeight)")
        call = asked(page, relay, person)
        expect(page.locator("#prompt")).to_be_in_viewport()
        expect(page.locator("#prompt-reason")).to_have_text("“Running late? Dinner is at 8”, says Cursor")
        check_layout(page, f"{where} prompt")
        page.click("#prompt-menu summary")
        check_layout(page, f"{where} prompt with its menu open")
        page.click("#reject")
        call.join()
        assert call.status == 403, call.body
    finally:
        context.close()
    context, page = consent_page(browser, relay, person, size, scheme)
    try:
        check_layout(page, f"{where} consent page")
    finally:
        context.close()
    context, page = phone(browser, None, size, scheme)
    try:
        page.goto(relay.base + "/app/")
        expect(page.locator("#signin")).to_be_visible(timeout=10000)
        check_layout(page, f"{where} sign-in")
        page.goto(person.link)
        expect(page.locator("#confirm")).to_be_visible(timeout=10000)
        expect(page.locator("#tabs")).to_be_hidden()
        check_layout(page, f"{where} sign-in confirmation")
    finally:
        context.close()


def test_the_day_toggles_are_buttons_that_say_whether_they_are_pressed(browser, relay, person):
    context, page = phone(browser, person, SIZES[0], "light")
    try:
        page.goto(relay.base + "/app/#/quiet")
        expect(page.locator("#quiet-list li")).to_have_count(1, timeout=10000)
        days = page.locator("#quiet-days button")
        expect(days).to_have_count(7)
        expect(days.nth(5)).to_have_attribute("aria-pressed", "true")
        days.nth(5).click()
        days.nth(6).click()
        expect(days.nth(5)).to_have_attribute("aria-pressed", "false")
        assert page.locator("#quiet-start").get_attribute("type") == "time" and page.locator("#place-radius").count() == 1
        page.fill("#quiet-start", "01:00")
        page.fill("#quiet-end", "02:00")
        page.fill("#quiet-zone", "UTC")
        page.click("#quiet-form button[type=submit]")
        added = page.locator("#quiet-list li", has_text="01:00–02:00")
        expect(added.locator("span")).to_have_text("Mon–Fri, 01:00–02:00 (UTC)", timeout=10000)  # the weekend toggled off
        added.locator("button").click()
        expect(page.locator("#quiet-list li")).to_have_count(1, timeout=10000)
    finally:
        context.close()


def test_back_forward_and_reload_keep_the_view(browser, relay, person):
    context, page = phone(browser, person, SIZES[1], "light")
    try:
        page.goto(relay.base + "/app/")
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#view-home")).to_be_visible()
        expect(page.locator("#tabs a[data-tab=home]")).to_have_attribute("aria-current", "page")
        show_view(page, "agents")
        assert page.url.endswith("/app/#/agents")
        show_view(page, "places")
        page.go_back()
        expect(page.locator("#view-agents")).to_be_visible()
        expect(page.locator("#view-places")).to_be_hidden()
        expect(page.locator("#tabs a[data-tab=agents]")).to_have_attribute("aria-current", "page")
        page.reload()
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#view-agents")).to_be_visible()
        assert page.title() == "Agents · Whereabot"
        page.go_forward()
        expect(page.locator("#view-places")).to_be_visible()
        page.go_back()
        page.go_back()
        expect(page.locator("#view-home")).to_be_visible()
        page.goto(relay.base + "/app/#/no-such-view")
        expect(page.locator("#view-home")).to_be_visible()
    finally:
        context.close()


def test_empty_and_error_states_never_contradict(browser, relay, person, admin, make_user):
    """A new person: each list says it is empty only once it has loaded, never beside an
    error; a list that cannot load says so and not that it is empty."""
    fresh = Person(admin, make_user, relay)
    context, page = phone(browser, None, SIZES[0], "light")
    context.add_init_script("localStorage.setItem('whereabot.session', %s)"
                            % json.dumps(json.dumps({"access_token": fresh.phone, "expires_at": int(time.time()) + 3600})))
    try:
        page.route("**/oauth/grants", lambda route: route.fulfill(status=503, body="{}"))
        page.goto(relay.base + "/app/#/agents")
        expect(page.locator("#grants-error")).to_have_text(
            "Could not load the agents connected through this relay. Reload the page to try again.", timeout=10000)
        expect(page.locator("#grants-empty")).to_be_hidden()
        expect(page.locator("#grants-loading")).to_be_hidden()
        expect(page.locator("#keys-empty")).to_be_visible(timeout=10000)
        expect(page.locator("#keys-loading")).to_be_hidden()
        expect(page.locator("#always-empty")).to_be_visible()
        page.unroute("**/oauth/grants")
        page.reload()
        expect(page.locator("#grants-empty")).to_be_visible(timeout=10000)
        expect(page.locator("#grants-error")).to_be_hidden()
        show_view(page, "home")
        expect(page.locator("#last-empty")).to_be_visible()
        expect(page.locator("#reach")).to_have_text("Agents can reach this phone.")
        expect(page.locator("#reach-quiet")).to_have_text("None set")
        expect(page.locator("#reach-push")).to_have_text("Off")
    finally:
        context.close()
