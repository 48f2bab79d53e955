"""Agent frameworks from PyPI at their defaults against a real relay (docs/agents.md
"Agent frameworks"): each in a venv of its own, made here with pinned versions
(Tests/Acceptance/frameworks/<name>.txt), driving its own MCP client code path with no
model — the test asks again after an error, as a model does when the framework tells it to
try again — while Python `websockets` plays the phone and counts the prompts."""
import asyncio
import json
import time
import uuid

import pytest
import websockets

from framework_kit import FRAMEWORKS, LAT, LON, SCRIPTS, framework_python
from relay_server import RelayServer, token


@pytest.fixture(scope="module")
def relay():
    server = RelayServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def bounded():
    """A relay whose calls wait at most 5 s (MCP_WAIT_SECONDS): an answer after 8 s plays the
    field test's 50 s against the default 45 s, with one follow-up carrying request_id."""
    server = RelayServer(MCP_WAIT_SECONDS="5")
    yield server
    server.stop()


def run_with_phone(relay, make_user, script, answer_after, attempts, arguments=None):
    """Runs `script` (the framework's client) while a phone answers its first prompt
    `answer_after` seconds after it appeared (however long the client took to start):
    (the client's JSON line, the prompts the phone got)."""
    user, session, email = make_user("Framework", with_session=True)
    agent = token(user, session, email, client_id=str(uuid.uuid4()))
    python = framework_python(script)
    prompts = []

    async def scenario():
        async with websockets.connect(relay.base.replace("http", "ws") + "/v1/device",
                                      additional_headers={"Authorization": f"Bearer {token(user, session, email)}"}) as ws:
            await ws.send(json.dumps({"type": "hello", "device_id": str(uuid.uuid4()), "device_name": "P", "platform": "ios"}))
            await asyncio.sleep(0.3)
            client = await asyncio.create_subprocess_exec(
                str(python), str(FRAMEWORKS / f"{script}.py"), relay.base + "/mcp", agent, str(attempts),
                json.dumps(arguments or {"timeout_secs": 60}), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=str(FRAMEWORKS))
            answered = False
            shown = None  # the person answers `answer_after` s after the prompt appeared
            while True:
                try:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 0.2))
                except asyncio.TimeoutError:
                    message = None
                if message and message["type"] == "locate":
                    prompts.append(message)
                    shown = shown or time.monotonic()
                if prompts and not answered and time.monotonic() - shown >= answer_after:
                    await ws.send(json.dumps({"type": "location", "id": prompts[0]["id"], "latitude": LAT, "longitude": LON,
                                              "accuracy_m": 10, "timestamp_ms": int(time.time() * 1000)}))
                    answered = True
                if client.returncode is not None or (answered and time.monotonic() - shown > answer_after + 30):
                    break
                try:
                    await asyncio.wait_for(client.wait(), 0.01)
                except asyncio.TimeoutError:
                    pass
            out, err = await client.communicate()
            assert client.returncode == 0, err.decode()[-3000:]
            return json.loads(out.decode().strip().splitlines()[-1])

    return asyncio.run(asyncio.wait_for(scenario(), 180)), prompts


@pytest.mark.parametrize("answer_after", [3, 20])
def test_openai_agents_at_its_5_s_default_gets_the_fix_and_the_person_one_prompt(relay, make_user, answer_after):
    """Its ClientSession times out after 5 s (and sends a courtesy cancel that says so): the
    relay keeps the prompt, and the model's retry joins the same request."""
    result, prompts = run_with_phone(relay, make_user, "openai_agents_client", answer_after, attempts=20)
    assert result["is_error"] is False, result
    assert json.loads(result["text"])["latitude"] == LAT
    assert len(prompts) == 1, f"one prompt, not {len(prompts)}"
    if answer_after > 5:
        assert result["attempts"] > 1 and result["errors"], result  # the 5-s default ran out, the retry got it


@pytest.mark.parametrize("script", SCRIPTS[1:])
@pytest.mark.parametrize("answer_after, calls", [(3, 1), (8, 2)])
def test_frameworks_at_their_defaults_get_the_fix_in_one_call_or_one_follow_up(bounded, make_user, script, answer_after, calls):
    """fastmcp, the SDK 1.x, Pydantic AI, LangChain's adapters, mcp-use, Strands, smolagents
    and Google ADK: an answer within the call's bound comes back in the call; a later one after at
    most one follow-up with request_id (Pydantic AI prefers tasks, which it polls within the
    one call); one prompt either way."""
    result, prompts = run_with_phone(bounded, make_user, script, answer_after, attempts=4)
    assert result["is_error"] is False and result["errors"] == [], result
    assert json.loads(result["text"])["latitude"] == LAT
    assert 1 <= result["attempts"] <= calls, result
    assert len(prompts) == 1, f"one prompt, not {len(prompts)}"
