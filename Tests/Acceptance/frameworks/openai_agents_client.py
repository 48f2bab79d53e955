"""openai-agents' own MCP client at its defaults (MCPServerStreamableHttp:
client_session_timeout_seconds=5), asking get_phone_location the way its runner does for
a model, and asking again after an error as a model told "An error occurred while running
the tool. Please try again" does (follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from agents.mcp import MCPServerStreamableHttp

from follow_up import ask, report


async def main(url, token, attempts, arguments):
    server = MCPServerStreamableHttp(params={"url": url, "headers": {"Authorization": f"Bearer {token}"}})
    async with server:
        async def call(args):
            result = await server.call_tool("get_phone_location", args)
            text = result.content[0].text if result.content else ""
            return result.is_error, text, result.structured_content
        report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
