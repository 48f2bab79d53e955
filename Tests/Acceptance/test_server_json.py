"""server.json, Whereabot's entry for the MCP Registry, is valid against the registry's published
schema and names an endpoint a real relay serves: one streamable-http remote whose URL template
`https://{relay_host}/mcp` serves every self-hosted relay, with exactly the variables it
declares, the relay's own MCP path, and — with a running relay's host put in — a 401 that sends
the client on to OAuth discovery (RFC 9728).

schemas/mcp-registry-server.schema.json is https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json byte for byte (sha256 below), taken from that site's source, github.com/modelcontextprotocol/static, schemas/2025-12-11/server.schema.json at commit a9ba437d9fbbe92076a24b20d56449ac7c7786ac (2025-12-12), the newest dated schema there; moving to a newer one is a deliberate change: replace the file and SCHEMA_SHA256 together."""
import copy
import hashlib
import json
import re
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

import jsonschema
import pytest

from conftest import ROOT
from relay_server import RelayServer

SERVER_JSON = ROOT / "server.json"
SCHEMA_FILE = ROOT / "Tests" / "Acceptance" / "schemas" / "mcp-registry-server.schema.json"
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
SCHEMA_ID = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
TEMPLATE_VARIABLE = re.compile(r"\{([^{}]+)\}")


def load(path):
    return json.loads(path.read_text())


def validator():
    """The validator for the draft the schema declares (draft-07), checking formats: its `uri`
    fields ($schema, websiteUrl, repository.url) are only checked when jsonschema has a `uri`
    checker, which needs rfc3986-validator (requirements.txt)."""
    schema = load(SCHEMA_FILE)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    assert "uri" in cls.FORMAT_CHECKER.checkers, "no uri format checker: install rfc3986-validator"
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def remote():
    """The one remote server.json lists."""
    remotes = load(SERVER_JSON)["remotes"]
    assert len(remotes) == 1
    return remotes[0]


def mcp_route():
    """The path the relay's route table registers for MCP (`case mcp = "/mcp"`)."""
    source = (ROOT / "Sources" / "Relay" / "Routes" / "RelayRoutes+Route.swift").read_text()
    return re.search(r'case mcp = "([^"]+)"', source).group(1)


def test_the_vendored_schema_is_the_published_one():
    assert hashlib.sha256(SCHEMA_FILE.read_bytes()).hexdigest() == SCHEMA_SHA256
    schema = load(SCHEMA_FILE)
    assert schema["$id"] == SCHEMA_ID and schema["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_server_json_is_valid_against_the_registry_schema():
    server = load(SERVER_JSON)
    assert server["$schema"] == SCHEMA_ID, "server.json names the schema it is checked against"
    errors = sorted(validator().iter_errors(server), key=lambda error: list(error.path))
    assert not errors, "\n".join(f"{list(error.path)}: {error.message}" for error in errors)


@pytest.mark.parametrize("path, value", [
    (("remotes", 0, "type"), "streamable_http"),  # the transport misspelled
    (("$schema",), "not a uri"),  # only a format check catches this one
    (("description",), "x" * 101),
])
def test_the_validator_rejects_a_broken_copy(path, value):
    """So the validation above cannot pass vacuously."""
    broken = copy.deepcopy(load(SERVER_JSON))
    target = broken
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert list(validator().iter_errors(broken)), f"{path} = {value!r} was accepted"


def test_what_the_schema_cannot_say():
    """The URL's variables are exactly the declared ones (the registry refuses an undeclared
    one; a declared one it never uses would be asked of the user for nothing), each required,
    with nothing filled in and nothing secret; no headers (OAuth or an agent key, never a
    token in the listing); https (the registry requires it for remotes); the relay's MCP path;
    the relay's version."""
    entry = remote()
    assert entry["type"] == "streamable-http"
    variables = entry["variables"]
    assert set(TEMPLATE_VARIABLE.findall(entry["url"])) == set(variables) == {"relay_host"}
    for name, variable in variables.items():
        assert variable["isRequired"] is True and variable["description"], name
        assert not {"default", "value", "choices"} & set(variable), f"{name} is chosen by the user"
        assert not variable.get("isSecret", False), name
    assert "headers" not in entry
    text = json.dumps(load(SERVER_JSON)).lower()
    assert "bearer" not in text and "wb_" not in text and "authorization" not in text
    split = urlsplit(entry["url"])
    assert split.scheme == "https" and split.netloc == "{relay_host}"
    assert split.path == mcp_route() == "/mcp" and not split.query and not split.fragment
    relay_swift = (ROOT / "Sources" / "Relay" / "Relay.swift").read_text()
    assert load(SERVER_JSON)["version"] == re.search(r'static let version = "([^"]+)"', relay_swift).group(1)


@pytest.fixture(scope="module")
def relay():
    server = RelayServer()
    yield server
    server.stop()


def test_the_template_with_a_relay_host_is_its_mcp_endpoint(relay):
    """`relay_host` = 127.0.0.1:PORT of a running relay (plain http here; the listing says
    https) gives the endpoint an MCP client would call: without a credential it answers 401
    with `WWW-Authenticate: Bearer resource_metadata="…"`, and that metadata (RFC 9728) names
    this same URL as the resource."""
    entry = remote()
    url = TEMPLATE_VARIABLE.sub(lambda match: {"relay_host": f"127.0.0.1:{relay.port}"}[match.group(1)], entry["url"])
    endpoint = urlunsplit(urlsplit(url)._replace(scheme="http"))
    assert endpoint == f"{relay.base}/mcp"
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "registry-listing", "version": "1"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    request = urllib.request.Request(endpoint, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401
    challenge = refused.value.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    pointer = re.search(r'resource_metadata="([^"]+)"', challenge)
    assert pointer, challenge
    assert pointer.group(1) == f"{relay.base}/.well-known/oauth-protected-resource"
    with urllib.request.urlopen(pointer.group(1), timeout=10) as response:
        metadata = json.loads(response.read())
    assert metadata["resource"] == endpoint
    assert isinstance(metadata["authorization_servers"], list) and metadata["bearer_methods_supported"] == ["header"]
