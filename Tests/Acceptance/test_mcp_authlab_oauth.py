"""An outside checker of the OAuth flow: `mcp-authlab login --thorough`
signs in through the relay's discovery, the relay's own authorization server and its
consent page (driven in Debian's Chromium by Playwright; the person's session from the
Supabase Auth stand-in, which refuses agents' requests as Supabase does today,
supabase/auth#2820), then `mcp-authlab scan` grades the relay with the tokens it got. Its
second, "foreign" token is asked for another resource, which the relay's authorization
server refuses (invalid_target, RFC 8707): the resource-indicator checks pass, and the
resource server's refusal of a token minted for another resource is test_oauth_server's."""
import json
import os
import subprocess
import threading
import time

import pytest

import relay_server
from conftest import ROOT
from relay_server import RelayServer
from test_auth_standin import SECRET as STANDIN_SECRET, StandIn, user_token
from test_browser_phone import browser  # noqa: F401 (fixture)

AUTHLAB = ROOT / ".venv" / "bin" / "mcp-authlab"
SITE_PORT = relay_server.free_port()


@pytest.fixture(scope="module")
def standin():
    server = StandIn({"AUTH_SITE_URL": f"http://127.0.0.1:{SITE_PORT}", "STANDIN_ISSUE_2820": None})
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


def test_authlab_login_through_the_consent_page_then_scan(browser, standin, relay, make_user, tmp_path):
    user, session, email = make_user(with_session=True)
    bearer = user_token(user, session, email, iss=standin.issuer)
    # `login` opens the authorization URL with Python's webbrowser module, which runs $BROWSER:
    # here a script that hands the URL to this test, which opens it in Chromium.
    opened = tmp_path / "opened.txt"
    opener = tmp_path / "open-url"
    opener.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {opened}\n")
    opener.chmod(0o755)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"), "BROWSER": str(opener),
           "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache"), "DISPLAY": ""}
    login = subprocess.Popen([str(AUTHLAB), "login", relay.base + "/mcp", "--timeout", "60", "--no-color", "--thorough",
                              "--foreign-resource", "https://elsewhere.example/mcp"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    urls, output = [], []

    def read():
        for line in login.stdout:
            output.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    context = browser.new_context()
    context.add_init_script("localStorage.setItem('whereabot.session', " + json.dumps(json.dumps(
        {"access_token": bearer, "expires_at": int(time.time()) + 600})) + ")")
    approved = 0
    try:
        deadline = time.monotonic() + 90
        while login.poll() is None and time.monotonic() < deadline:
            if opened.exists():
                urls[:] = [line for line in opened.read_text().split() if "/oauth/authorize?" in line]
            if len(urls) > approved:
                # Each authorization URL in a page of its own: the approval of an earlier one
                # may still be on its way to login's callback when login opens the next
                # (one page for all once had that redirect interrupt the next goto).
                page = context.new_page()
                page.goto(urls[approved])
                approved += 1
                # The consent page, or (an earlier consent) a redirect straight back to login.
                waited = time.monotonic() + 10
                while "/app/oauth/consent" in page.url and time.monotonic() < waited:
                    if page.locator("#consent-ask").is_visible():
                        page.click("#consent-approve")
                        page.wait_for_url(lambda url: "/app/oauth/consent" not in url, timeout=10_000)
                        break
                    time.sleep(0.1)
            time.sleep(0.2)
    finally:
        context.close()
        if login.poll() is None:
            login.kill()
    reader.join(5)
    assert login.returncode == 0 and approved >= 1, "".join(output)[-3000:]
    scan = subprocess.run([str(AUTHLAB), "scan", relay.base + "/mcp", "--tool", "list_people_sharing_with_me", "--format", "json"],
                          capture_output=True, text=True, timeout=180, env=env)
    report = json.loads(scan.stdout)
    print("\nmcp-authlab (OAuth):", report.get("conformance"), report.get("grade"), "must failures:", report.get("must_failures"))
    assert report.get("must_failures") == [], json.dumps(report, indent=1)[:4000]
    results = {result.get("id"): result.get("status") for result in report.get("results", [])}
    print("checks:", results)
    # ASF-04: the token is bound to the resource asked for (RFC 8707); ASF-01/02/05/06: the
    # authorization flow's own MUSTs (PKCE, the wrong verifier, state, iss); TOK-06: the token
    # login got works; the challenges and both metadata documents pass. The foreign token is
    # refused at authorize (invalid_target), so ASF-03 (a wrong redirect_uri at the token
    # endpoint) and TOK-03 (a token for another resource at /mcp) do not run here: both are
    # test_oauth_server's (test_token_requests_that_do_not_match_the_authorization_are_refused,
    # test_a_token_minted_for_another_resource_is_refused).
    assert all(results[check] == "pass" for check in ("ASF-01", "ASF-02", "ASF-04", "ASF-05", "ASF-06", "TOK-06", "CHAL-01",
                                                      "CHAL-02", "CHAL-03", "PRM-01", "ASM-01")), results
    assert "invalid_target" in "".join(output), "".join(output)[-2000:]
