"""An OTLP/HTTP fan-out proxy on loopback: each request goes, as it came, to several stores, so
they get the very same spans (loadgen and the SDKs draw fresh ids each run, so two senders could
not give two stores the same traces). Used by the conformance suite (tests/conformance) and the
benchmarks that compare spanhouse with Jaeger (bench/lookup_vs_jaeger.py)."""

from __future__ import annotations

import concurrent.futures
import http.client
import http.server
import threading
import time
import urllib.parse


class Fanout:
    """OTLP/HTTP proxy on loopback: each request body goes, as it came, to every target.
    It answers 200 once every target took it, 500 (which loadgen does not retry: a retry
    would send the stores that took it the spans twice) when one refused it after retries."""

    def __init__(self, targets: list[str]):
        self.targets = [urllib.parse.urlsplit(t) for t in targets]
        self.failed = {t: 0 for t in targets}
        self.requests = 0
        self.lock = threading.Lock()
        # Each pool thread keeps its own keep-alive connection to each store.
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=32)
        self.local = threading.local()
        fan = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as loadgen expects

            def log_message(self, *a):  # one line per request would drown the report
                pass

            def read_body(self) -> bytes:
                if "chunked" not in self.headers.get("Transfer-Encoding", "").lower():
                    return self.rfile.read(int(self.headers.get("Content-Length", 0)))
                # Chunked (the Node.js SDK's exporter sends so): size line, data, CRLF; a
                # chunk of size 0 and the trailers end it.
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline().strip():
                            pass
                        return bytes(body)
                    body += self.rfile.read(size)
                    self.rfile.readline()

            def do_POST(self):
                body = self.read_body()
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "content-encoding")}
                # The stores take it at once (one after the other, the slowest answer of
                # each would add up and hold back the rate loadgen asks for).
                ok = all(f.result() for f in [fan.pool.submit(fan.post, t, body, headers)
                                              for t in fan.targets])
                with fan.lock:
                    fan.requests += 1
                self.send_response(200 if ok else 500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def post(self, t: urllib.parse.SplitResult, body: bytes, headers: dict) -> bool:
        conns = getattr(self.local, "conns", None)
        if conns is None:
            conns = self.local.conns = {}
        for attempt in range(6):
            try:
                c = conns.get(t.netloc)
                if c is None:
                    c = conns[t.netloc] = http.client.HTTPConnection(t.netloc, timeout=30)
                c.request("POST", t.path, body=body, headers=headers)
                r = c.getresponse()
                r.read()
                if 200 <= r.status < 300:
                    return True
                if r.status not in (429, 503):
                    break
                time.sleep(min(5.0, float(r.getheader("Retry-After") or 0.5)))
            except (OSError, http.client.HTTPException):
                # A dropped keep-alive connection: a new one at the next try.
                conns.pop(t.netloc, None)
                time.sleep(0.2 * (attempt + 1))
        with self.lock:
            self.failed[t.geturl()] += 1
        return False

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)
