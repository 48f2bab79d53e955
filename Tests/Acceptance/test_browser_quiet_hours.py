"""Quiet hours and Stop all sharing in the browser phone (docs/protocol.md "Quiet hours",
"Stop all sharing"), in Debian's real Chromium driven by Playwright, against a real `whereabot serve`; the agent is
curl. The person sets a window through the page; during it the agent gets 503 with the
window's end and no prompt appears; a bad window is refused with the relay's sentence and
nothing changes; "May wake me" on an always-allowed agent, or from the prompt's agent menu,
lets that agent through (the prompt says why it came in quiet hours). Stop all sharing names
what ends, then ends it."""
import datetime
import re

from playwright.sync_api import expect

from push_kit import Locate, wait_for
from test_browser_phone import Person, browser, push, relay, show_view, signed_in  # noqa: F401 (fixtures)


def window_around_now(page, zone="UTC"):
    show_view(page, "quiet")
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = (now - datetime.timedelta(hours=1)).strftime("%H:%M"), (now + datetime.timedelta(hours=1)).strftime("%H:%M")
    page.fill("#quiet-start", start)
    page.fill("#quiet-end", end)
    page.fill("#quiet-zone", zone)
    page.click("#quiet-form button[type=submit]")
    return end


def always_allow(page, relay, person):
    """The person's agent asks and the person taps Always allow in the prompt."""
    call = Locate(relay.base, person.agent, 20).begin()
    expect(page.locator("#prompt")).to_be_visible(timeout=10000)
    page.click("#always")
    call.join()
    assert call.status == 200, call.body


def test_quiet_hours_set_in_the_page_hold_agents_back_until_they_end(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        show_view(page, "quiet")
        expect(page.locator("#quiet-empty")).to_be_visible()
        end = window_around_now(page)
        expect(page.locator("#quiet-list li")).to_have_count(1, timeout=10000)
        expect(page.locator("#quiet-list li")).to_contain_text("Every day")
        expect(page.locator("#quiet-now")).to_have_text(
            f"Quiet hours now, until {end} (UTC). Agents you have not let wake you are told to ask again then.")

        call = Locate(relay.base, person.agent, 10).begin()
        call.join()
        assert (call.status, call.body) == (503, f"Grace Hopper is in quiet hours until {end} (their time). Ask again then.")
        expect(page.locator("#prompt")).to_be_hidden()

        page.fill("#quiet-zone", "Mars/Olympus")
        page.click("#quiet-form button[type=submit]")
        expect(page.locator("#quiet-error")).to_have_text(
            "Not saved: window 2: unknown time zone (use an IANA name such as Europe/Berlin)", timeout=10000)
        expect(page.locator("#quiet-list li")).to_have_count(1)
        assert admin.execute("select count(*) from public.quiet_hours where user_id = %s", (person.user,)).fetchone() == (1,)

        page.click("#quiet-list li button")
        expect(page.locator("#quiet-empty")).to_be_visible(timeout=10000)
        expect(page.locator("#quiet-now")).to_be_hidden()
        assert admin.execute("select count(*) from public.quiet_hours where user_id = %s", (person.user,)).fetchone() == (0,)
    finally:
        context.close()


def test_an_always_allowed_agent_marked_may_wake_me_is_answered_in_quiet_hours(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        always_allow(page, relay, person)
        window_around_now(page)
        expect(page.locator("#quiet-now")).to_be_visible(timeout=10000)
        refused = Locate(relay.base, person.agent, 10).begin()
        refused.join()
        assert refused.status == 503, "always allowed is not enough: it may not wake the person"

        show_view(page, "agents")
        page.check("#always-list li input[type=checkbox]")
        expect(page.locator("#always-list li input[type=checkbox]")).to_be_checked()
        assert wait_for(lambda: admin.execute("select client_id from public.may_wake_agents where user_id = %s",
                                              (person.user,)).fetchall() == [(person.client_id,)], 10)
        answered = Locate(relay.base, person.agent, 20).begin()
        answered.join()
        assert answered.status == 200, "answered without a prompt, in quiet hours"
    finally:
        context.close()


def test_may_wake_me_from_the_prompts_agent_menu_lets_the_agent_ask_in_quiet_hours(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)
        expect(page.locator("#prompt-quiet")).to_be_hidden()
        page.click("#prompt-menu summary")
        page.check("#prompt-wake input[type=checkbox]")
        assert wait_for(lambda: admin.execute("select client_id from public.may_wake_agents where user_id = %s",
                                              (person.user,)).fetchall() == [(person.client_id,)], 10)
        expect(page.locator("#prompt-wake")).to_contain_text("Let Claude wake me in quiet hours")
        page.click("#reject")
        call.join()
        assert call.status == 403

        end = window_around_now(page)
        expect(page.locator("#quiet-now")).to_be_visible(timeout=10000)
        call = Locate(relay.base, person.agent, 20).begin()
        expect(page.locator("#prompt")).to_be_visible(timeout=10000)  # it may wake the person: asked
        expect(page.locator("#prompt-quiet")).to_have_text(f"Quiet hours now, until {end} (UTC): Claude may wake you.")
        expect(page.locator("#prompt-wake input[type=checkbox]")).to_be_checked()
        page.click("#allow")
        call.join()
        assert call.status == 200, call.body
    finally:
        context.close()


def test_stop_all_sharing_names_what_ends_then_ends_it(browser, admin, make_user, relay):
    """Stop all sharing in the page: the confirmation names what ends, with the
    counts the page shows; after it the lists are empty and the relay refuses the key."""
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        always_allow(page, relay, person)
        show_view(page, "agents")
        page.fill("#key-name", "nightly")
        page.click("#key-form button[type=submit]")
        key = page.locator("#new-key-value")
        expect(key).to_have_text(re.compile(r"^wb_[0-9a-f]{64}$"), timeout=10000)
        key = key.text_content()
        page.click("#hide-key")
        expect(page.locator("#agent-keys li")).to_have_count(1)

        show_view(page, "account")
        page.click("#stop-all")
        expect(page.locator("#stop-all-confirm")).to_be_visible()
        expect(page.locator("#stop-all-ends li")).to_have_text([
            "1 agent you always allow", "every person you share your location with, and every invitation waiting",
            "1 agent key", "0 connected agents", "every request waiting for your answer (its agent is told you declined)"])
        page.click("#stop-all-cancel")
        expect(page.locator("#stop-all-confirm")).to_be_hidden()
        assert admin.execute("select count(*) from public.always_allowed_agents where user_id = %s", (person.user,)).fetchone() == (1,)

        page.click("#stop-all")
        page.click("#stop-all-yes")
        expect(page.locator("#stop-all-result")).to_have_text(
            "Stopped: 1 always-allowed agent, 0 shares and invitations, 1 agent key, 0 connected agents, 0 waiting requests.",
            timeout=10000)
        expect(page.locator("#always-list li")).to_have_count(0)
        expect(page.locator("#agent-keys li")).to_have_count(0)
        refused = Locate(relay.base, key, 2).begin()
        refused.join()
        assert refused.status == 401, "the key is refused"
    finally:
        context.close()
