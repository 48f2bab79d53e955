"""Reminders of standing grants in the browser phone (docs/protocol.md "Reminders"), in Debian's
real Chromium driven by Playwright, against a real `whereabot serve` with
GRANT_REMINDER_SECONDS=2; the agent is curl. An agent always allowed answers automatically;
the list shows its last use; once the grant has stood the interval, the next automatic
answer is followed by a card and a notification "Claude can still check your location
without asking" with Keep and Remove: Keep keeps it (and the interval starts again), Remove
from the notification ends it (the agent is asked again). With no page open, the reminder
comes as a Web Push, and Remove answers from the service worker alone."""
import json
import subprocess
import time
import uuid

import pytest
from playwright.sync_api import expect

from push_kit import Locate, wait_for
from relay_server import RelayServer
from test_browser_phone import (Person, browser, push, signed_in, subscription_stub,  # noqa: F401 (fixtures)
                                worker_registration)
from test_browser_quiet_hours import always_allow

INTERVAL = 2
TEXT = "Claude can still check your location without asking."


@pytest.fixture(scope="module")
def relay(push):
    server = RelayServer(**push.env, GRANT_REMINDER_SECONDS=str(INTERVAL))
    yield server
    if server.process.poll() is None:
        server.stop()


def located(relay, person):
    call = Locate(relay.base, person.agent, 20).begin()
    call.join()
    assert call.status == 200, call.body


def reminded_at(admin, person):
    return admin.execute("select reminded_at from public.always_allowed_agents where user_id = %s",
                         (person.user,)).fetchone()[0]


def shown(worker, tag):
    """The body and actions of the notification tagged `tag`, or None."""
    return worker.evaluate("""async (tag) => {
        const n = (await self.registration.getNotifications()).find((n) => n.tag === tag);
        return n ? [n.body, ...n.actions.map((a) => a.action)] : null;
    }""", tag)


def click(worker, tag, action):
    """Taps `action` on the notification tagged `tag`: the event the browser would dispatch,
    made in the worker."""
    worker.evaluate("""async ([tag, action]) => {
        const n = (await self.registration.getNotifications()).find((n) => n.tag === tag);
        self.dispatchEvent(new NotificationEvent("notificationclick", { notification: n, action }));
    }""", [tag, action])


def test_a_reminder_card_and_notification_keep_or_remove_the_grant(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        always_allow(page, relay, person)
        expect(page.locator("#always-list li")).to_have_count(1, timeout=10000)
        time.sleep(INTERVAL + 0.3)
        located(relay, person)  # answered by the page itself, then the reminder
        card = page.locator("#reminders li")
        expect(card).to_have_count(1, timeout=10000)
        expect(card.locator("span")).to_have_text(TEXT)
        expect(page.locator("#always-list li")).to_contain_text("last used", timeout=10000)
        first = reminded_at(admin, person)
        assert first is not None, "the reminder was claimed in the database"

        card.get_by_role("button", name="Keep").click()
        expect(card).to_have_count(0)
        wait_for(lambda: reminded_at(admin, person) > first, 10)
        assert reminded_at(admin, person) > first, "Keep starts the interval again"
        expect(page.locator("#always-list li")).to_have_count(1)

        time.sleep(INTERVAL + 0.3)
        located(relay, person)
        expect(card).to_have_count(1, timeout=10000)
        worker = wait_for(lambda: next((w for w in context.service_workers if w.url.endswith("/app/sw.js")), None), 10)
        assert worker, "the page's service worker runs"
        tag = f"reminder:{person.client_id}:"
        actions = wait_for(lambda: shown(worker, tag), 10)
        assert actions == [TEXT, "keep", "remove"], "the notification says it, with both actions"
        click(worker, tag, "remove")
        expect(page.locator("#always-list li")).to_have_count(0, timeout=10000)
        expect(card).to_have_count(0)
        assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s",
                             (person.user,)).fetchone() == (0,), "Remove from the notification ended it"

        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)  # asked again
        page.click("#reject")
        call.join()
        assert call.status == 403
    finally:
        context.close()


def test_a_reminder_pushed_to_a_closed_page_is_removed_from_the_notification(browser, admin, make_user, relay, push):
    """No page of the app is open, so no socket: the grant's due automatic answer comes
    without one (POST /v1/device/answer, as a phone woken by a push answers), and the relay
    that settled it pushes the reminder. The service worker shows it with Keep and Remove;
    Remove answers from the worker (POST /v1/device/answer with the stored session, as
    Reject does): the grant ends and no window opens. The push arrives by CDP's
    ServiceWorker.deliverPushMessage; the action's click is the event the browser would
    dispatch, made in the worker."""
    person = Person(admin, make_user, relay)
    endpoint, p256dh, auth = push.web.subscribe("/sub/reminder-" + uuid.uuid4().hex[:6])
    path = endpoint[len(push.web.origin):]
    context, page = signed_in(browser, person, init_script=subscription_stub(endpoint, p256dh, auth))
    try:
        page.evaluate("navigator.serviceWorker.ready")
        page.click("#enable-push")
        expect(page.locator("#push-status")).to_have_text("Notifications are on.", timeout=10000)
        always_allow(page, relay, person)
        cdp, registration = worker_registration(context, page)
        page.goto("about:blank")
        time.sleep(INTERVAL + 0.3)

        call = Locate(relay.base, person.agent, 30).begin()
        checking = wait_for(lambda: [p for p in push.web_for([path]) if p["payload"].get("kind") == "checking"], 60)
        assert checking, "the closed page's phone is told the agent is checking"
        request_id = checking[0]["payload"]["request_id"]
        answered = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H", f"Authorization: Bearer {person.phone}",
             "-H", "Content-Type: application/json", "-d",
             json.dumps({"type": "location", "id": request_id, "latitude": 52.52, "longitude": 13.405, "accuracy_m": 9,
                         "timestamp_ms": int(time.time() * 1000)}), f"{relay.base}/v1/device/answer"],
            capture_output=True, text=True, timeout=30).stdout
        assert answered == "204"
        call.join()
        assert call.status == 200, call.body

        reminder = wait_for(lambda: [p for p in push.web_for([path]) if p["payload"].get("kind") == "reminder"], 60)
        assert reminder and reminder[0]["payload"]["body"] == TEXT
        cdp.send("ServiceWorker.deliverPushMessage", {"origin": relay.base, "registrationId": registration,
                                                      "data": json.dumps(reminder[0]["payload"])})
        worker = wait_for(lambda: next((w for w in context.service_workers if w.url.endswith("/app/sw.js")), None), 10)
        assert worker
        tag = f"reminder:{person.client_id}:"
        actions = wait_for(lambda: shown(worker, tag), 30)
        assert actions == [TEXT, "keep", "remove"], "the pushed reminder says it, with both actions"
        pages_before = len(context.pages)
        click(worker, tag, "remove")
        assert wait_for(lambda: admin.execute("select count(*) from public.always_allowed_agents where user_id = %s",
                                              (person.user,)).fetchone() == (0,), 30), "Remove from the notification ended it"
        time.sleep(0.5)
        assert len(context.pages) == pages_before, "Remove opened no window"
    finally:
        context.close()
