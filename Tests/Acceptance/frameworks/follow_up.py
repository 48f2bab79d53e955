"""What a model does with get_phone_location's answers, for the framework clients: a
"no answer yet" result (structuredContent status "waiting") is followed by one call with
its request_id, as the tool's text says; an error is asked again (the framework tells the
model to try again). The result as one JSON line: attempts, errors, is_error, text."""
import json
import re

# The request_id in the waiting text, for clients that hand the model only text.
WAITING = re.compile(r'request_id "(wbr_[A-Za-z0-9_-]{32})"')


async def ask(call, attempts, arguments):
    """`call(arguments)` returns (is_error, text, structured) or raises: the final answer."""
    errors, asked = [], 0
    while asked < attempts:
        asked += 1
        try:
            is_error, text, structured = await call(arguments)
        except Exception as error:  # noqa: BLE001 (what the framework raises is what the model hears about)
            errors.append(type(error).__name__)
            continue
        if not is_error and (structured or {}).get("status") == "waiting":
            arguments = {"request_id": structured["request_id"]}
            continue
        if not is_error and structured is None and (waiting := WAITING.search(text or "")):
            arguments = {"request_id": waiting.group(1)}
            continue
        return {"attempts": asked, "errors": errors, "is_error": is_error, "text": text}
    return {"attempts": asked, "errors": errors, "is_error": True, "text": "no result"}


def from_text(text):
    """A text-only answer as `ask` takes it: the fix's JSON read as its structured content."""
    try:
        fix = json.loads(text)
    except ValueError:
        return False, text, None
    return False, text, fix if isinstance(fix, dict) else None


def report(result):
    print(json.dumps(result))
