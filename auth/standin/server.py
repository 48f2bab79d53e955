#!/usr/bin/env python3
# =============================================================================
# DEVELOPMENT STAND-IN ONLY. Production never uses this file.
# Production uses Supabase Auth's OAuth 2.1 server (authorization_url_path
# `/app/oauth/consent`). This is a small, strict, local imitation of the parts of it
# Whereabot's agents and consent page use, for development and tests on one machine.
# =============================================================================
"""A local stand-in for Supabase Auth's OAuth 2.1 server (see auth/standin/README.md).

    .venv/bin/python auth/standin/server.py --port 54321 --database-url URL

URL is a role that can write auth.* (locally the bootstrap superuser's admin URL).
`--port 0` picks a free port; the first line on stdout is always
`listening on http://127.0.0.1:<port>`.

Environment: SUPABASE_JWT_SECRET (also accept HS256 user tokens), AUTH_SITE_URL (the
consent page's site, default http://127.0.0.1:8080), STANDIN_CONSENT_PATH (default
/app/oauth/consent), STANDIN_PUBLIC_URL (the URL clients reach this server at; default
http://127.0.0.1:<port>), STANDIN_KEY_FILE (PEM of the ES256 key; created when missing),
STANDIN_CODE_SECONDS (300), STANDIN_AUTHORIZATION_SECONDS (600), STANDIN_ACCESS_SECONDS
(3600), STANDIN_REFRESH_SECONDS (2592000), STANDIN_AUDIENCE_HOOK=1 (add the RFC 8707
`resource` to `aud`), STANDIN_ISSUE_2820 (default 1: answer authorization details 400 as
Supabase does today for `resource`, `offline_access` or a public client, supabase/auth#2820;
0 turns that off, for the compatibility tests only),
STANDIN_OTP_SECONDS (3600: a sign-in link's lifetime), STANDIN_OTP_INTERVAL_SECONDS (2: at
most one mail per address in that time), STANDIN_PORT (instead of --port),
STANDIN_DATABASE_URL (instead of --database-url), STANDIN_MAILBOX_PORT (instead of
--mailbox-port).

It also signs people in by magic link (POST /auth/v1/otp, GET /auth/v1/verify, the refresh
grant at POST /auth/v1/token, POST /auth/v1/logout). Its mails land in a development
mailbox, a second server in this process (`--mailbox-port`, default 54324; 0 = a free
port) with Mailpit's API shape; the second line on stdout is
`mailbox on http://127.0.0.1:<port>`.

This file is the entry point (settings, HTTP routing, `main`); the work is in one module
per job beside it: registration.py (metadata, dynamic registration), authorize.py
(authorize, the consent and grants API), tokens.py (the token endpoint, the signing key),
signin.py (magic link, the user's refresh, logout), dev_mailbox.py (the mailbox),
storage.py (what is kept: authorization requests, codes and refresh tokens in the
database's auth.oauth_authorizations and auth.refresh_tokens, so a restart forgets none;
sign-in links in memory), common.py (bounds, errors, helpers).
"""
import argparse
import html
import json
import os
import re
import sys
import threading
import urllib.parse
from http.server import ThreadingHTTPServer

import psycopg

from authorize import Authorization
from common import (RouteLoggingHandler, MAX_BODY, MAX_CONNECTIONS, MAX_MAILBOX_CONNECTIONS, Refusal, api_error, env_int, grant_error,
                    oauth_error)
from dev_mailbox import Mailbox, MailboxHandler
from registration import Registration
from signin import SignIn
from storage import State, Store, connect
from tokens import SigningKey, Tokens


# -----------------------------------------------------------------------------
# The server: its settings, and the parts it is made of (one module each)
# -----------------------------------------------------------------------------
class StandIn(Registration, Authorization, Tokens, SignIn):
    def __init__(self, database_url, public_url):
        self.database_url = database_url
        self.public_url = public_url.rstrip("/")
        self.issuer = self.public_url + "/auth/v1"
        self.site_url = os.environ.get("AUTH_SITE_URL", "http://127.0.0.1:8080").rstrip("/")
        consent_path = os.environ.get("STANDIN_CONSENT_PATH", "/app/oauth/consent")
        self.consent_url = self.site_url + ("" if consent_path.startswith("/") else "/") + consent_path
        site = urllib.parse.urlsplit(self.site_url)
        self.site_origin = f"{site.scheme}://{site.netloc}"
        self.jwt_secret = os.environ.get("SUPABASE_JWT_SECRET") or None
        self.code_seconds = env_int("STANDIN_CODE_SECONDS", 300)
        self.authorization_seconds = env_int("STANDIN_AUTHORIZATION_SECONDS", 600)
        self.access_seconds = env_int("STANDIN_ACCESS_SECONDS", 3600)
        self.refresh_seconds = env_int("STANDIN_REFRESH_SECONDS", 30 * 24 * 3600)
        self.audience_hook = os.environ.get("STANDIN_AUDIENCE_HOOK") == "1"
        # supabase/auth#2820 (open): the real server's authorization details answer 400 for
        # requests with `resource` or `offline_access`, or from public clients. On by default,
        # as Supabase behaves today (the relay is the agents' authorization server because of
        # it); STANDIN_ISSUE_2820=0 turns it off for the compatibility tests only.
        self.issue_2820 = os.environ.get("STANDIN_ISSUE_2820", "1") != "0"
        self.otp_seconds = env_int("STANDIN_OTP_SECONDS", 3600)
        self.otp_interval = env_int("STANDIN_OTP_INTERVAL_SECONDS", 2)
        self.key = SigningKey(os.environ.get("STANDIN_KEY_FILE") or None)
        self.store = Store(self.authorization_seconds, self.code_seconds, self.refresh_seconds)
        self.state = State()   # sign-in links only: the rest is in the database (storage.py)
        self.mailbox = Mailbox()

    def db(self):
        return connect(self.database_url)


# -----------------------------------------------------------------------------
# HTTP
# -----------------------------------------------------------------------------
AUTHZ_RE = re.compile(r"^/auth/v1/oauth/authorizations/([^/]{1,64})$")
CONSENT_RE = re.compile(r"^/auth/v1/oauth/authorizations/([^/]{1,64})/consent$")
PUBLIC_PATHS = {
    "/.well-known/oauth-authorization-server/auth/v1": "metadata",
    "/auth/v1/.well-known/oauth-authorization-server": "metadata",
    "/auth/v1/.well-known/jwks.json": "jwks",
    "/auth/v1/oauth/clients/register": "register",
    "/auth/v1/oauth/authorize": "authorize",
    "/auth/v1/oauth/token": "token",
    "/auth/v1/user/oauth/grants": "grants",
    "/auth/v1/otp": "otp",
    "/auth/v1/verify": "verify",
    "/auth/v1/token": "user_token",
    "/auth/v1/logout": "logout",
}
METHODS = {"metadata": ("GET",), "jwks": ("GET",), "register": ("POST",), "authorize": ("GET",),
           "token": ("POST",), "grants": ("GET", "DELETE"), "details": ("GET",), "consent": ("POST",),
           "otp": ("POST",), "verify": ("GET",), "user_token": ("POST",), "logout": ("POST",)}


class Handler(RouteLoggingHandler):
    server_version = "whereabot-auth-standin"
    log_prefix = "standin"
    standin: StandIn = None

    def send(self, status, body=None, headers=None, content_type="application/json"):
        data = b""
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", content_type if content_type != "application/json"
                             else "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Pragma", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Expose-Headers", "Content-Length, Content-Type, X-Supabase-Api-Version")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def page(self, status, message):
        text = ("<!doctype html><meta charset=utf-8><title>Authorization error</title>"
                "<h1>Authorization error</h1><p>" + html.escape(message) + "</p>"
                "<p>(Whereabot's local development stand-in for Supabase Auth)</p>")
        self.send(status, text.encode(), {"Content-Security-Policy": "default-src 'none'"}, "text/html; charset=utf-8")

    def read_body(self):
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise Refusal(411, {"error": "invalid_request", "error_description": "send Content-Length, not chunks"})
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        if not length.isdigit():
            raise Refusal(400, {"error": "invalid_request", "error_description": "bad Content-Length"})
        length = int(length)
        self.body_read = True
        if length > MAX_BODY:
            self.close_connection = True
            raise Refusal(413, {"error": "invalid_request", "error_description": f"the body exceeds {MAX_BODY} bytes"})
        return self.rfile.read(length)

    def json_body(self, error):
        body = self.read_body()
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise error("the body must be application/json")
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise error("the body is not valid JSON") from None

    def form_body(self):
        body = self.read_body()
        ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            raise oauth_error("invalid_request", "the body must be application/x-www-form-urlencoded")
        try:
            pairs = urllib.parse.parse_qsl(body.decode("ascii"), keep_blank_values=True, strict_parsing=bool(body),
                                           max_num_fields=32)
        except (UnicodeDecodeError, ValueError):
            raise oauth_error("invalid_request", "the body is not a valid form") from None
        form = {}
        for name, value in pairs:
            if name in form:
                raise oauth_error("invalid_request", f"{name[:64]} must be given once")
            form[name] = value
        return form

    def check_origin(self):
        """As Supabase Auth: the consent API answers only the site's own pages (or no Origin)."""
        origin = self.headers.get("Origin")
        if origin and origin.rstrip("/") != self.standin.site_origin:
            raise api_error(400, "validation_failed", "unauthorized request origin")

    def do_OPTIONS(self):
        self.route_label = urllib.parse.urlsplit(self.path).path[:80]
        self.send(204, None, {"Access-Control-Allow-Methods": "GET, POST, DELETE, OPTIONS",
                              "Access-Control-Allow-Headers": "authorization, content-type, apikey, x-client-info,"
                                                              " x-supabase-api-version",
                              "Access-Control-Max-Age": "600"})

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def dispatch(self):
        self.body_read = False
        try:
            self.route()
        finally:
            # A body this request did not read would be taken for the next request.
            if self.headers.get("Transfer-Encoding") or (
                    not self.body_read and self.headers.get("Content-Length", "0") != "0"):
                self.close_connection = True

    def route(self):
        standin = self.standin
        try:
            parts = urllib.parse.urlsplit(self.path)
        except ValueError:
            return self.send(400, {"error": "invalid_request", "error_description": "bad request target"})
        path, authorization_id = parts.path, None
        route = PUBLIC_PATHS.get(path)
        if route is None and (m := CONSENT_RE.match(path)):
            route, authorization_id = "consent", m.group(1)
        elif route is None and (m := AUTHZ_RE.match(path)):
            route, authorization_id = "details", m.group(1)
        self.route_label = {"details": "/auth/v1/oauth/authorizations/{id}",
                            "consent": "/auth/v1/oauth/authorizations/{id}/consent"}.get(route, path if route else "?")
        if route is None:
            return self.send(404, {"code": 404, "error_code": "not_found", "msg": "no such endpoint"})
        if self.command not in METHODS[route]:
            return self.send(405, {"code": 405, "error_code": "method_not_allowed", "msg": "method not allowed"},
                             {"Allow": ", ".join(METHODS[route] + ("OPTIONS",))})
        try:
            query = urllib.parse.parse_qs(parts.query, keep_blank_values=True, max_num_fields=32)
        except ValueError:
            return self.send(400, {"error": "invalid_request", "error_description": "too many query parameters"})
        bearer = self.headers.get("Authorization")
        try:
            if route == "metadata":
                return self.send(200, standin.metadata())
            if route == "jwks":
                return self.send(200, standin.jwks())
            if route == "register":
                body = self.json_body(lambda d: oauth_error("invalid_client_metadata", d))
                return self.send(201, standin.register(body))
            if route == "authorize":
                result = standin.authorize(query)
                if result[0] == "page":
                    return self.page(result[1], result[2])
                return self.send(302, None, {"Location": result[1]})
            if route == "token":
                form = self.form_body()
                return self.send(200, standin.token(form, bearer, self.headers.get("User-Agent"),
                                                    self.client_address[0]))
            # Sign-in by magic link: Supabase Auth's own endpoints, its error shape.
            if route == "otp":
                body = self.json_body(lambda d: api_error(400, "bad_json", d))
                return self.send(200, standin.send_magic_link(query, body))
            if route == "verify":
                location = standin.verify_link(query, self.headers.get("User-Agent"), self.client_address[0])
                return self.send(303, None, {"Location": location, "Referrer-Policy": "no-referrer"})
            if route == "user_token":
                body = self.json_body(lambda d: grant_error("bad_json", d, "invalid_request"))
                return self.send(200, standin.user_token_grant(query, body))
            if route == "logout":
                standin.logout(bearer, query)
                return self.send(204)
            self.check_origin()
            if route == "details":
                return self.send(200, standin.authorization_details(authorization_id, bearer))
            if route == "consent":
                body = self.json_body(lambda d: api_error(400, "bad_json", d))
                return self.send(200, standin.consent(authorization_id, bearer, body))
            if self.command == "GET":
                return self.send(200, standin.list_grants(bearer))
            standin.revoke_grant(bearer, query)
            return self.send(204)
        except Refusal as refusal:
            return self.send(refusal.status, refusal.body, refusal.headers)
        except psycopg.Error as error:
            sys.stderr.write(f"standin: database error on {self.route_label}: {type(error).__name__}\n")
            return self.send(500, {"error": "server_error", "error_description": "database error"})


class Server(ThreadingHTTPServer):
    """At most MAX_CONNECTIONS connections at once; more are closed at once."""
    daemon_threads = True
    request_queue_size = 128
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request, client_address):
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class MailboxServer(Server):
    slots = threading.BoundedSemaphore(MAX_MAILBOX_CONNECTIONS)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Local development stand-in for Supabase Auth's OAuth 2.1 server."
                                                 " Production never uses it.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("STANDIN_PORT", "54321")))
    parser.add_argument("--database-url", default=os.environ.get("STANDIN_DATABASE_URL"))
    parser.add_argument("--mailbox-port", type=int, default=int(os.environ.get("STANDIN_MAILBOX_PORT", "54324")),
                        help="the development mailbox's port on 127.0.0.1 (0: a free port)")
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("--database-url (or STANDIN_DATABASE_URL) is required")
    httpd = Server((args.host, args.port), Handler)
    try:
        mailbox_httpd = MailboxServer(("127.0.0.1", args.mailbox_port), MailboxHandler)
    except OSError as error:
        httpd.server_close()
        raise SystemExit(f"standin: cannot open the mailbox on 127.0.0.1:{args.mailbox_port}: {error.strerror}"
                         " (is Mailpit or another stand-in running? --mailbox-port 0 picks a free port)")
    host, port = httpd.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    public_url = os.environ.get("STANDIN_PUBLIC_URL") or f"http://{shown}:{port}"
    Handler.standin = StandIn(args.database_url, public_url)
    MailboxHandler.mailbox = Handler.standin.mailbox
    threading.Thread(target=mailbox_httpd.serve_forever, name="mailbox", daemon=True).start()
    print(f"listening on http://{shown}:{port}", flush=True)
    print(f"mailbox on http://127.0.0.1:{mailbox_httpd.server_address[1]}", flush=True)
    sys.stderr.write("standin: DEVELOPMENT STAND-IN for Supabase Auth's OAuth 2.1 server; never use in production\n")
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        mailbox_httpd.server_close()


if __name__ == "__main__":
    main()
