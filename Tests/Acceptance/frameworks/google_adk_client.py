"""Google ADK's McpToolset at its defaults (StreamableHTTPConnectionParams with the URL and
the Authorization header: a 5-s connect timeout, a 300-s read timeout), calling the
get_phone_location tool through `run_async` as its agent loop does, with a real
ToolContext of an in-memory session, as a model would (follow_up.py). Runs in its own venv."""
import asyncio
import json
import sys

from google.adk.agents import LlmAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.sessions import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
from google.adk.tools.tool_context import ToolContext

from follow_up import ask, from_text, report


async def main(url, token, attempts, arguments):
    toolset = McpToolset(connection_params=StreamableHTTPConnectionParams(url=url, headers={"Authorization": f"Bearer {token}"}))
    try:
        tool = next(tool for tool in await toolset.get_tools() if tool.name == "get_phone_location")
        agent = LlmAgent(name="finder", model="gemini-2.5-flash", tools=[toolset])
        sessions = InMemorySessionService()
        session = await sessions.create_session(app_name="finder", user_id="person")
        context = InvocationContext(session_service=sessions, invocation_id="call-1", agent=agent, session=session)

        async def call(args):
            result = await tool.run_async(args=args, tool_context=ToolContext(context))
            if isinstance(result, dict) and "content" in result:
                text = "".join(part.get("text", "") for part in result["content"] if isinstance(part, dict))
                if result.get("isError"):
                    return True, text, None
                return False, text, result.get("structuredContent")
            return from_text(json.dumps(result))
        report(await ask(call, attempts, arguments))
    finally:
        await toolset.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])))
