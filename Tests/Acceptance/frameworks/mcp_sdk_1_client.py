"""The official MCP Python SDK 1.x at its defaults (streamablehttp_client with the
Authorization header, ClientSession), asking get_phone_location as a model would
(follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from follow_up import ask, report


async def main(url, token, attempts, arguments):
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {token}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()

            async def call(args):
                result = await session.call_tool("get_phone_location", args)
                text = result.content[0].text if result.content else ""
                return result.isError, text, result.structuredContent
            report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
