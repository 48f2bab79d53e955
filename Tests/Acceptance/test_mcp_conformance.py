"""MCP 2026-07-28 natively, checked by tools nobody here wrote: `jbt-mcpcheck`
(the 2026-07-28 Streamable HTTP transport) and `mcp-authlab` (the authorization rules),
both pinned in requirements.txt, against a real relay on loopback. Before: mcpcheck failed
server/discover (-32601 with HTTP 200), resultType, cache hints, the version and header
checks; mcp-authlab failed VER-01 (an unsupported MCP-Protocol-Version answered 200)."""
import http.server
import json
import pathlib
import subprocess
import sys
import threading
import uuid

import time

import jwt
import pytest

from relay_server import SECRET, RelayServer, free_port

BIN = pathlib.Path(sys.executable).parent


class FakeAuthorizationServer:
    """RFC 8414 metadata of a local authorization server, as Supabase Auth publishes it
    (the relay's protected-resource metadata names it; mcp-authlab reads it)."""

    def __init__(self):
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/auth/v1"
        issuer = self.issuer

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path not in ("/.well-known/oauth-authorization-server/auth/v1",
                                     "/auth/v1/.well-known/oauth-authorization-server",
                                     "/.well-known/openid-configuration/auth/v1",
                                     "/auth/v1/.well-known/openid-configuration"):
                    self.send_response(404)
                    self.end_headers()
                    return
                body = json.dumps({
                    "issuer": issuer, "authorization_endpoint": issuer + "/oauth/authorize",
                    "token_endpoint": issuer + "/oauth/token", "registration_endpoint": issuer + "/oauth/clients/register",
                    "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
                    "scopes_supported": ["openid", "email"], "authorization_response_iss_parameter_supported": True,
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


@pytest.fixture(scope="module")
def authorization_server():
    server = FakeAuthorizationServer()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def relay(authorization_server):
    server = RelayServer(SUPABASE_URL=authorization_server.issuer.removesuffix("/auth/v1"), LOG_LEVEL="debug")
    server.issuer = authorization_server.issuer
    yield server
    server.stop()


def agent_token(make_user, relay):
    """An OAuth access token as that authorization server would issue it (`iss` included)."""
    user, session, email = make_user("Conformance", with_session=True)
    now = int(time.time())
    return jwt.encode({"sub": str(user), "aud": "authenticated", "role": "authenticated", "email": email,
                       "session_id": str(session), "client_id": str(uuid.uuid4()), "iss": relay.issuer,
                       "iat": now, "exp": now + 3600}, SECRET, algorithm="HS256")


def test_jbt_mcpcheck_passes_every_check(relay, make_user):
    result = subprocess.run([str(BIN / "mcpcheck"), "--probe", "all", "--token", agent_token(make_user, relay), "--json",
                             relay.base + "/mcp"], capture_output=True, text=True, timeout=180)
    report = json.loads(result.stdout)
    failed = [(check["name"], finding) for check in report.get("checks", [])
              for finding in check.get("findings", []) if finding.get("severity") == "must" and not finding.get("passed", True)]
    summary = {check["name"]: check.get("status") for check in report.get("checks", [])}
    print("\nmcpcheck:", summary)
    assert result.returncode == 0, (result.returncode, failed or result.stdout[-3000:], result.stderr[-2000:])


def test_mcp_authlab_reports_no_must_failure(relay, make_user):
    result = subprocess.run([str(BIN / "mcp-authlab"), "scan", relay.base + "/mcp", "--token", agent_token(make_user, relay),
                             "--no-login", "--tool", "list_people_sharing_with_me", "--format", "json"],
                            capture_output=True, text=True, timeout=180)
    report = json.loads(result.stdout)
    print("\nmcp-authlab:", report.get("conformance"), report.get("grade"), "must failures:", report.get("must_failures"))
    assert report.get("must_failures") == [], json.dumps(report, indent=1)[:4000]
