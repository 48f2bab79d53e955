"""openai-agents' own MCP client at its defaults (MCPServerStreamableHttp:
client_session_timeout_seconds=5), asking get_phone_location the way its runner does for
a model, and asking again after an error as a model told "An error occurred while running
the tool. Please try again" does. Runs in the framework's own venv (test_frameworks.py).
Prints one JSON line: the attempts, and the final result's error flag and text."""
import asyncio
import json
import sys

from agents.mcp import MCPServerStreamableHttp


async def main(url, token, attempts, arguments):
    server = MCPServerStreamableHttp(params={"url": url, "headers": {"Authorization": f"Bearer {token}"}})
    errors = []
    async with server:
        for attempt in range(1, attempts + 1):
            try:
                result = await server.call_tool("get_phone_location", arguments)
            except Exception as error:  # noqa: BLE001 (what the framework raises is what the model hears about)
                errors.append(type(error).__name__)
                continue
            print(json.dumps({"attempts": attempt, "errors": errors, "is_error": result.is_error,
                              "text": result.content[0].text if result.content else ""}))
            return
    print(json.dumps({"attempts": attempts, "errors": errors, "is_error": True, "text": "no result"}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
