"""smolagents' MCPClient at its defaults (streamable HTTP with the Authorization header,
text results), calling the get_phone_location tool as its agent does, as a model would
(follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from smolagents import MCPClient

from follow_up import ask, from_text, report


async def main(url, token, attempts, arguments):
    with MCPClient({"url": url, "transport": "streamable-http", "headers": {"Authorization": f"Bearer {token}"}},
                   structured_output=False) as tools:
        tool = next(tool for tool in tools if tool.name == "get_phone_location")

        async def call(args):
            return from_text(str(await asyncio.to_thread(lambda: tool(**args))))
        report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
