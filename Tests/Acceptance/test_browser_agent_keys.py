"""Agent keys in the browser phone (docs/agents.md "Signing in": created in the
app and shown once, revoked in the app), in Debian's real Chromium driven by Playwright, against a real
`whereabot serve`: create with a name, the key shown once works with curl, the list shows
name, creation and last use, revoke → 401; a name with HTML stays text."""
import subprocess

from playwright.sync_api import expect

from push_kit import wait_for
# The browser phone tests' fixtures (module-scoped: this module gets instances of its own).
from test_browser_phone import Person, browser, push, relay, show_view, signed_in  # noqa: F401 (fixtures)


def curl_status(base, credential):
    result = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-H",
                             f"Authorization: Bearer {credential}", f"{base}/mcp", "-H", "Content-Type: application/json",
                             "--data", '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'], capture_output=True, text=True, timeout=30)
    return int(result.stdout)


def test_create_show_once_use_and_revoke_an_agent_key(browser, admin, make_user, relay):
    person = Person(admin, make_user, relay)
    context, page = signed_in(browser, person)
    try:
        show_view(page, "agents")
        expect(page.locator("#keys-empty")).to_be_visible()
        page.fill("#key-name", "nightly <img src=x onerror=alert(1)>")
        page.click("#key-form button[type=submit]")
        expect(page.locator("#new-key")).to_be_visible(timeout=10000)
        key = page.locator("#new-key-value").text_content()
        assert key.startswith("wb_") and len(key) == 67
        expect(page.locator("#new-key")).to_contain_text("you will not see it again")
        row = page.locator("#agent-keys li")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("nightly <img src=x onerror=alert(1)>")  # the name is text, never HTML
        assert page.locator("#agent-keys img").count() == 0
        expect(row).to_contain_text(key[:11] + "…")
        expect(row).to_contain_text("never used")
        assert key not in row.text_content()
        # Only the hash is stored.
        assert admin.execute("select count(*) from public.agent_keys where user_id = %s and key_hash = encode(sha256(%s::bytea), 'hex')",
                             (person.user, key.encode())).fetchone() == (1,)
        assert admin.execute("select count(*) from public.agent_keys where key_hash = %s", (key,)).fetchone() == (0,)

        # The copy button (the clipboard may be unavailable headless: then the key is selected).
        page.click("#copy-key")
        expect(page.locator("#copy-key")).not_to_have_text("Copy")
        page.click("#hide-key")
        expect(page.locator("#new-key")).to_be_hidden()
        assert page.locator("#new-key-value").text_content() == ""

        assert curl_status(relay.base, key) == 200
        page.reload()
        expect(page.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page.locator("#view-agents")).to_be_visible()  # the reload keeps the view
        expect(page.locator("#agent-keys li")).to_contain_text("last used")
        expect(page.locator("#new-key")).to_be_hidden()  # shown once: never again after a reload

        page.on("dialog", lambda dialog: dialog.accept())
        page.click("#agent-keys li button")
        expect(page.locator("#agent-keys li")).to_have_count(0, timeout=10000)
        assert wait_for(lambda: curl_status(relay.base, key) == 401, 5), "the revoked key is refused within 5 s"
    finally:
        context.close()


def test_a_key_needs_a_name_and_another_account_never_sees_it(browser, admin, make_user, relay):
    ada, bob = Person(admin, make_user, relay), Person(admin, make_user, relay)
    context, page = signed_in(browser, ada)
    other, page_b = signed_in(browser, bob)
    try:
        show_view(page, "agents")
        show_view(page_b, "agents")
        page.evaluate("document.getElementById('key-name').removeAttribute('required')")
        page.fill("#key-name", "   ")
        page.click("#key-form button[type=submit]")
        expect(page.locator("#new-key")).to_be_hidden()
        page.fill("#key-name", "laptop")
        page.click("#key-form button[type=submit]")
        expect(page.locator("#agent-keys li")).to_have_count(1, timeout=10000)
        page_b.reload()
        expect(page_b.locator("#status")).to_have_text("Connected", timeout=10000)
        expect(page_b.locator("#keys-empty")).to_be_visible()
        expect(page_b.locator("#agent-keys li")).to_have_count(0)
    finally:
        context.close()
        other.close()
