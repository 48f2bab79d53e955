"""A client ID metadata document (CIMD) served over https by the test, with a CA of its own
(made with the `openssl` command), as an MCP client such as Claude Code or VS Code serves
its own: the relay fetches it with OAUTH_CIMD_CA_FILE naming that CA and
OAUTH_CIMD_ALLOW_LOOPBACK=1 (a real document is never on loopback)."""
import http.server
import json
import ssl
import subprocess
import threading

import pytest

import relay_server


def make_ca_and_certificate(directory):
    """A CA and a certificate for 127.0.0.1 signed by it; returns (ca.pem, cert.pem, key.pem)."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=Whereabot test CA", "-keyout", "ca.key", "-out", "ca.pem")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
            "-keyout", "key.pem", "-out", "cert.csr")
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "cert.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", "ext.cnf", "-out", "cert.pem")
    return directory / "ca.pem", directory / "cert.pem", directory / "key.pem"


class DocumentServer:
    """Serves `documents` (path → (status, headers, body bytes)) over https; `hits` counts GETs."""

    def __init__(self, directory):
        self.ca, cert, key = make_ca_and_certificate(directory)
        self.port = relay_server.free_port()
        self.base = f"https://127.0.0.1:{self.port}"
        self.documents, self.hits = {}, {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                status, headers, body = server.documents.get(self.path, (404, {}, b"not found"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def serve_client(self, path, name, redirect_uris, **extra):
        """A well-formed document at `path` whose client_id is its own URL; returns the URL."""
        url = self.base + path
        document = {"client_id": url, "client_name": name, "redirect_uris": redirect_uris,
                    "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
                    "token_endpoint_auth_method": "none", **extra}
        self.documents[path] = (200, {"Content-Type": "application/json", "Cache-Control": "max-age=600"},
                                json.dumps(document).encode())
        return url

    def stop(self):
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    """A document server for the module's tests."""
    server = DocumentServer(tmp_path_factory.mktemp("cimd"))
    yield server
    server.stop()
