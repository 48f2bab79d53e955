"""Client ID metadata documents (CIMD) at the relay's authorization server: a
`client_id` that is an https URL is fetched — over https with the test's own CA, never
following a redirect, at most 5 KB, never from a loopback or private address unless the
relay allows loopback (tests) — checked, cached, and named to the person by its
`client_name` and host. SSRF through a document URL is the threat; each bound has a test."""
import json

import pytest

from cimd_server import documents  # noqa: F401 (fixture)
from oauth_kit import (REDIRECT, authorize, consent, decode, mcp_status, pkce, query_of, request_id, token,
                       user_token)
from relay_server import RelayServer


@pytest.fixture(scope="module")
def relay(documents):
    server = RelayServer(OAUTH_CIMD_ALLOW_LOOPBACK="1", OAUTH_CIMD_CA_FILE=str(documents.ca))
    yield server
    server.stop()


def page_text(response):
    assert response.status_code == 400 and "location" not in response.headers, (response.status_code, response.headers)
    return response.text


def test_a_document_client_signs_in_and_is_named_by_its_document(relay, documents, make_user):
    who = make_user(with_session=True)
    url = documents.serve_client("/agents/claude.json", "Document Agent", [REDIRECT])
    verifier, challenge = pkce()
    request = request_id(authorize(relay.base, url, challenge, scope="location offline_access"))
    details, redirect = consent(relay.base, request, user_token(*who))
    assert details["client_name"] == "Document Agent" and details["client_host"] == f"127.0.0.1:{documents.port}"
    answer = token(relay.base, grant_type="authorization_code", code=query_of(redirect)["code"], redirect_uri=REDIRECT,
                   code_verifier=verifier, client_id=url)
    assert answer.status_code == 200, answer.text
    assert decode(answer.json()["access_token"], relay.base + "/mcp")["client_id"] == url
    assert mcp_status(relay.base, answer.json()["access_token"]) == 200
    # Cached (its Cache-Control said 600 s): a second authorization fetches nothing.
    request_id(authorize(relay.base, url, challenge))
    assert documents.hits["/agents/claude.json"] == 1


@pytest.mark.parametrize("name, serve, reason", [
    ("mismatch", lambda d, url: d.documents.__setitem__("/mismatch.json", (200, {}, json.dumps(
        {"client_id": "https://elsewhere.example/mismatch.json", "redirect_uris": [REDIRECT]}).encode())),
     "its client_id is not its own URL"),
    ("redirect", lambda d, url: d.documents.__setitem__("/redirect.json", (302, {"Location": d.base + "/agents/claude.json"}, b"")),
     "it answered HTTP 302"),
    ("large", lambda d, url: d.documents.__setitem__("/large.json", (200, {}, json.dumps(
        {"client_id": url, "redirect_uris": [REDIRECT], "padding": "x" * 6000}).encode())),
     "larger than 5 KB"),
    ("secret", lambda d, url: d.documents.__setitem__("/secret.json", (200, {}, json.dumps(
        {"client_id": url, "redirect_uris": [REDIRECT], "client_secret": "s"}).encode())),
     "holds a client secret"),
    ("notjson", lambda d, url: d.documents.__setitem__("/notjson.json", (200, {}, b"<html>")), "not a JSON object"),
    ("missing", lambda d, url: None, "it answered HTTP 404"),
])
def test_documents_that_cannot_be_used_are_a_page(relay, documents, name, serve, reason):
    url = f"{documents.base}/{name}.json"
    serve(documents, url)
    assert reason in page_text(authorize(relay.base, url, pkce()[1]))


def test_a_redirect_uri_the_document_does_not_list_is_refused(relay, documents):
    url = documents.serve_client("/agents/strict.json", "Strict Agent", ["https://agent.example/cb"])
    assert "did not register" in page_text(authorize(relay.base, url, pkce()[1]))


def test_not_https_is_no_document(relay, documents):
    url = f"http://127.0.0.1:{documents.port}/agents/claude.json"
    assert "not known here" in page_text(authorize(relay.base, url, pkce()[1]))


def test_without_loopback_allowed_no_loopback_document_is_fetched(documents):
    """SSRF: a document URL naming the relay's own network is never fetched."""
    relay = RelayServer(OAUTH_CIMD_CA_FILE=str(documents.ca))
    try:
        url = documents.serve_client("/agents/inward.json", "Inward", [REDIRECT])
        for target in (url, "https://localhost:1/agents/a.json", "https://10.0.0.1/agents/a.json",
                       "https://169.254.169.254/latest/meta-data.json", "https://[::1]:1/agents/a.json"):
            assert "not on the public internet" in page_text(authorize(relay.base, target, pkce()[1])), target
        assert "/agents/inward.json" not in documents.hits
    finally:
        relay.stop()


def test_a_certificate_of_an_unknown_ca_is_refused(documents):
    relay = RelayServer(OAUTH_CIMD_ALLOW_LOOPBACK="1")
    try:
        url = documents.serve_client("/agents/untrusted.json", "Untrusted", [REDIRECT])
        assert "TLS certificate did not verify" in page_text(authorize(relay.base, url, pkce()[1]))
    finally:
        relay.stop()
