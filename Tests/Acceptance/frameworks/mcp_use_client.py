"""mcp-use's MCPClient at its defaults, configured as it takes a bearer token — `"auth": TOKEN`
(an `Authorization` header under `headers` is ignored and it starts an OAuth flow) — asking
get_phone_location as a model would (follow_up.py). Runs in its own venv, telemetry off."""
import asyncio
import json
import os
import sys

os.environ.setdefault("MCP_USE_ANONYMIZED_TELEMETRY", "false")

from mcp_use import MCPClient  # noqa: E402 (after the telemetry switch)

from follow_up import ask, report  # noqa: E402


async def main(url, token, attempts, arguments):
    client = MCPClient.from_dict({"mcpServers": {"whereabot": {"url": url, "auth": token}}})
    session = await client.create_session("whereabot")
    try:
        async def call(args):
            result = await session.call_tool("get_phone_location", args)
            text = result.content[0].text if result.content else ""
            return result.isError, text, result.structuredContent
        report(await ask(call, attempts, arguments))
    finally:
        await client.close_all_sessions()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
