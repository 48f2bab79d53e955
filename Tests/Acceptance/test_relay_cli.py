"""The CLI as a newcomer uses it: `whereabot token`, `whereabot keys`, `whereabot phone`,
against `whereabot serve`, with curl as the agent and PyJWT checking the tokens."""
import json
import os
import re
import subprocess
import time
import uuid

import jwt
import pytest
import websockets.sync.client as ws_client

from conftest import ADMIN_URL
from relay_server import BINARY, SECRET, RelayServer

ENV = {**os.environ, "ADMIN_DATABASE_URL": ADMIN_URL, "SUPABASE_JWT_SECRET": SECRET}


def cli(*args):
    result = subprocess.run([str(BINARY), *args], env=ENV, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def curl_locate(base, credential, timeout=10):
    result = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "-X", "POST", "-H", f"Authorization: Bearer {credential}",
                             f"{base}/v1/locate?timeout_secs={timeout}"], capture_output=True, text=True, timeout=60)
    body, _, status = result.stdout.rpartition("\n")
    return int(status), body


@pytest.fixture
def relay():
    server = RelayServer()
    yield server
    server.stop()


def test_tokens_keys_and_the_reference_phone(relay):
    email = f"cli-{uuid.uuid4().hex[:8]}@example.com"
    phone_token = cli("token", "--email", email, "--name", "Cli User")
    claims = jwt.decode(phone_token, SECRET, algorithms=["HS256"], audience="authenticated")
    assert claims["email"] == email and "client_id" not in claims
    agent_token = cli("token", "--email", email, "--agent", "CLI agent")
    assert "client_id" in jwt.decode(agent_token, SECRET, algorithms=["HS256"], audience="authenticated")

    phone = subprocess.Popen([str(BINARY), "phone", "--relay", relay.base, "--token", phone_token, "--answer", "allow",
                              "--at", "48.8584,2.2945,7"], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert "connected" in phone.stdout.readline()
        time.sleep(0.3)
        status, body = curl_locate(relay.base, agent_token)
        assert status == 200 and '"latitude":48.8584' in body
        # The terminal phone names the agent as the app and the alert push do
        # (docs/protocol.md, "The terminal phone").
        prompt = phone.stdout.readline()
        assert re.fullmatch(r"request [0-9a-f]{8}: Your agent CLI agent wants to know your location, \d+s left\n", prompt), prompt

        key = cli("keys", "create", "--email", email, "--name", "nightly")
        assert key.startswith("wb_")
        status, body = curl_locate(relay.base, key)
        assert status == 200
        key_id = subprocess.run(["psql", "-XAtq", ADMIN_URL, "-c",
                                 f"select id from public.agent_keys where name = 'nightly' and key_prefix = '{key[:11]}'"],
                                capture_output=True, text=True).stdout.strip()
        assert cli("keys", "revoke", key_id) == "revoked"
        time.sleep(1)
        assert curl_locate(relay.base, key)[0] == 401
    finally:
        phone.terminate()
        phone.wait(timeout=10)
    relay.stop()
    assert phone_token not in relay.logs and key not in relay.logs and "48.8584" not in relay.logs


def test_token_refuses_without_a_secret():
    result = subprocess.run([str(BINARY), "token", "--email", "x@example.com"],
                            env={**ENV, "SUPABASE_JWT_SECRET": ""}, capture_output=True, text=True, timeout=30)
    assert result.returncode == 64 and "SUPABASE_JWT_SECRET" in result.stderr


def test_the_reference_phone_obeys_retry_after(relay):
    """Refused with 429 and Retry-After (its account's places before hello are
    taken), `whereabot phone` waits as long as the relay asks — not its 1 s back-off — and
    then connects."""
    email = f"cli-{uuid.uuid4().hex[:8]}@example.com"
    phone_token = cli("token", "--email", email, "--name", "Cli User")
    url = relay.base.replace("http", "ws") + "/v1/device"
    silent = [ws_client.connect(url, additional_headers={"Authorization": "Bearer " + phone_token}) for _ in range(5)]
    phone = subprocess.Popen([str(BINARY), "phone", "--relay", relay.base, "--token", phone_token, "--answer", "allow"],
                             env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        refused = phone.stdout.readline()
        assert refused.startswith("refused for now: 429 Too many sockets are waiting for their hello."), refused
        assert phone.stdout.readline().strip() == "the relay asked to come back in 5 s"
        told = time.monotonic()
        for socket in silent:
            socket.close()
        assert "connected" in phone.stdout.readline()
        assert time.monotonic() - told >= 5, "it came back after the Retry-After, not sooner"
    finally:
        for socket in silent:
            socket.close()
        phone.terminate()
        phone.wait(timeout=10)


def test_the_reference_phone_keeps_places_and_sets_quiet_hours_from_a_settings_file(relay, tmp_path):
    """Places and quiet hours on the terminal phone (docs/protocol.md, "The terminal phone"):
    places from `--settings` are matched on the phone (inside one shared by name only, the agent
    gets the name and no position), quiet hours are set at the relay after the hello, and a bad
    window is refused with the relay's sentence."""
    email = f"cli-{uuid.uuid4().hex[:8]}@example.com"
    phone_token = cli("token", "--email", email, "--name", "Cli User")
    agent_token = cli("token", "--email", email, "--agent", "CLI agent")
    later = time.gmtime(time.time() + 3 * 3600)  # a window that does not hold now
    settings = tmp_path / "phone.json"

    def run_phone(quiet):
        settings.write_text(json.dumps({
            "places": [{"name": "Home \u202e", "latitude": 48.8584, "longitude": 2.2945, "radius_m": 250, "share": "name"}],
            "quiet_hours": quiet}))
        return subprocess.Popen([str(BINARY), "phone", "--relay", relay.base, "--token", phone_token, "--answer", "allow",
                                 "--at", "48.8590,2.2950,7", "--settings", str(settings)], env=ENV, stdout=subprocess.PIPE,
                                text=True)

    window = {"days": [1, 2, 3, 4, 5, 6, 7], "start": time.strftime("%H:00", later),
              "end": time.strftime("%H:30", later), "time_zone": "UTC"}
    phone = run_phone([window])
    try:
        assert "connected" in phone.stdout.readline()
        assert phone.stdout.readline() == f"quiet hours at the relay: {window['start']}-{window['end']} UTC (days 1,2,3,4,5,6,7)\n"
        status, body = curl_locate(relay.base, agent_token)
        assert status == 200, body
        answer = json.loads(body)
        assert (answer["place"], answer["precision"]) == ("Home", "place") and "latitude" not in answer
        assert "request" in phone.stdout.readline()
        assert phone.stdout.readline() == "  inside Home: sharing the place's name only\n"
    finally:
        phone.terminate()
        phone.wait(timeout=10)
    phone = run_phone([{**window, "time_zone": "Mars/Olympus"}])
    try:
        assert "connected" in phone.stdout.readline()
        assert phone.stdout.readline() == \
            "the relay refused: window 1: unknown time zone (use an IANA name such as Europe/Berlin)\n"
    finally:
        phone.terminate()
        phone.wait(timeout=10)
    relay.stop()
    assert "Home" not in relay.logs and "48.859" not in relay.logs
