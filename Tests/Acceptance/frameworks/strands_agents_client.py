"""Strands Agents' MCPClient at its defaults (a URL and the Authorization header), calling
get_phone_location as its agent loop does (`call_tool_sync`), as a model would
(follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from strands.tools.mcp import MCPClient

from follow_up import ask, report


async def main(url, token, attempts, arguments):
    client = MCPClient(url=url, headers={"Authorization": f"Bearer {token}"})
    with client:
        async def call(args):
            result = client.call_tool_sync("call-1", "get_phone_location", args)
            text = "".join(part.get("text", "") for part in result.get("content", []))
            return result.get("status") == "error", text, result.get("structuredContent")
        report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
