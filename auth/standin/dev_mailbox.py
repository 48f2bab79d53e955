# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file (see auth/standin/README.md).
# =============================================================================
"""The development mailbox: the sign-in mails, in memory, with Mailpit's API shape
(served on its own port by server.py)."""
import html
import json
import re
import secrets
import threading
import time
import urllib.parse
import uuid

from common import MAX_BODY, MAX_MAILS, RouteLoggingHandler


class Mailbox:
    """The development mailbox: the newest MAX_MAILS mails, in memory, in Mailpit's shapes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.mails = []   # oldest first

    def deliver(self, to, subject, text, body_html):
        now = time.time()
        created = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"
        mail = {"ID": secrets.token_urlsafe(16), "MessageID": f"{uuid.uuid4()}@whereabot-auth-standin",
                "From": {"Name": "Whereabot (development)", "Address": "noreply@whereabot.localhost"},
                "To": [{"Name": "", "Address": to}], "Subject": subject, "Created": created,
                "Text": text, "HTML": body_html}
        with self.lock:
            self.mails.append(mail)
            del self.mails[:-MAX_MAILS]
        return mail["ID"]

    @staticmethod
    def summary(mail):
        return {"ID": mail["ID"], "MessageID": mail["MessageID"], "Read": False, "From": mail["From"],
                "To": mail["To"], "Cc": [], "Bcc": [], "ReplyTo": [], "Subject": mail["Subject"],
                "Created": mail["Created"], "Tags": [], "Size": len(mail["Text"]) + len(mail["HTML"]),
                "Attachments": 0, "Snippet": ""}

    def messages(self, start=0, limit=50):
        with self.lock:
            newest = list(reversed(self.mails))
        page = newest[start:start + limit]
        return {"total": len(newest), "unread": len(newest), "count": len(page), "messages_count": len(newest),
                "start": start, "tags": [], "messages": [self.summary(m) for m in page]}

    def message(self, mail_id):
        with self.lock:
            mail = next((m for m in self.mails if m["ID"] == mail_id), None)
        if mail is None:
            return None
        return {**self.summary(mail), "ReturnPath": mail["From"]["Address"], "Date": mail["Created"],
                "Text": mail["Text"], "HTML": mail["HTML"], "Inline": [], "Attachments": []}

    def delete(self, ids=None):
        with self.lock:
            if ids is None:
                self.mails.clear()
            else:
                self.mails[:] = [m for m in self.mails if m["ID"] not in set(ids)]

    def newest(self):
        with self.lock:
            return list(reversed(self.mails))


MESSAGE_RE = re.compile(r"^/api/v1/message/([A-Za-z0-9_-]{1,64})$")


class MailboxHandler(RouteLoggingHandler):
    """The development mailbox, with Mailpit's API shape: GET /api/v1/messages (newest
    first; `start`, `limit`), GET /api/v1/message/{ID}, DELETE /api/v1/messages (all, or
    `{"IDs": [...]}`), and a page at / to read them. No CORS, and only a loopback Host
    (DNS rebinding): no other web page may read the links."""
    server_version = "whereabot-auth-standin-mailbox"
    log_prefix = "mailbox"
    mailbox: Mailbox = None

    def send(self, status, body, content_type="application/json; charset=utf-8", headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_GET(self):
        self.handle_mailbox()

    def do_DELETE(self):
        self.handle_mailbox()

    def do_POST(self):
        self.handle_mailbox()

    def handle_mailbox(self):
        length = self.headers.get("Content-Length", "0")
        if self.headers.get("Transfer-Encoding") or not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            self.route_label = "?"
            return self.send(400, {"error": "bad body"})
        raw = self.rfile.read(int(length)) if int(length) else b""
        parts = urllib.parse.urlsplit(self.path)
        match = MESSAGE_RE.match(parts.path)
        self.route_label = "/api/v1/message/{id}" if match else parts.path[:80]
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].lower()
        if host not in ("127.0.0.1", "localhost", "[::1]"):
            return self.send(403, {"error": "the mailbox answers loopback hosts only"})
        if parts.path == "/api/v1/messages" and self.command == "GET":
            try:
                query = urllib.parse.parse_qs(parts.query, max_num_fields=32)
                start = int(query.get("start", ["0"])[0])
                limit = int(query.get("limit", ["50"])[0])
            except ValueError:
                return self.send(400, {"error": "start and limit must be integers"})
            return self.send(200, self.mailbox.messages(max(start, 0), min(max(limit, 0), MAX_MAILS) or 50))
        if parts.path == "/api/v1/messages" and self.command == "DELETE":
            ids = None
            if raw.strip():
                try:
                    body = json.loads(raw)
                    ids = body.get("IDs") or body.get("ids") or None
                    if ids is not None and not all(isinstance(i, str) for i in ids):
                        raise ValueError
                except (ValueError, AttributeError, TypeError, RecursionError):
                    return self.send(400, {"error": "the body must be {\"IDs\": [...]}"})
            self.mailbox.delete(ids)
            return self.send(200, b"ok", "text/plain; charset=utf-8")
        if match and self.command == "GET":
            mail = self.mailbox.message(match.group(1))
            if mail is None:
                return self.send(404, b"message not found", "text/plain; charset=utf-8")
            return self.send(200, mail)
        if parts.path == "/" and self.command == "GET":
            items = "".join(
                "<article><p><b>" + html.escape(m["Subject"]) + "</b> to " + html.escape(m["To"][0]["Address"]) +
                " <small>" + html.escape(m["Created"]) + "</small></p>" + m["HTML"] + "</article><hr>"
                for m in self.mailbox.newest())
            page = ("<!doctype html><meta charset=utf-8><title>Development mailbox</title>"
                    "<h1>Development mailbox</h1><p>The auth stand-in's mails, newest first (not a real mail"
                    " server; reload to see new ones).</p><hr>" + (items or "<p>No mail yet.</p>"))
            return self.send(200, page.encode(), "text/html; charset=utf-8",
                             {"Content-Security-Policy": "default-src 'none'", "Referrer-Policy": "no-referrer"})
        return self.send(404, b"not found", "text/plain; charset=utf-8")
