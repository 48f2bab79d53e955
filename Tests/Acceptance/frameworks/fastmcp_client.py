"""fastmcp's Client at its defaults (a bearer token as `auth`, no request timeout), asking
get_phone_location as a model would (follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from fastmcp import Client

from follow_up import ask, report


async def main(url, token, attempts, arguments):
    async with Client(url, auth=token) as client:
        async def call(args):
            result = await client.call_tool("get_phone_location", args, raise_on_error=False)
            text = result.content[0].text if result.content else ""
            return result.is_error, text, result.structured_content
        report(await ask(call, attempts, arguments))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
