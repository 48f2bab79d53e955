"""docs/openapi.yaml is the relay's own description (one source: `whereabot openapi` builds
it from the code's texts), valid OpenAPI 3.1, served at /openapi.yaml, and Schemathesis —
property-based tests generated from it, with every check but the two that flag designed answers
— finds nothing against a real relay with a phone that answers: no undocumented status, no
response that breaks its schema, content type or headers, no valid request refused and no
invalid one accepted, 405 with Allow for methods a route does not support, no ignored
credential."""
import asyncio
import functools
import json
import re
import subprocess
import threading
import time
import urllib.request
import uuid

import pytest
import websockets
import yaml
from openapi_spec_validator import validate
from schemathesis.config import ChecksConfig

from conftest import ROOT
from relay_server import BINARY, RelayServer, token

SCHEMATHESIS = ROOT / ".venv" / "bin" / "schemathesis"

# Every check the installed Schemathesis has (4.32.5: `schemathesis run --help` names them under
# --checks), except the two that flag answers the relay gives by design:
# - not_a_server_error (ST101) fails any 5xx, documented or not, and POST /v1/locate answers
#   503 when no phone of the user is connected (docs/protocol.md); a 500 is still caught, by
#   status_code_conformance, since no operation documents one;
# - max_response_time (ST112): a locate is a long poll that waits up to timeout_secs (120 s)
#   for the person to answer. It is not among --checks' names (so --exclude-checks refuses
#   it): `--checks all` turns it on with a 10 s limit, or --max-response-time; naming the
#   other checks one by one leaves it off.
EXCLUDED_CHECKS = {"not_a_server_error", "max_response_time"}


@functools.cache
def installed_checks():
    """The names `schemathesis run --help` lists for --checks (without `all`)."""
    help_text = subprocess.run([str(SCHEMATHESIS), "run", "--help"], capture_output=True, text=True, check=True,
                               timeout=60).stdout
    values = re.search(r"--checks\b.*?\[possible values:(.*?)\]", help_text, re.S).group(1)
    return frozenset(values.replace(",", " ").split()) - {"all"}


def checks():
    return sorted(installed_checks() - EXCLUDED_CHECKS)


# Statuses a valid request gets by design that positive_data_acceptance does not expect
# (its default list is 2xx, 3xx, 401, 403, 404, 409, 429, 5xx): an answer posted to
# /v1/device/answer for an id no request waits under is 410 (docs/protocol.md), and every id
# Schemathesis draws is one; /oauth/authorize answers 400 (a page) for a client it does not
# know, and every client id Schemathesis draws is one; /oauth/token and /oauth/revoke answer
# 400 for a form whose encoding repeats a name (RFC 6749 §3.1), which Schemathesis's
# additional properties do, and 411 for the chunked body its client sends for some forms
# (every body needs Content-Length).
CONFIG = """
[[operations]]
include-path = "/v1/device/answer"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "410", "429", "5xx"]

[[operations]]
include-path-regex = "^/oauth/(authorize|token|revoke)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "411", "429", "5xx"]
"""


@pytest.fixture(scope="module")
def relay():
    server = RelayServer()
    yield server
    server.stop()


def test_the_document_is_the_code_and_valid_openapi_3_1(relay):
    printed = subprocess.run([str(BINARY), "openapi"], capture_output=True, text=True, check=True, timeout=30).stdout
    committed = (ROOT / "docs" / "openapi.yaml").read_text()
    assert printed == committed, "docs/openapi.yaml is stale: run .build/debug/whereabot openapi > docs/openapi.yaml"
    with urllib.request.urlopen(f"{relay.base}/openapi.yaml", timeout=10) as response:
        assert response.headers["Content-Type"] == "application/yaml"
        assert response.read().decode() == committed
    document = yaml.safe_load(committed)
    validate(document)
    assert document["openapi"] == "3.1.0"
    # Every documented operation exists (no 404/405), and every agent text is there verbatim.
    for path, operations in document["paths"].items():
        for method in operations:
            request = urllib.request.Request(relay.base + path, method=method.upper(), data=b"{}" if method == "post" else None,
                                             headers={"Content-Type": "application/json"})
            try:
                status = urllib.request.urlopen(request, timeout=10).status
            except urllib.error.HTTPError as error:
                status = error.code
            assert status not in (404, 405), (method, path, status)
    for text in ["The user declined to share their location.",
                 "The user did not respond on their phone. Ask them before trying again.",
                 "The phone did not answer in time. Ask the user to open Whereabot and retry.",
                 "Nobody named Ada shares their location with you. Ask them to share it with you in Whereabot."]:
        assert json.dumps(text) in committed


def test_the_checks_are_every_check_but_the_two_designed_answers():
    """Both names are the installed Schemathesis's own (a rename must not leave an exclusion that
    excludes nothing), every other check runs, and max_response_time stays off for that list."""
    assert "not_a_server_error" in installed_checks() and len(checks()) == len(installed_checks()) - 1 >= 13
    named = ChecksConfig()
    named.update(included_check_names=checks())
    assert not named.max_response_time.enabled and not named.not_a_server_error.enabled
    assert all(named.get_by_name(name=name).enabled for name in checks())
    everything = ChecksConfig()
    everything.update(included_check_names=["all"])
    assert everything.max_response_time.enabled, "max_response_time is no longer a check that --checks all turns on"


def schemathesis(relay, credential, *selection, config):
    result = subprocess.run([str(SCHEMATHESIS), "--config-file", str(config), "run", f"{relay.base}/openapi.yaml",
                             "-H", f"Authorization: Bearer {credential}", "-c", ",".join(checks()), "-n", "25",
                             "--request-timeout", "30", "--seed", "20261130", "--no-color", *selection],
                            capture_output=True, text=True, timeout=900)
    summary = result.stdout[-4000:]
    assert result.returncode == 0, summary + result.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary.split("SUMMARY")[-1].lower().replace("0 failed", ""), summary
    return summary


def test_schemathesis_finds_nothing(relay, make_user, tmp_path):
    user, session, email = make_user(name="Schema Thesis", with_session=True)
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    stop = threading.Event()

    async def phone():
        url = relay.base.replace("http", "ws") + "/v1/device"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token(user, session, email)}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "platform": "ios"}))
            while not stop.is_set():
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 0.2))
                except asyncio.TimeoutError:
                    continue
                except websockets.ConnectionClosed:
                    return
                if message["type"] == "locate":
                    await ws.send(json.dumps({"type": "location", "id": message["id"], "latitude": 47.1, "longitude": 8.2,
                                              "accuracy_m": 9, "timestamp_ms": int(time.time() * 1000)}))

    thread = threading.Thread(target=lambda: asyncio.run(phone()), daemon=True)
    thread.start()
    time.sleep(0.5)
    try:
        # As an agent, every agent and operations route; as the phone (the person), the phone
        # route and the person's consent and Connected agents.
        schemathesis(relay, token(user, session, email, client_id="schemathesis"),
                     "--exclude-path-regex", "^(/v1/device/answer|/oauth/.*)$", config=config)
        schemathesis(relay, token(user, session, email), "--include-path-regex", "^(/v1/device/answer|/oauth/(consent|grants).*)$",
                     config=config)
        # The authorization server's own endpoints take no bearer: their client, code or refresh
        # token never verifies here (test_oauth_server drives them with real ones), so the
        # warnings that say so (only 401s, mostly 400s, the registration budget's 429s) are off.
        quiet = tmp_path / "schemathesis-oauth.toml"
        quiet.write_text("warnings = false\n" + CONFIG)
        schemathesis(relay, "unused", "--include-path-regex", "^/oauth/(authorize|token|revoke|register)$", config=quiet)
    finally:
        stop.set()
        thread.join(5)


def test_the_python_sdk_script_in_docs_agents_md_works(relay, make_user):
    """docs/agents.md's script, run as written (URL and token filled in) with the MCP SDK."""
    user, session, email = make_user(name="Docs Reader", with_session=True)
    document = (ROOT / "docs" / "agents.md").read_text()
    script = document.split("```python\n")[1].split("```")[0]
    script = script.replace("http://127.0.0.1:8080/mcp", relay.base + "/mcp")
    script = script.replace("$TOKEN", token(user, session, email, client_id=str(uuid.uuid4())))
    script = script.replace('"timeout_secs": 45', '"timeout_secs": 2')
    result = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("error: The user's phone is not connected."), result.stdout
