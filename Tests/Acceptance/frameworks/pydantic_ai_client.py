"""Pydantic AI's MCPToolset at its defaults (a URL and the Authorization header; it prefers
tasks where the server offers them), calling get_phone_location the way an agent run does
(`direct_call_tool`), as a model would (follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from pydantic_ai.mcp import MCPToolset

from follow_up import ask, report


async def main(url, token, attempts, arguments):
    toolset = MCPToolset(url, headers={"Authorization": f"Bearer {token}"})
    async with toolset:
        async def call(args):
            result = await toolset.direct_call_tool("get_phone_location", args)
            if isinstance(result, dict):
                return False, json.dumps(result), result
            return False, str(result), None
        report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
