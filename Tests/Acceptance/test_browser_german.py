"""The browser phone in German (README "Try it in a browser"): with the browser's language
de-DE, every view, the prompt, the sign-in screen, the consent page and the service
worker's own texts come from strings.json in German. The check compares what is on screen
(visible text, placeholders, labels, titles) with the catalog: no English text of the
catalog is left. The push subscription the page sends says "language": "de"."""
import json
import re
import time
import uuid

import pytest
from playwright.sync_api import expect

from conftest import ROOT
from push_kit import Locate
from test_browser_mobile import LAT, LON, SIZES, VIEWS, consent_page, phone, prepare, walk
from test_browser_phone import browser, push, relay, show_view, subscription_stub, worker_registration  # noqa: F401 (fixtures)

CATALOG = json.loads((ROOT / "Sources" / "Relay" / "Resources" / "app" / "strings.json").read_text())
LETTER = "A-Za-zÄÖÜäöüß"


def english_fragments():
    """The English catalog's words that German says differently: each text's parts between
    its {placeholders}, trimmed, with three letters at least."""
    fragments = set()
    for key, english in CATALOG["en"].items():
        if english == CATALOG["de"][key]:
            continue
        for part in re.split(r"\{[a-z_]+\}", english):
            part = part.strip(" ,.:;()—–-“”\"'…")
            if len(re.findall(f"[{LETTER}]", part)) >= 3:
                fragments.add(part)
    return fragments


FRAGMENTS = english_fragments()


def english_left(text):
    return sorted(fragment for fragment in FRAGMENTS
                  if re.search(f"(?<![{LETTER}]){re.escape(fragment)}(?![{LETTER}])", text))


def on_screen(page):
    """The page's visible text, with the visible elements' placeholders, labels and titles, and the document's title."""
    return page.evaluate("""() => [document.title, document.body.innerText,
        ...[...document.querySelectorAll('[placeholder], [aria-label], [title]')]
          .filter((element) => element.checkVisibility())
          .flatMap((element) => ['placeholder', 'aria-label', 'title'].map((name) => element.getAttribute(name) || ''))
      ].join('\\n')""")


def all_german(page, where):
    assert page.evaluate("document.documentElement.lang") == "de", where
    text = on_screen(page)
    assert english_left(text) == [], f"{where}: English left on screen: {english_left(text)}\n{text}"
    return text


def german_storage(person):
    now = int(time.time() * 1000)
    history = [{"id": str(uuid.uuid4()), "at": now - 60_000, "agent": "Claude", "client_id": person.client_id,
                "requester_name": None, "reason": "Um dich am Bahnhof abzuholen", "outcome": "shared", "precision": "approximate",
                "device": "Chrome unter Linux"},
               {"id": str(uuid.uuid4()), "at": now - 3_600_000, "agent": "Cursor", "client_id": "cursor", "requester_name": "Ada",
                "reason": None, "outcome": "declined", "precision": None, "device": None}]
    places = [{"name": "Zuhause", "latitude": LAT, "longitude": LON, "radius_m": 250, "share": "name"}]
    session = {"access_token": person.phone, "expires_at": int(time.time()) + 3600}
    return ("if (!localStorage.getItem('whereabot.session')) {"
            f" localStorage.setItem('whereabot.session', {json.dumps(json.dumps(session))});"
            f" localStorage.setItem('whereabot.history', {json.dumps(json.dumps(history))});"
            f" localStorage.setItem('whereabot.places', {json.dumps(json.dumps(places))}); }}")


@pytest.fixture(scope="module")
def person(browser, relay):
    return prepare(browser, relay, locale="de-DE", key_name="nächtliches Skript", storage=german_storage)


TITLES = {"home": "Dieses Telefon", "requests": "Anfragen", "agents": "Agenten", "places": "Orte", "quiet": "Ruhezeiten",
          "devices": "Geräte", "account": "Konto"}


def test_every_view_the_prompt_and_the_consent_page_are_german(browser, relay, person):
    context, page = phone(browser, person, SIZES[0], "light", locale="de-DE")
    try:
        page.goto(relay.base + "/app/")
        expect(page.locator("#status")).to_have_text("Verbunden", timeout=10000)
        for view in VIEWS:
            show_view(page, view)
            expect(page.locator(f"#view-{view} h2")).to_have_text(TITLES[view])
            if view == "agents":
                expect(page.locator("#grants li")).to_have_count(1, timeout=10000)
                expect(page.locator("#agent-keys li")).to_contain_text("erstellt", timeout=10000)
                expect(page.locator("#always-list li")).to_contain_text("Claude (genau)")
            if view == "quiet":
                expect(page.locator("#quiet-list li")).to_contain_text("Jeden Tag", timeout=10000)
            if view == "devices":
                expect(page.locator("#devices li").first).to_contain_text("Chrome unter Linux (web)", timeout=10000)
            if view == "requests":
                expect(page.locator("#history li").first).to_contain_text("Claude: Geteilt (ungefähr) von Chrome unter Linux")
            all_german(page, view)
        show_view(page, "account")
        page.click("#stop-all")
        expect(page.locator("#stop-all-ends li").first).to_have_text("1 immer erlaubten Agenten")
        all_german(page, "stop all sharing, asked")
        page.click("#stop-all-cancel")

        call = Locate(relay.base, person.cursor, 20, reason="Bist du schon unterwegs?").begin()
        expect(page.locator("#prompt-text")).to_have_text("Dein Agent Cursor möchte wissen, wo du bist", timeout=10000)
        expect(page.locator("#prompt-reason")).to_have_text("„Bist du schon unterwegs?“, sagt Cursor")
        expect(page.locator("#prompt-countdown")).to_contain_text("noch ")
        page.click("#prompt-menu summary")
        expect(page.locator("#prompt-wake")).to_have_text("Cursor darf mich in Ruhezeiten wecken")
        all_german(page, "prompt")
        page.click("#approximate")
        call.join()
        assert call.status == 200, call.body
        show_view(page, "requests")
        expect(page.locator("#history li").first).to_contain_text("Cursor: Geteilt (nur der Name des Ortes) von Chrome unter Linux")
        all_german(page, "requests after an answer")
        show_view(page, "home")
        expect(page.locator("#reach")).to_have_text("Agenten erreichen dieses Telefon.")
        all_german(page, "home after an answer")

        call = Locate(relay.base, person.agent, 20).begin()  # Claude is always allowed: answered, a banner says so
        call.join()
        expect(page.locator("#banner")).to_have_text("Claude hat deinen Standort abgefragt (nur den Namen des Ortes)")
        all_german(page, "banner")
    finally:
        context.close()
    context, page = consent_page(browser, relay, person, SIZES[0], "dark", locale="de-DE")
    try:
        expect(page.locator("#consent-text")).to_have_text(
            "Claude Desktop wird nach deinem Standort fragen können. Du wirst jedes Mal gefragt, außer du wählst „Immer erlauben“.")
        assert page.title() == "Whereabot — Agent verbinden"
        all_german(page, "consent page")
        page.goto(f"{relay.base}/app/oauth/consent?request=not-a-uuid")
        expect(page.locator("#consent-error-text")).to_have_text(
            "Dieser Link zum Verbinden eines Agenten ist ungültig. Beginne erneut bei deinem Agenten.")
        all_german(page, "consent page, a bad link")
    finally:
        context.close()
    context, page = phone(browser, None, SIZES[0], "light", locale="de-DE")
    try:
        page.goto(relay.base + "/app/")
        expect(page.locator("#signin")).to_be_visible(timeout=10000)
        expect(page.locator("#status")).to_have_text("Abgemeldet")
        all_german(page, "sign-in")
        page.goto(person.link)
        expect(page.locator("#confirm-text")).to_have_text(f"In diesem Browser als {person.email} anmelden?", timeout=10000)
        all_german(page, "sign-in confirmation")
    finally:
        context.close()


def test_an_english_browser_gets_english_and_the_check_would_see_it(browser, relay, person):
    """The comparison has teeth: the same page in English shows the catalog's English."""
    context, page = phone(browser, person, SIZES[0], "light", locale="en-US")
    try:
        page.goto(relay.base + "/app/#/agents")
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        assert page.evaluate("document.documentElement.lang") == "en"
        assert {"Connected", "Agents", "Always allowed", "Agent keys"} <= set(english_left(on_screen(page)))
    finally:
        context.close()


def test_the_push_subscription_and_the_service_workers_texts_are_german(browser, relay, person, push, admin):
    endpoint, p256dh, auth = push.web.subscribe("/sub/de-" + uuid.uuid4().hex[:6])
    context, page = phone(browser, person, SIZES[1], "light", locale="de-DE")
    context.add_init_script(subscription_stub(endpoint, p256dh, auth))
    sent = []
    page.on("websocket", lambda socket: socket.on("framesent", lambda frame: sent.append(frame)))
    try:
        page.goto(relay.base + "/app/")
        expect(page.locator("#status")).to_have_text("Verbunden", timeout=10000)
        page.evaluate("navigator.serviceWorker.ready")
        page.click("#enable-push")
        expect(page.locator("#push-status")).to_have_text("Benachrichtigungen sind an.", timeout=10000)
        expect(page.locator("#reach-push")).to_have_text("An")
        subscriptions = [json.loads(frame) for frame in sent if '"push_subscription"' in frame]
        assert subscriptions and all(message["language"] == "de" for message in subscriptions), subscriptions
        page.reload()  # sent again on every connect, with the language
        expect(page.locator("#status")).to_have_text("Verbunden", timeout=10000)
        for _ in range(50):
            if len([frame for frame in sent if '"push_subscription"' in frame]) > len(subscriptions):
                break
            page.wait_for_timeout(100)
        again = [json.loads(frame) for frame in sent if '"push_subscription"' in frame][len(subscriptions):]
        assert again and again[0]["language"] == "de" and again[0]["endpoint"] == endpoint

        cdp, registration = worker_registration(context, page)
        payloads = [{"request_id": "r-" + uuid.uuid4().hex[:8], "title": "Whereabot", "body": "Ein Agent möchte wissen, wo du bist",
                     "kind": "alert", "expires_ms": int(time.time() * 1000) + 60_000},
                    {"kind": "alert", "garbage": True},
                    {"kind": "reminder", "client_id": person.client_id, "requester_id": None, "title": "Whereabot",
                     "body": "Claude kann deinen Standort weiterhin ohne Nachfrage abrufen."}]
        worker = next(w for w in context.service_workers if w.url.endswith("/app/sw.js"))
        by_tag = {}
        # One push at a time, each until its notification shows: a push is delivered at best
        # effort (a busy machine has dropped one of three sent at once), the texts are the point.
        for payload, tag in zip(payloads, [payloads[0]["request_id"], "whereabot", f"reminder:{person.client_id}:"]):
            for _ in range(200):  # a bound against a hang, no timing asserted
                if _ % 50 == 0:
                    cdp.send("ServiceWorker.deliverPushMessage", {"origin": relay.base, "registrationId": registration,
                                                                  "data": json.dumps(payload)})
                by_tag = {entry[0]: entry[1:] for entry in worker.evaluate("""async () => (await self.registration
                    .getNotifications()).map((n) => [n.tag, n.body, ...n.actions.map((a) => a.title)])""")}
                if tag in by_tag:
                    break
                page.wait_for_timeout(100)
        assert by_tag[payloads[0]["request_id"]] == [payloads[0]["body"], "Ablehnen", "Erlauben"]
        assert by_tag["whereabot"] == ["Eine Standortanfrage ist eingegangen"]
        assert by_tag[f"reminder:{person.client_id}:"] == [payloads[2]["body"], "Behalten", "Entfernen"]
    finally:
        context.close()
