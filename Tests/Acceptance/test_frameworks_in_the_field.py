"""The field test of docs/agents.md "Agent frameworks", at its real timings: nine MCP client
frameworks from PyPI at their defaults against a relay at its defaults (MCP_WAIT_SECONDS
45), each asking a phone that is asleep. The phone wakes on its Web Push (the fake push
service decrypts it), connects, shows the prompt and answers 20, 50 or 90 s after it
appeared. Every framework gets the fix — in its one call at 20 s, after one follow-up with
request_id at 50 s, and at 90 s after two: each call waits at most 45 s, so the first call
and its follow-up have waited 90 s from the open when the person, whose prompt came a moment
after the open, answers (openai-agents, whose session gives up after 5 s, on its retries) — and each scenario costs the person one prompt and one wake push (the
re-alert aside: at most one more, for the same request). All 27 scenarios run at once, so
the test takes as long as its longest."""
import asyncio
import json
import time
import uuid

import pytest
import websockets

from framework_kit import FRAMEWORKS, LAT, LON, SCRIPTS, framework_python
from push_kit import Push
from relay_server import RelayServer, token

ANSWERS_AFTER = (20, 50, 90)
# The most calls a scenario may take: the first, and its follow-ups with request_id (each
# call waits at most MCP_WAIT_SECONDS, 45 s). openai-agents gives up on each call after 5 s
# and asks again, so its count is its retries.
FOLLOW_UPS = {20: 1, 50: 2, 90: 3}


@pytest.fixture(scope="module")
def push():
    fakes = Push()
    yield fakes
    fakes.stop()


@pytest.fixture(scope="module")
def relay(push):
    server = RelayServer(**push.env)
    yield server
    server.stop()


class Scenario:
    """One framework asking one sleeping phone that answers `answer_after` s into its prompt."""

    def __init__(self, admin, make_user, push, script, answer_after):
        self.script, self.answer_after, self.push = script, answer_after, push
        self.user, self.session, self.email = make_user("Field", with_session=True)
        self.device = uuid.uuid4()
        admin.execute("insert into public.devices (id, user_id, name, platform) values (%s, %s, 'Pixel', 'android')",
                      (self.device, self.user))
        self.path = f"/field/{script}/{answer_after}/{uuid.uuid4().hex[:8]}"
        endpoint, p256dh, auth = push.web.subscribe(self.path)
        admin.execute("insert into public.web_push_subscriptions (endpoint, p256dh, auth, user_id, device_id)"
                      " values (%s, %s, %s, %s, %s)", (endpoint, p256dh, auth, self.user, self.device))
        self.agent = token(self.user, self.session, self.email, client_id=str(uuid.uuid4()))
        self.python = framework_python(script)
        self.prompts = []

    def pushes(self):
        return self.push.web_for([self.path])

    async def phone(self, base, client):
        """Asleep until its push arrives; then connected, answering the first prompt."""
        while not self.pushes():
            if client.returncode is not None:
                return
            await asyncio.sleep(0.1)
        async with websockets.connect(base.replace("http", "ws") + "/v1/device", additional_headers={
                "Authorization": f"Bearer {token(self.user, self.session, self.email)}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(self.device), "device_name": "Pixel",
                                      "platform": "android"}))
            shown = None
            while client.returncode is None:
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 0.2))
                except asyncio.TimeoutError:
                    message = None
                if message and message["type"] == "locate":
                    self.prompts.append(message)
                    shown = shown or time.monotonic()
                if shown and len(self.prompts) == 1 and time.monotonic() - shown >= self.answer_after:
                    await ws.send(json.dumps({"type": "location", "id": self.prompts[0]["id"], "latitude": LAT,
                                              "longitude": LON, "accuracy_m": 10,
                                              "timestamp_ms": int(time.time() * 1000)}))
                    shown = float("inf")  # answered

    async def run(self, base, delay):
        await asyncio.sleep(delay)  # the clients start one after another (their imports are heavy)
        client = await asyncio.create_subprocess_exec(
            str(self.python), str(FRAMEWORKS / f"{self.script}.py"), base + "/mcp", self.agent, "30",
            json.dumps({"timeout_secs": 120}), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            cwd=str(FRAMEWORKS))
        phone = asyncio.ensure_future(self.phone(base, client))
        out, err = await client.communicate()
        await phone
        assert client.returncode == 0, f"{self.script} at {self.answer_after} s: {err.decode()[-3000:]}"
        self.result = json.loads(out.decode().strip().splitlines()[-1])

    def failures(self):
        """What this scenario got wrong (empty when it held)."""
        name, result, wrong = f"{self.script} at {self.answer_after} s", self.result, []
        fix = json.loads(result["text"]) if not result["is_error"] and result["text"].startswith("{") else {}
        if fix.get("latitude") != LAT:
            wrong.append(f"{name}: no fix: {result}")
        if self.script != "openai_agents_client" and not 1 <= result["attempts"] <= FOLLOW_UPS[self.answer_after]:
            wrong.append(f"{name}: {result['attempts']} calls, at most {FOLLOW_UPS[self.answer_after]}: {result}")
        if self.script == "openai_agents_client" and not result["errors"]:
            wrong.append(f"{name}: its 5-s session timeout never ran out: {result}")
        if len(self.prompts) != 1:
            wrong.append(f"{name}: {len(self.prompts)} prompts")
        pushes = self.pushes()
        requests = {push["payload"]["request_id"] for push in pushes}
        if len(requests) != 1 or not 1 <= len(pushes) <= 2:
            wrong.append(f"{name}: {len(pushes)} pushes for {len(requests)} requests (one wake, at most one re-alert)")
        return wrong


@pytest.mark.timeout(600)  # two minutes when the venvs are there (make test makes them beside its build)
def test_nine_frameworks_at_their_defaults_answered_after_20_50_and_90_s(admin, make_user, push, relay):
    scenarios = [Scenario(admin, make_user, push, script, after) for after in ANSWERS_AFTER for script in SCRIPTS]

    async def all_at_once():
        await asyncio.gather(*(s.run(relay.base, 0.7 * n) for n, s in enumerate(scenarios)))

    asyncio.run(asyncio.wait_for(all_at_once(), 240))
    wrong = [failure for scenario in scenarios for failure in scenario.failures()]
    assert not wrong, "\n".join(wrong)
