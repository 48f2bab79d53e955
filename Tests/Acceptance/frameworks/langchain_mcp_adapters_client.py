"""LangChain's MCP adapters at their defaults (MultiServerMCPClient over streamable HTTP with
the Authorization header), invoking the get_phone_location tool as an agent does
(`ainvoke`), as a model would (follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient

from follow_up import ask, from_text, report


def text_of(content):
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)


async def main(url, token, attempts, arguments):
    client = MultiServerMCPClient({"whereabot": {"url": url, "transport": "streamable_http",
                                                 "headers": {"Authorization": f"Bearer {token}"}}})
    tools = {tool.name: tool for tool in await client.get_tools()}

    async def call(args):
        return from_text(text_of(await tools["get_phone_location"].ainvoke(args)))
    report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
