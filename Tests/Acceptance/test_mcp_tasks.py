"""Requests that outlive the call, through the official MCP Python SDK (2.3.0): a resumable
get_phone_location under a client timeout shorter than the person's delay, tasks in the
2025-11-25 form (SEP-1686) and in the 2026-07-28 tasks extension (SEP-2663).

The SDK has the 2025-11-25 task types but no call that asks for a task (its `call_tool` has
no `task` argument and validates a tools/call result as a CallToolResult), so that one call
goes through its dispatcher's raw request; every other tasks/* request is the SDK's own
`send_request`. For 2026-07-28 the SDK's extension API (ClientExtension + ResultClaim)
claims `resultType: "task"` and polls tasks/get, as a client supporting the extension does."""
import asyncio
import base64
import json
import os
import time
import urllib.request
import uuid
from typing import Any, Literal

import mcp_types as t
import psycopg
import pytest
from mcp.client import Client, ClientExtension
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from conftest import ADMIN_URL, RELAY_URL
from relay_server import RelayServer, token
from test_durable_requests import Phone
from test_relay_two_instances import LATITUDE, LONGITUDE

REQUEST_ID_KEY = base64.b64encode(os.urandom(32)).decode()
UNKNOWN_TOOL_TEXT = "No location request with this id is waiting for you. Ask again without request_id."


@pytest.fixture
def relay():
    server = RelayServer(MCP_WAIT_SECONDS="5", REQUEST_ID_KEY=REQUEST_ID_KEY)
    yield server
    server.stop()


def client(base, agent, mode, read_timeout, extensions=()):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {agent}"})
    return Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode, cache=None,
                  read_timeout_seconds=read_timeout, extensions=list(extensions))


def located(result):
    assert not result.is_error, result.content
    fix = json.loads(result.content[0].text)
    assert (fix["latitude"], fix["longitude"]) == (float(LATITUDE), float(LONGITUDE))
    return fix


# ---------------------------------------------------------------- the resumable tool

@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_client_that_times_out_before_the_person_answers_gets_the_fix_by_resuming(relay, make_user, mode):
    """The client gives up on a request after 8 s, the person answers after 9 s: the first
    call returns "no answer yet" after the relay's 5 s wait bound, the second (with the
    request_id) returns the fix."""
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    phone = Phone(relay.base, token(*ada), delay=9.0)

    async def scenario():
        async with client(relay.base, agent, mode, read_timeout=8) as session:
            started = time.monotonic()
            first = await session.call_tool("get_phone_location", {"timeout_secs": 60})
            assert 4.5 < time.monotonic() - started < 8
            assert not first.is_error
            waiting = first.structured_content
            assert waiting["status"] == "waiting" and waiting["request_id"].startswith("wbr_")
            text = first.content[0].text
            assert text.startswith("Asked the user's phone; no answer yet. A slow answer is normal: call get_phone_location again "
                                   "with request_id \"")
            assert waiting["request_id"] in text and text.endswith(" UTC).")
            second = await session.call_tool("get_phone_location", {"request_id": waiting["request_id"]})
            located(second)
            # The result stays until its TTL: asking again returns it again.
            located(await session.call_tool("get_phone_location", {"request_id": waiting["request_id"]}))
            unknown = await session.call_tool("get_phone_location", {"request_id": "wbr_" + "A" * 32})
            assert unknown.is_error and unknown.content[0].text == UNKNOWN_TOOL_TEXT
            malformed = await session.call_tool("get_phone_location", {"request_id": "no"})
            assert malformed.is_error and malformed.content[0].text == UNKNOWN_TOOL_TEXT
            return waiting["request_id"]

    try:
        request_id = asyncio.run(asyncio.wait_for(scenario(), 60))
    finally:
        phone.stop()
    assert len(phone.kinds("locate")) == 1  # resuming asks nobody again

    # Another client of the same user, and another user, get the unknown text.
    bob = make_user("Bob", with_session=True)

    async def strangers():
        for stranger in (token(*ada, client_id=str(uuid.uuid4())), token(*bob, client_id=str(uuid.uuid4()))):
            async with client(relay.base, stranger, mode, read_timeout=8) as session:
                result = await session.call_tool("get_phone_location", {"request_id": request_id})
                assert result.is_error and result.content[0].text == UNKNOWN_TOOL_TEXT

    asyncio.run(asyncio.wait_for(strangers(), 30))


# ---------------------------------------------------------------- 2025-11-25 tasks

async def call_as_task(session, arguments, ttl=60_000):
    params = {"name": "get_phone_location", "arguments": arguments, "task": {} if ttl is None else {"ttl": ttl}}
    return await session.session._dispatcher.send_raw_request(  # noqa: SLF001 (no public API, see above)
        "tools/call", params, {"headers": {"mcp-protocol-version": session.protocol_version}, "timeout": 30})


async def get_task(session, task_id):
    return await session.session.send_request(t.GetTaskRequest(params=t.GetTaskRequestParams(task_id=task_id)),
                                              t.GetTaskResult)


def test_tasks_2025_11_25_create_poll_result_list_and_cancel(relay, make_user):
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    phone = Phone(relay.base, token(*ada), delay=3.0)

    async def scenario():
        async with client(relay.base, agent, "legacy", read_timeout=10) as session:
            tasks_capability = session.server_capabilities.model_dump(by_alias=True, exclude_none=True)["tasks"]
            assert tasks_capability == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
            tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            assert tools["get_phone_location"].execution.task_support == "optional"

            created = t.CreateTaskResult.model_validate(await call_as_task(session, {"timeout_secs": 300}), by_name=False)
            task = created.task
            assert task.status == "working" and task.poll_interval == 2000 and task.ttl == 60_000
            assert (await get_task(session, task.task_id)).status == "working"
            # tasks/result blocks until the person answers (3 s, under the 5 s wait bound).
            result = await session.session.send_request(
                t.GetTaskPayloadRequest(params=t.GetTaskPayloadRequestParams(task_id=task.task_id)), t.CallToolResult)
            located(result)
            assert result.meta["io.modelcontextprotocol/related-task"] == {"taskId": task.task_id}
            done = await get_task(session, task.task_id)
            assert done.status == "completed" and done.last_updated_at >= done.created_at
            with pytest.raises(MCPError) as refused:
                await session.session.send_request(
                    t.CancelTaskRequest(params=t.CancelTaskRequestParams(task_id=task.task_id)), t.CancelTaskResult)
            assert refused.value.error.code == -32602 and "terminal status 'completed'" in refused.value.error.message

            # A second task, cancelled while it waits: the phone gets cancel.
            other = t.CreateTaskResult.model_validate(await call_as_task(session, {}, ttl=None), by_name=False).task
            cancelled = await session.session.send_request(
                t.CancelTaskRequest(params=t.CancelTaskRequestParams(task_id=other.task_id)), t.CancelTaskResult)
            assert cancelled.status == "cancelled"
            assert (await get_task(session, other.task_id)).status == "cancelled"

            listed = await session.session.send_request(t.ListTasksRequest(), t.ListTasksResult)
            assert [task.task_id for task in listed.tasks] == [other.task_id, task.task_id]
            assert [task.status for task in listed.tasks] == ["cancelled", "completed"]
            assert listed.next_cursor is None

            with pytest.raises(MCPError) as unknown:
                await get_task(session, "wbr_" + "A" * 32)
            assert unknown.value.error.code == -32602
            for bad in (0, 10**12, 1.5, "60000"):
                with pytest.raises(MCPError) as bad_ttl:
                    await call_as_task(session, {}, ttl=bad)
                assert bad_ttl.value.error.code == -32602 and "task.ttl" in bad_ttl.value.error.message
            return task.task_id, other.task_id

    try:
        first, second = asyncio.run(asyncio.wait_for(scenario(), 60))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not phone.kinds("cancel"):
            time.sleep(0.05)
        assert [m["id"] for m in phone.kinds("cancel")] == [phone.kinds("locate")[1]["id"]]
    finally:
        phone.stop()

    # Another client of the same user sees none of them, in get and in list.
    async def stranger():
        async with client(relay.base, token(*ada, client_id=str(uuid.uuid4())), "legacy", read_timeout=10) as session:
            for task_id in (first, second):
                with pytest.raises(MCPError) as refused:
                    await get_task(session, task_id)
                assert refused.value.error.code == -32602 and refused.value.error.message == "Failed to retrieve task: Task not found"
            assert (await session.session.send_request(t.ListTasksRequest(), t.ListTasksResult)).tasks == []

    asyncio.run(asyncio.wait_for(stranger(), 30))


def test_a_task_and_its_result_are_gone_after_its_ttl(relay, make_user):
    """A 2 s ttl cuts the consent window to 2 s and keeps nothing past it: tasks/get says
    "not found" after it, and the reaper deletes the rows."""
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    phone = Phone(relay.base, token(*ada))

    async def scenario():
        async with client(relay.base, agent, "legacy", read_timeout=10) as session:
            task = t.CreateTaskResult.model_validate(await call_as_task(session, {}, ttl=2_000), by_name=False).task
            assert task.ttl == 2_000
            located(await session.session.send_request(
                t.GetTaskPayloadRequest(params=t.GetTaskPayloadRequestParams(task_id=task.task_id)), t.CallToolResult))
            await asyncio.sleep(2.5)
            with pytest.raises(MCPError) as gone:
                await get_task(session, task.task_id)
            assert gone.value.error.code == -32602

    try:
        asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        phone.stop()
    with psycopg.connect(RELAY_URL, autocommit=True) as conn:  # the reaper, as the relay runs it
        conn.execute("select relay.reap()")
    with psycopg.connect(ADMIN_URL) as conn:
        assert conn.execute("select count(*) from relay.pending_requests where owner_id = %s", (ada[0],)).fetchone()[0] == 0


# ---------------------------------------------------------------- 2026-07-28 tasks extension

class _TaskFields(t.Result):
    task_id: str
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class CreateTaskResult(_TaskFields):
    result_type: Literal["task"] = "task"


class GetTaskResult(_TaskFields):
    result_type: Literal["complete"] = "complete"
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskIdParams(t.RequestParams):
    task_id: str


class TasksGet(t.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # the SDK sends it as Mcp-Name, as the extension requires


class TasksCancel(t.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


POLLS = []


async def resolve(handle: CreateTaskResult, context: ClaimContext) -> t.CallToolResult:
    while True:
        task = await context.session.send_request(TasksGet(params=TaskIdParams(task_id=handle.task_id)), GetTaskResult)
        POLLS.append(task.status)
        if task.status != "working":
            assert task.status == "completed", task
            return t.CallToolResult.model_validate(task.result, by_name=False)
        await asyncio.sleep(task.poll_interval_ms / 1000)


class TasksExtension(ClientExtension):
    identifier = "io.modelcontextprotocol/tasks"

    def claims(self):
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve)]


def test_tasks_extension_2026_07_28(relay, make_user):
    """A client that declares the extension gets the fix in the call when the person is quick,
    and a task after the wait bound when not; cancel and unknown ids; a client that does
    not declare it gets -32021 for tasks/*."""
    ada = make_user("Ada", with_session=True)
    agent = token(*ada, client_id=str(uuid.uuid4()))
    phone = Phone(relay.base, token(*ada), delay=8.0)

    async def scenario():
        async with client(relay.base, agent, "auto", read_timeout=7, extensions=[TasksExtension()]) as session:
            assert session.protocol_version == "2026-07-28"
            POLLS.clear()
            result = await session.call_tool("get_phone_location", {"timeout_secs": 60})
            located(result)
            assert POLLS[0] == "working" and POLLS[-1] == "completed"
            handle = await session.session.call_tool("get_phone_location", {"timeout_secs": 60}, allow_claimed=True)
            assert isinstance(handle, CreateTaskResult) and handle.ttl_ms == 660_000 and handle.poll_interval_ms == 2000
            await session.session.send_request(TasksCancel(params=TaskIdParams(task_id=handle.task_id)), t.EmptyResult)
            cancelled = await session.session.send_request(TasksGet(params=TaskIdParams(task_id=handle.task_id)), GetTaskResult)
            assert cancelled.status == "cancelled" and cancelled.result is None
            with pytest.raises(MCPError) as unknown:
                await session.session.send_request(TasksGet(params=TaskIdParams(task_id="wbr_" + "B" * 32)), GetTaskResult)
            assert unknown.value.error.code == -32602
            return handle.task_id

    try:
        task_id = asyncio.run(asyncio.wait_for(scenario(), 60))
    finally:
        phone.stop()

    # Without the extension in its capabilities: -32021, HTTP 400.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": task_id, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}
    request = urllib.request.Request(relay.base + "/mcp", data=json.dumps(body).encode(), method="POST", headers={
        "Authorization": f"Bearer {agent}", "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": task_id})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["error"]["code"] == -32021
