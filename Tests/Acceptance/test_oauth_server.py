"""The relay as the agents' OAuth 2.1 authorization server (docs/agents.md
"Signing in"), driven with plain HTTP as a ChatGPT-shaped client would (public client,
`resource`, `offline_access`, `prompt=consent`), and PyJWT reading the tokens. Every
threat docs/agents.md names has a test here: open redirect, code injection and replay,
mix-up (`iss`), CSRF on the consent, token replay across resources, registration floods."""
import time
import urllib.parse
import uuid

import httpx2 as httpx
import jwt
import pytest

from oauth_kit import (REDIRECT, age_registrations, authorize, consent, decode, mcp_status, pkce, query_of, refused_within, register,
                       request_id, sign_in, signing_key, token, user_token)
from relay_server import RelayServer


@pytest.fixture(scope="module")
def relays():
    first = RelayServer()
    servers = [first, RelayServer(PUBLIC_URL=first.base)]  # two instances of one relay behind one URL
    yield servers
    for server in servers:
        server.stop()
        for marker in ("wbrt_", "wbk_", "wbs_", "eyJ"):  # no token, code, secret in any log line
            assert marker not in server.logs, f"{marker}… logged"


@pytest.fixture(autouse=True)
def fresh_registration_budget():
    age_registrations()


@pytest.fixture
def relay(relays):
    return relays[0]


@pytest.fixture
def who(make_user):
    return make_user(with_session=True)


def test_metadata_names_every_endpoint_at_both_paths(relay):
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        document = httpx.get(relay.base + path).json()
        assert document["issuer"] == relay.base
        assert document["authorization_endpoint"] == relay.base + "/oauth/authorize"
        assert document["token_endpoint"] == relay.base + "/oauth/token"
        assert document["registration_endpoint"] == relay.base + "/oauth/register"
        assert document["revocation_endpoint"] == relay.base + "/oauth/revoke"
        assert document["code_challenge_methods_supported"] == ["S256"]
        assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
        assert set(document["token_endpoint_auth_methods_supported"]) == {"none", "client_secret_post", "client_secret_basic"}
        assert document["scopes_supported"] == ["location", "offline_access"]
        assert document["client_id_metadata_document_supported"] is True
        assert document["authorization_response_iss_parameter_supported"] is True
    resource = httpx.get(relay.base + "/.well-known/oauth-protected-resource").json()
    assert resource["authorization_servers"] == [relay.base] and resource["resource"] == relay.base + "/mcp"
    challenge = httpx.post(relay.base + "/mcp", json={}).headers["www-authenticate"]
    assert 'scope="location"' in challenge


def test_a_chatgpt_shaped_client_signs_in_refreshes_and_a_reused_refresh_token_revokes_the_family(relays, who):
    relay, other = relays
    client_id, tokens = sign_in(relay.base, who, prompt="consent")
    assert client_id.startswith("wbc_")
    claims = decode(tokens["access_token"], relay.base + "/mcp")
    assert claims["iss"] == relay.base and claims["sub"] == str(who[0]) and claims["client_id"] == client_id
    assert claims["scope"] == "location offline_access" and claims["exp"] - claims["iat"] == 3600
    assert tokens["token_type"] == "Bearer" and tokens["refresh_token"].startswith("wbrt_")
    assert mcp_status(relay.base, tokens["access_token"]) == 200 and mcp_status(other.base, tokens["access_token"]) == 200
    rotated = token(other.base, grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client_id)
    assert rotated.status_code == 200, rotated.text
    assert rotated.headers["cache-control"] == "no-store"
    fresh = rotated.json()
    assert fresh["refresh_token"] != tokens["refresh_token"] and mcp_status(relay.base, fresh["access_token"]) == 200
    replayed = token(relay.base, grant_type="refresh_token", refresh_token=tokens["refresh_token"], client_id=client_id)
    assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
    # The whole family ends: the rotated refresh token and every access token of it.
    assert token(relay.base, grant_type="refresh_token", refresh_token=fresh["refresh_token"],
                 client_id=client_id).json()["error"] == "invalid_grant"
    assert refused_within(5, lambda: mcp_status(relay.base, fresh["access_token"]),
                          lambda: mcp_status(other.base, tokens["access_token"]))


def test_without_offline_access_a_client_that_did_not_register_refresh_gets_none(relay, who):
    _, tokens = sign_in(relay.base, who, scope="location", grant_types=["authorization_code"])
    assert "refresh_token" not in tokens and tokens["scope"] == "location"


def test_a_code_is_used_once_and_its_second_use_revokes_what_the_first_made(relay, who):
    client_id = register(relay.base).json()["client_id"]
    verifier, challenge = pkce()
    _, redirect = consent(relay.base, request_id(authorize(relay.base, client_id, challenge)), user_token(*who))
    code = query_of(redirect)["code"]
    form = dict(grant_type="authorization_code", code=code, redirect_uri=REDIRECT, code_verifier=verifier, client_id=client_id)
    first = token(relay.base, **form).json()
    again = token(relay.base, **form)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert refused_within(5, lambda: mcp_status(relay.base, first["access_token"]))


@pytest.mark.parametrize("change, error", [
    ({"code_verifier": "x" * 50}, "invalid_grant"),             # PKCE: another verifier
    ({"redirect_uri": "http://127.0.0.1:9/other"}, "invalid_grant"),  # code injection into another redirect
    ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
    ({"grant_type": "password"}, "unsupported_grant_type"),
])
def test_token_requests_that_do_not_match_the_authorization_are_refused(relay, who, change, error):
    client_id = register(relay.base).json()["client_id"]
    verifier, challenge = pkce()
    _, redirect = consent(relay.base, request_id(authorize(relay.base, client_id, challenge)), user_token(*who))
    form = dict(grant_type="authorization_code", code=query_of(redirect)["code"], redirect_uri=REDIRECT,
                code_verifier=verifier, client_id=client_id)
    answer = token(relay.base, **{**form, **change})
    assert answer.status_code == 400 and answer.json()["error"] == error, answer.text


def test_another_clients_code_is_refused(relay, who):
    mine, theirs = register(relay.base).json()["client_id"], register(relay.base).json()["client_id"]
    verifier, challenge = pkce()
    _, redirect = consent(relay.base, request_id(authorize(relay.base, mine, challenge)), user_token(*who))
    answer = token(relay.base, grant_type="authorization_code", code=query_of(redirect)["code"], redirect_uri=REDIRECT,
                   code_verifier=verifier, client_id=theirs)
    assert answer.json()["error"] == "invalid_grant"


def test_an_expired_code_is_refused(relay, who, admin):
    client_id = register(relay.base).json()["client_id"]
    verifier, challenge = pkce()
    request = request_id(authorize(relay.base, client_id, challenge))
    _, redirect = consent(relay.base, request, user_token(*who))
    admin.execute("update private.oauth_authorizations set expires_at = now() - interval '1 second' where id = %s",
                  (request,))
    answer = token(relay.base, grant_type="authorization_code", code=query_of(redirect)["code"], redirect_uri=REDIRECT,
                   code_verifier=verifier, client_id=client_id)
    assert answer.json()["error"] == "invalid_grant"


def test_the_redirect_carries_code_state_and_iss_and_deny_access_denied(relay, who):
    client_id = register(relay.base).json()["client_id"]
    _, challenge = pkce()
    response = authorize(relay.base, client_id, challenge, state="s-1")
    _, redirect = consent(relay.base, request_id(response), user_token(*who))
    assert redirect.startswith(REDIRECT + "?")
    approved = query_of(redirect)
    assert approved["state"] == "s-1" and approved["iss"] == relay.base and len(approved["code"]) > 40
    _, denied = consent(relay.base, request_id(authorize(relay.base, client_id, challenge, state="s-2")),
                        user_token(*who), action="deny")
    assert query_of(denied) == {"error": "access_denied", "state": "s-2", "iss": relay.base}


def test_consent_needs_the_persons_session_and_the_token_of_that_request(relay, who, make_user):
    client_id = register(relay.base).json()["client_id"]
    _, challenge = pkce()
    request = request_id(authorize(relay.base, client_id, challenge))
    other = make_user(with_session=True)
    assert httpx.get(f"{relay.base}/oauth/consent/{request}").status_code == 401
    details = httpx.get(f"{relay.base}/oauth/consent/{request}", headers={"Authorization": "Bearer " + user_token(*who)})
    assert details.json()["client_name"] == "Test Agent" and details.json()["email"] == who[2]
    assert details.json()["client_host"] == "127.0.0.1:9"
    # CSRF: another person's page (or one that never loaded this request) cannot decide it.
    forged = httpx.post(f"{relay.base}/oauth/consent/{request}", headers={"Authorization": "Bearer " + user_token(*other)},
                        json={"action": "approve", "consent_token": details.json()["consent_token"]})
    assert forged.status_code == 403
    # An agent's token is no person's session.
    agent = sign_in(relay.base, who)[1]["access_token"]
    assert httpx.get(f"{relay.base}/oauth/consent/{request}", headers={"Authorization": "Bearer " + agent}).status_code == 401
    # Decided once.
    consent(relay.base, request, user_token(*who))
    again = httpx.post(f"{relay.base}/oauth/consent/{request}", headers={"Authorization": "Bearer " + user_token(*who)},
                       json={"action": "approve", "consent_token": details.json()["consent_token"]})
    assert again.status_code == 404


@pytest.mark.parametrize("params, text", [
    ({"client_id": "wbc_" + "0" * 32}, "not known here"),
    ({"redirect_uri": "https://attacker.example/cb"}, "did not register"),   # open redirect
    ({"redirect_uri": "http://127.0.0.1:9/callback#frag"}, "did not register"),
    ({"client_id": ""}, "names no client"),
])
def test_client_errors_are_a_page_and_never_a_redirect(relay, params, text):
    client_id = register(relay.base).json()["client_id"]
    _, challenge = pkce()
    response = authorize(relay.base, client_id, challenge, **params)
    assert response.status_code == 400 and "location" not in response.headers
    assert text in response.text and response.headers["content-type"].startswith("text/html")


def test_a_repeated_parameter_is_a_page(relay):
    client_id = register(relay.base).json()["client_id"]
    response = httpx.get(f"{relay.base}/oauth/authorize?client_id={client_id}&client_id={client_id}")
    assert response.status_code == 400 and "location" not in response.headers


@pytest.mark.parametrize("params, error", [
    ({"code_challenge_method": "plain"}, "invalid_request"),
    ({"code_challenge": None}, "invalid_request"),
    ({"response_type": "token"}, "unsupported_response_type"),
    ({"resource": "https://elsewhere.example/mcp"}, "invalid_target"),
])
def test_request_errors_go_back_to_the_verified_redirect(relay, params, error):
    client_id = register(relay.base).json()["client_id"]
    _, challenge = pkce()
    response = authorize(relay.base, client_id, challenge, state="s-9", **params)
    assert response.status_code == 302
    back = query_of(response.headers["location"])
    assert response.headers["location"].startswith(REDIRECT + "?")
    assert back["error"] == error and back["state"] == "s-9" and back["iss"] == relay.base


def test_loopback_redirects_match_on_any_port(relay, who):
    client_id = register(relay.base, redirect_uris=["http://127.0.0.1/callback"]).json()["client_id"]
    verifier, challenge = pkce()
    response = authorize(relay.base, client_id, challenge, redirect_uri="http://127.0.0.1:51234/callback")
    _, redirect = consent(relay.base, request_id(response), user_token(*who))
    assert redirect.startswith("http://127.0.0.1:51234/callback?")
    assert authorize(relay.base, client_id, challenge, redirect_uri="http://127.0.0.1:51234/other").status_code == 400


def test_a_token_minted_for_another_resource_is_refused(relay, who):
    _, tokens = sign_in(relay.base, who)
    claims = decode(tokens["access_token"], relay.base + "/mcp")
    for audience in ("https://elsewhere.example/mcp", "authenticated"):
        forged = jwt.encode({**claims, "aud": audience}, signing_key(), algorithm="HS256")
        assert mcp_status(relay.base, forged) == 401
    assert mcp_status(relay.base, jwt.encode(claims, b"another key", algorithm="HS256")) == 401
    # The origin is the same resource (RFC 8707 lets a client name it).
    _, by_origin = sign_in(relay.base, who, resource=relay.base)
    assert decode(by_origin["access_token"], relay.base)["aud"] == relay.base
    assert mcp_status(relay.base, by_origin["access_token"]) == 200


def test_confidential_clients_authenticate_with_their_secret(relay, who):
    registered = register(relay.base, token_endpoint_auth_method="client_secret_basic").json()
    assert registered["client_secret"].startswith("wbs_") and registered["client_secret_expires_at"] == 0
    verifier, challenge = pkce()
    _, redirect = consent(relay.base, request_id(authorize(relay.base, registered["client_id"], challenge)), user_token(*who))
    form = dict(grant_type="authorization_code", code=query_of(redirect)["code"], redirect_uri=REDIRECT, code_verifier=verifier)
    wrong = httpx.post(relay.base + "/oauth/token", data=form, auth=(registered["client_id"], "wbs_wrong"))
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    right = httpx.post(relay.base + "/oauth/token", data=form, auth=(registered["client_id"], registered["client_secret"]))
    assert right.status_code == 200, right.text


@pytest.mark.parametrize("fields, error", [
    ({"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
    ({"redirect_uris": ["https://user@example.com/cb"]}, "invalid_redirect_uri"),
    ({"redirect_uris": []}, "invalid_redirect_uri"),
    ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
    ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
])
def test_registration_refuses_bad_metadata(relay, fields, error):
    response = register(relay.base, **fields)
    assert response.status_code == 400 and response.json()["error"] == error


def test_registration_floods_are_bounded_per_address():
    relay = RelayServer()  # a fresh address budget: the other tests registered from this address too
    answers = [register(relay.base).status_code for _ in range(21)]
    relay.stop()
    assert answers.count(201) <= 20 and answers[-1] == 429


def test_revocation_ends_the_family_on_every_instance(relays, who):
    relay, other = relays
    client_id, tokens = sign_in(relay.base, who)
    answer = httpx.post(relay.base + "/oauth/revoke", data={"token": tokens["refresh_token"], "client_id": client_id})
    assert answer.status_code == 200
    assert refused_within(5, lambda: mcp_status(relay.base, tokens["access_token"]),
                          lambda: mcp_status(other.base, tokens["access_token"]))
    client_id, tokens = sign_in(relay.base, who)
    assert httpx.post(relay.base + "/oauth/revoke", data={"token": tokens["access_token"], "client_id": client_id}).status_code == 200
    assert refused_within(5, lambda: mcp_status(other.base, tokens["access_token"]))


def test_disconnecting_an_agent_refuses_its_tokens_on_two_instances_within_5_s(relays, who):
    relay, other = relays
    client_id, tokens = sign_in(relay.base, who)
    bearer = {"Authorization": "Bearer " + user_token(*who)}
    listed = httpx.get(relay.base + "/oauth/grants", headers=bearer).json()
    grant = next(item for item in listed if item["client_id"] == client_id)
    assert grant["client_name"] == "Test Agent" and grant["client_host"] == "127.0.0.1:9" and grant["last_used_at"]
    assert mcp_status(other.base, tokens["access_token"]) == 200
    assert httpx.delete(f"{relay.base}/oauth/grants/{grant['id']}", headers=bearer).status_code == 204
    started = time.monotonic()
    assert refused_within(5, lambda: mcp_status(relay.base, tokens["access_token"]),
                          lambda: mcp_status(other.base, tokens["access_token"]))
    assert time.monotonic() - started < 5
    assert token(relay.base, grant_type="refresh_token", refresh_token=tokens["refresh_token"],
                 client_id=client_id).json()["error"] == "invalid_grant"
    assert httpx.delete(f"{relay.base}/oauth/grants/{grant['id']}", headers=bearer).status_code == 404


def test_grants_are_each_persons_own(relay, who, make_user):
    sign_in(relay.base, who)
    stranger = make_user(with_session=True)
    assert httpx.get(relay.base + "/oauth/grants", headers={"Authorization": "Bearer " + user_token(*stranger)}).json() == []
    mine = httpx.get(relay.base + "/oauth/grants", headers={"Authorization": "Bearer " + user_token(*who)}).json()
    assert httpx.delete(f"{relay.base}/oauth/grants/{mine[0]['id']}",
                        headers={"Authorization": "Bearer " + user_token(*stranger)}).status_code == 404
    assert httpx.get(relay.base + "/oauth/grants").status_code == 401


def test_one_grant_per_person_and_client(relay, who, admin):
    client_id, _ = sign_in(relay.base, who)
    sign_in(relay.base, who, client_id=client_id)
    count = admin.execute("select count(*) from public.oauth_grants where user_id = %s and client_id = %s",
                          (who[0], client_id)).fetchone()[0]
    assert count == 1


def test_codes_and_tokens_are_kept_only_as_digests(relay, who, admin):
    client_id, tokens = sign_in(relay.base, who)
    tables = ["private.oauth_clients", "private.oauth_authorizations", "private.oauth_families",
              "private.oauth_refresh_tokens", "public.oauth_grants"]
    dump = " ".join(str(admin.execute(f"select * from {table}").fetchall()) for table in tables)
    assert tokens["refresh_token"] not in dump and tokens["access_token"] not in dump
    assert tokens["refresh_token"][4:] not in dump
