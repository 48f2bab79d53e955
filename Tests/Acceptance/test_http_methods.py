"""What Schemathesis found when run with every check, seen from outside with urllib against a
real relay: a method a route does not support is 405 with `Allow` naming the route's methods, on
every route the relay serves (unknown paths stay 404, HEAD works wherever GET does), and
POST /mcp answers JSON-RPC 2.0's invalid requests — no `method`, `"method": ""`,
`"params": null` — with HTTP 400 and -32600 (Invalid Request), not 200 and -32601."""
import json
import urllib.error
import urllib.request
import uuid

import pytest

from relay_server import RelayServer, token

# Every route the relay serves, with the methods its Allow lists.
ROUTES = {
    "/v1/locate": "POST",
    "/mcp": "POST",
    "/v1/device/answer": "POST",
    "/v1/device": "GET, HEAD",
    "/.well-known/oauth-protected-resource": "GET, HEAD",
    "/.well-known/oauth-protected-resource/mcp": "GET, HEAD",
    "/healthz": "GET, HEAD",
    "/readyz": "GET, HEAD",
    "/metrics": "GET, HEAD",
    "/openapi.yaml": "GET, HEAD",
    "/app": "GET, HEAD",
    "/app/": "GET, HEAD",
    "/app/app.js": "GET, HEAD",
    "/app/no-such-file.js": "GET, HEAD",
}


@pytest.fixture(scope="module")
def relay():
    server = RelayServer()
    yield server
    server.stop()


@pytest.fixture
def agent(make_user):
    user, session, email = make_user("Method Tester", with_session=True)
    return token(user, session, email, client_id=str(uuid.uuid4()))


def call(method, url, body=None, headers=None):
    """(status, headers with lowercase names, body) of one request, any method sent as is."""
    request = urllib.request.Request(url, data=body.encode() if body is not None else None, method=method,
                                     headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read().decode()


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("method", ["TRACE", "PUT", "PATCH", "DELETE", "OPTIONS", "QUERY"])
def test_an_unsupported_method_is_405_with_allow(relay, path, method):
    status, headers, _ = call(method, relay.base + path)
    assert (status, headers.get("allow")) == (405, ROUTES[path]), (method, path)


@pytest.mark.parametrize("path", [p for p, allow in ROUTES.items() if allow == "POST"])
def test_get_and_head_of_a_post_route_are_405_with_credentials_too(relay, agent, path):
    for method in ("GET", "HEAD", "DELETE"):
        status, headers, _ = call(method, relay.base + path, headers={"Authorization": f"Bearer {agent}"})
        assert (status, headers.get("allow")) == (405, "POST"), (method, path)


@pytest.mark.parametrize("path", [p for p, allow in ROUTES.items() if allow == "GET, HEAD"])
def test_post_of_a_get_route_is_405(relay, path):
    status, headers, _ = call("POST", relay.base + path, "{}", {"Content-Type": "application/json"})
    assert (status, headers.get("allow")) == (405, "GET, HEAD"), path


@pytest.mark.parametrize("path", ["/", "/nope", "/v1", "/v1/locate/", "/mcp/x", "/healthz/", "/application"])
def test_unknown_paths_stay_404(relay, path):
    for method in ("GET", "TRACE", "PUT", "POST"):
        status, headers, _ = call(method, relay.base + path)
        assert status == 404 and "allow" not in headers, (method, path)


@pytest.mark.parametrize("path,length", [("/healthz", 2), ("/openapi.yaml", None), ("/app/", None),
                                         ("/.well-known/oauth-protected-resource", None)])
def test_head_works_where_get_does(relay, path, length):
    _, get_headers, get_body = call("GET", relay.base + path)
    status, headers, body = call("HEAD", relay.base + path)
    assert status == 200 and body == ""
    assert headers["content-length"] == str(length or len(get_body.encode())) == get_headers["content-length"]
    assert headers["content-type"] == get_headers["content-type"]


def rpc(relay, agent, body):
    status, _, text = call("POST", relay.base + "/mcp", body,
                           {"Authorization": f"Bearer {agent}", "Content-Type": "application/json"})
    return status, (json.loads(text) if text else None)


@pytest.mark.parametrize("body", [
    '{"jsonrpc": "2.0", "id": "28ab1e98-9385-4aa9-8c5a-6dcbb5c0d9c9"}',  # no method
    '{"jsonrpc": "2.0", "id": "28ab1e98-9385-4aa9-8c5a-6dcbb5c0d9c9", "method": "", "params": null}',
    '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": null}',
    '{"jsonrpc": "2.0", "id": 1, "method": ""}',
    '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"}',
    '{"jsonrpc": "2.0", "id": true, "method": "ping"}',
    '{"jsonrpc": "2.0", "method": "notifications/initialized", "params": null}',
    '1',
])
def test_invalid_json_rpc_requests_are_400_and_32600(relay, agent, body):
    status, answer = rpc(relay, agent, body)
    assert status == 400 and answer == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid Request"}}, body


def test_valid_requests_and_notifications_still_work(relay, agent):
    assert rpc(relay, agent, '{"jsonrpc": "2.0", "method": "notifications/initialized"}') == (202, None)
    assert rpc(relay, agent, '{"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {}}') == (
        200, {"jsonrpc": "2.0", "id": 5, "result": {}})
    # id null is a request in JSON-RPC 2.0 (only a missing id makes a notification): answered, id null.
    assert rpc(relay, agent, '{"jsonrpc": "2.0", "id": null, "method": "ping"}') == (200, {"jsonrpc": "2.0", "id": None, "result": {}})
    # By-position params are JSON-RPC too; no MCP method takes them, so tools/call without a name is -32602.
    assert rpc(relay, agent, '{"jsonrpc": "2.0", "id": "p", "method": "ping", "params": []}') == (
        200, {"jsonrpc": "2.0", "id": "p", "result": {}})
    status, answer = rpc(relay, agent, '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": ["get_phone_location"]}')
    assert status == 200 and answer["error"]["code"] == -32602
    status, answer = rpc(relay, agent, '{"jsonrpc": "2.0", "id": 3, "method": "nope"}')
    assert status == 200 and answer["error"]["code"] == -32601
