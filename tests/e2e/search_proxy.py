"""A guard in front of a real search node, for the tests of spanhouse's authentication to it:
the OSS Elasticsearch 7.10.2 and the OpenSearch 2.19 node the tests run have no security
plugin, so this reverse proxy does what a secured cluster's front does and forwards what it
lets through, unchanged, to the node.

- tls: it speaks HTTPS with its own certificate (make_cert), and with `client_ca` set it asks
  for a client certificate and refuses a handshake without one that file vouches for;
- api_key: a request must carry `Authorization: ApiKey <api_key>`, else 401 with the error
  body a secured Elasticsearch answers (security_exception).

What it saw is counted: requests forwarded, refused for the key, handshakes that failed."""

from __future__ import annotations

import http.server
import ssl
import threading
from pathlib import Path
from typing import Optional

import requests

from conftest import free_ports

HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
               "content-encoding"}


class SearchProxy:
    def __init__(self, upstream: str, api_key: Optional[str] = None,
                 cert: Optional[tuple[Path, Path]] = None, client_ca: Optional[Path] = None):
        self.upstream = upstream.rstrip("/")
        self.api_key = api_key
        self.forwarded = 0
        self.refused = 0
        self.handshake_failures = 0
        self.keys_seen: list[str] = []
        self._lock = threading.Lock()
        self._session = requests.Session()
        self._session.trust_env = False
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                auth = self.headers.get("Authorization", "")
                if proxy.api_key is not None:
                    with proxy._lock:
                        proxy.keys_seen.append(auth)
                    if auth != f"ApiKey {proxy.api_key}":
                        with proxy._lock:
                            proxy.refused += 1
                        self._answer(401, (
                            b'{"error":{"type":"security_exception","reason":"unable to '
                            b'authenticate with provided credentials"},"status":401}'),
                            "application/json")
                        return
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in HOP_HEADERS and k.lower() != "authorization"}
                r = proxy._session.request(self.command, proxy.upstream + self.path, data=body,
                                           headers=headers, timeout=60)
                with proxy._lock:
                    proxy.forwarded += 1
                self._answer(r.status_code, r.content,
                             r.headers.get("Content-Type", "application/json"))

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                # A refused TLS handshake lands here; counted, not printed.
                with proxy._lock:
                    proxy.handshake_failures += 1

        (port,) = free_ports(1)
        self.server = Server(("127.0.0.1", port), Handler)
        self.scheme = "http"
        if cert is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
            if client_ca is not None:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(str(client_ca))
            # The handshake is done by the handler's thread (on first read), so one refused
            # client does not hold the accept loop.
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True,
                                                 do_handshake_on_connect=False)
            self.scheme = "https"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
