"""Push (docs/testing.md, "What make test runs": P1-P5; test_push_services.py has P6-P10 and
the re-alert): real `whereabot serve` processes against a fake APNs (HTTP/2 +
TLS, verifying the ES256 provider token like APNs) and a fake Web Push service (TLS, VAPID
checked, every body decrypted with http_ece). Agents call with curl; phones are Python
`websockets` clients or the `whereabot phone` CLI."""
import math
import os
import re
import subprocess
import time

from conftest import ADMIN_URL
from push_accounts import ALLOW, Owner, phone_in_thread, push, relay  # noqa: F401,F811 (push and relay are fixtures)
from push_kit import KEY_ID, TEAM_ID, TOPIC, Locate, hex_token, wait_for
from relay_server import BINARY, SECRET

UUID_V4 = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$")


# ------------------------------------------------------------------------------------------ P1
def test_p1_no_device_connected_pushes_at_once_to_every_target(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push, tokens=[hex_token(), hex_token()], paths=["/sub/p1-a", "/sub/p1-b"])
    call = Locate(relay.base, owner.agent, 5).begin()
    alerts = wait_for(lambda: len(push.apns_for(owner.tokens)) == 2 and push.apns_for(owner.tokens), 3)
    webs = wait_for(lambda: len(push.web_for(owner.paths)) == 2 and push.web_for(owner.paths), 3)
    assert alerts and webs, (push.apns.pushes, push.web.pushes)
    for alert in alerts:
        assert alert["status"] == 200, alert
        assert alert["time"] - call.started < 1.0
        headers, payload = alert["headers"], alert["payload"]
        assert alert["jwt"] == {"kid": KEY_ID, "iss": TEAM_ID, "iat": alert["jwt"]["iat"], "alg": "ES256"}
        assert headers["apns-push-type"] == "alert" and headers["apns-priority"] == "10"
        assert headers["apns-topic"] == TOPIC and headers["content-type"] == "application/json"
        assert headers["apns-collapse-id"] == payload["request_id"]
        assert int(headers["apns-expiration"]) == math.ceil(payload["expires_ms"] / 1000)
        assert UUID_V4.match(headers["apns-id"])
        assert payload == {"aps": {"alert": {"title": "Whereabot", "body": "Your agent Claude wants to know your location"},
                                   "sound": "default", "thread-id": owner.client_id, "category": "LOCATION_REQUEST"},
                           "request_id": payload["request_id"], "client_id": owner.client_id, "agent_name": "Claude",
                           "expires_ms": payload["expires_ms"], "requester": None}
    assert len({a["headers"]["apns-id"] for a in alerts}) == 2, "one apns-id per token"
    request_id = alerts[0]["payload"]["request_id"]
    for web in webs:
        assert web["status"] == 201, web
        assert web["time"] - call.started < 1.0
        assert web["vapid"]["aud"] == push.web.origin and web["vapid"]["typ"] == "JWT"
        assert web["vapid"]["exp"] - time.time() <= 24 * 3600 and web["vapid"]["k"] == push.vapid_public
        assert web["vapid"]["sub"] == "mailto:ops@whereabot.example"
        assert 1 <= int(web["headers"]["ttl"]) <= 5 and web["headers"]["urgency"] == "high"
        assert web["headers"]["topic"] == request_id.replace("-", "")
        assert web["headers"]["content-type"] == "application/octet-stream"
        assert web["record_size"] == 4096 and web["keyid_length"] == 65
        assert web["payload"] == {"v": 1, "kind": "alert", "request_id": request_id, "title": "Whereabot",
                                  "body": "Your agent Claude wants to know your location", "client_id": owner.client_id,
                                  "agent_name": "Claude", "requester": None, "expires_ms": alerts[0]["payload"]["expires_ms"],
                                  "url": f"/app/?request={request_id}"}
    call.join()
    assert call.status == 503
    assert len(push.apns_for(owner.tokens)) == 2 and len(push.web_for(owner.paths)) == 2, "no second push"


def test_the_alerts_carry_the_agents_reason_as_text(admin, make_user, push, relay):
    """docs/protocol.md, "Consent": "Your agent NAME wants to know your location: REASON" in the
    APNs alert and the Web Push body (decrypted here with http_ece), cleaned, with the reason on
    its own too."""
    owner = Owner(admin, make_user, push, tokens=[hex_token()], paths=["/sub/reason"])
    call = Locate(relay.base, owner.agent, 5, reason="To pick you up\n at the <b>station</b>\u202e").begin()
    alerts = wait_for(lambda: push.apns_for(owner.tokens), 3)
    webs = wait_for(lambda: push.web_for(owner.paths), 3)
    assert alerts and webs, (push.apns.pushes, push.web.pushes)
    text = "Your agent Claude wants to know your location: To pick you up at the <b>station</b>"
    assert alerts[0]["payload"]["aps"]["alert"]["body"] == text
    assert alerts[0]["payload"]["reason"] == "To pick you up at the <b>station</b>"
    assert webs[0]["payload"]["body"] == text and webs[0]["payload"]["reason"] == "To pick you up at the <b>station</b>"
    call.join()
    assert call.status == 503


# ------------------------------------------------------------------------------------------ P2
def test_p2_with_a_cli_phone_ignoring_the_alert_comes_after_two_seconds(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push)
    apns_token = hex_token()
    env = {**os.environ, "ADMIN_DATABASE_URL": ADMIN_URL, "SUPABASE_JWT_SECRET": SECRET}
    phone = subprocess.Popen([str(BINARY), "phone", "--relay", relay.base, "--token", owner.phone, "--answer", "ignore",
                              "--apns-token", apns_token], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert "connected" in phone.stdout.readline()
        assert "stored APNs token" in phone.stdout.readline(), "whereabot phone --apns-token registers the token"
        call = Locate(relay.base, owner.agent, 8).begin()
        alert = wait_for(lambda: push.apns_for([apns_token]), 6)
        assert alert and alert[0]["status"] == 200
        assert 1.8 <= alert[0]["time"] - call.started <= 3.5, alert[0]["time"] - call.started
        assert alert[0]["payload"]["aps"]["category"] == "LOCATION_REQUEST"
        call.join()
        assert call.status == 504
    finally:
        phone.terminate()
        phone.wait(timeout=10)
    assert len(push.apns_for([apns_token])) == 1


# ------------------------------------------------------------------------------------------ P3
def test_p3_an_answer_within_a_second_sends_no_push(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push, tokens=[hex_token()], paths=["/sub/p3"])
    phone = phone_in_thread(relay.base, owner.phone, ALLOW)
    time.sleep(0.5)
    call = Locate(relay.base, owner.agent, 10).begin()
    call.join()
    assert call.status == 200
    time.sleep(4)
    assert push.apns_for(owner.tokens) == [] and push.web_for(owner.paths) == []
    phone.join(5)


# ------------------------------------------------------------------------------------------ P4
def test_p4_always_allowed_silent_push_then_checking(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push, tokens=[hex_token()], paths=["/sub/p4"], always=True)
    call = Locate(relay.base, owner.agent, 15).begin()
    silent = wait_for(lambda: push.apns_for(owner.tokens), 3)
    assert silent and silent[0]["status"] == 200, silent
    headers, payload = silent[0]["headers"], silent[0]["payload"]
    assert headers["apns-push-type"] == "background" and headers["apns-priority"] == "5"
    assert "apns-collapse-id" not in headers
    assert payload == {"aps": {"content-available": 1}, "request_id": payload["request_id"],
                       "client_id": owner.client_id, "expires_ms": payload["expires_ms"], "requester_id": None}
    time.sleep(1)
    assert push.web_for(owner.paths) == [], "no Web Push with the silent push"
    checking = wait_for(lambda: len(push.apns_for(owner.tokens)) == 2 and push.apns_for(owner.tokens)[1], 10)
    assert checking, push.apns.pushes
    assert 7.5 <= checking["time"] - silent[0]["time"] <= 9.5
    assert checking["headers"]["apns-push-type"] == "alert" and checking["headers"]["apns-priority"] == "10"
    assert checking["payload"]["aps"]["category"] == "LOCATION_AUTO"
    assert checking["payload"]["aps"]["alert"]["body"] == "Claude is checking your location"
    web = wait_for(lambda: push.web_for(owner.paths), 2)
    assert web and web[0]["payload"]["kind"] == "checking" and web[0]["payload"]["body"] == "Claude is checking your location"
    assert abs(web[0]["time"] - checking["time"]) < 1
    call.join()
    assert call.status == 503
    assert len(push.apns_for(owner.tokens)) == 2 and len(push.web_for(owner.paths)) == 1


def test_p4_answered_after_the_silent_push_sends_no_checking(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push, tokens=[hex_token()], paths=["/sub/p4b"], always=True)
    call = Locate(relay.base, owner.agent, 15).begin()
    assert wait_for(lambda: push.apns_for(owner.tokens), 3)
    phone = phone_in_thread(relay.base, owner.phone, ALLOW)  # the silent push woke the app
    call.join()
    assert call.status == 200
    time.sleep(max(0, call.started + 10.5 - time.time()))
    assert len(push.apns_for(owner.tokens)) == 1 and push.web_for(owner.paths) == []
    phone.join(5)


# ------------------------------------------------------------------------------------------ P5
def test_p5_always_allowed_with_only_web_push_gets_checking_at_wake(admin, make_user, push, relay):
    owner = Owner(admin, make_user, push, paths=["/sub/p5"], always=True)
    call = Locate(relay.base, owner.agent, 6).begin()
    web = wait_for(lambda: push.web_for(owner.paths), 3)
    assert web and web[0]["status"] == 201
    assert web[0]["time"] - call.started < 1.0
    assert web[0]["payload"]["kind"] == "checking"
    call.join()
    assert len(push.web_for(owner.paths)) == 1
