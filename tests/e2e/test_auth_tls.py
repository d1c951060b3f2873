"""Bearer tokens and TLS on both listeners, against a real spanhouse.

One spanhouse serves HTTPS on both listeners (a certificate made for this run
with the `openssl` command line) and wants a token on each: ingest and query
answer 401 to a missing, malformed or wrong token (the other listener's
included) and 200 to the right one; the real OpenTelemetry Python SDK sends a
trace with its token (OTEL_EXPORTER_OTLP_HEADERS) over TLS
(OTEL_EXPORTER_OTLP_CERTIFICATE), and the trace is read back over HTTPS;
plain HTTP sent to the TLS port closes that connection and nothing else.
Also: tokens from environment variables, and a bad certificate path stopping
start-up with a message.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
import requests

from test_receivers import export_request, zipkin_spans
from conftest import (E2E_DIR, SpanhouseFactory, clean_env, describe_response, free_ports,
                      otlp_json_request, otlp_json_span, spanhouse_bin, trace_span_ids)

INGEST_TOKEN = "ingest-Tok3n_for.e2e"
QUERY_TOKEN = "query~tok3n/e2e+x="
OTHER_INGEST_TOKEN = "second-ingest-token"


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def make_cert(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by the openssl CLI."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    cmd = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
           "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
           "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"openssl failed: {r.stderr}"
    return cert, key


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tls")
    make_cert(d)
    return d


@pytest.fixture(scope="module")
def secured(tmp_path_factory, tls_dir, request):
    """spanhouse with HTTPS and tokens on both listeners (set in its YAML file)."""
    work = tmp_path_factory.mktemp("auth_tls")
    cert, key = tls_dir / "cert.pem", tls_dir / "key.pem"
    cfg = work / "spanhouse.yaml"
    cfg.write_text(
        f"otlp_http:\n  tls_cert: {cert}\n  tls_key: {key}\n"
        f"query:\n  tls_cert: {cert}\n  tls_key: {key}\n"
        f"auth:\n  ingest_tokens: \"{INGEST_TOKEN},{OTHER_INGEST_TOKEN}\"\n"
        f"  query_tokens: \"{QUERY_TOKEN}\"\n"
        "writer:\n  max_age_ms: 200\n")
    factory = SpanhouseFactory(work)
    request.module._spanhouse_factories = [factory]
    sh = factory(config=cfg, ca_cert=cert)
    yield sh
    factory.teardown()


def metric(text: str, name_and_labels: str) -> int:
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return int(float(line.split()[-1]))
    raise AssertionError(f"no {name_and_labels} in /metrics:\n{text}")


def scrape(sh) -> str:
    r = sh.session.get(sh.query_url + "/metrics", headers=bearer(QUERY_TOKEN), timeout=30)
    assert r.status_code == 200, describe_response(r)
    return r.text


def assert_401(resp: requests.Response, what: str) -> None:
    info = describe_response(resp)
    assert resp.status_code == 401, f"{what}: want 401, got: {info}"
    assert resp.headers.get("WWW-Authenticate", "").startswith("Bearer"), f"{what}: {info}"
    assert "unauthorized" in resp.text, f"{what}: want a message: {info}"


# (id, headers): every way of not presenting the listener's token.
BAD_CREDENTIALS = [
    ("missing", {}),
    ("wrong", bearer("not-the-token")),
    ("malformed", {"Authorization": f"Basic {INGEST_TOKEN}"}),
    ("empty header", {"Authorization": ""}),  # malformed too: present, but no credential
]


def test_ingest_needs_its_token(secured):
    sh = secured
    before = scrape(sh)
    trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
    body = otlp_json_request([otlp_json_span(trace_id, span_id, "authorized")])
    json_type = {"Content-Type": "application/json"}
    for what, headers in BAD_CREDENTIALS + [("query token", bearer(QUERY_TOKEN))]:
        r = sh.session.post(sh.traces_url, data=body, headers={**json_type, **headers}, timeout=30)
        assert_401(r, f"ingest, {what}")
        # The body is not read: the connection closes after the answer.
        assert r.headers.get("Connection") == "close", describe_response(r)

    for token in (INGEST_TOKEN, OTHER_INGEST_TOKEN):
        # A span of its own per token: the same span twice would be a retry, kept once.
        own = otlp_json_request([otlp_json_span(trace_id, os.urandom(8).hex(), "authorized")])
        r = sh.session.post(sh.traces_url, data=own, headers={**json_type, **bearer(token)},
                            timeout=30)
        assert r.status_code == 200, describe_response(r)

    after = scrape(sh)
    for reason, n in (("missing", 1), ("wrong", 2), ("malformed", 2)):
        label = f'spanhouse_auth_failures_total{{listener="otlp_http",reason="{reason}"}}'
        assert metric(after, label) - metric(before, label) == n, f"{label}\n{after}"
    accepted = 'spanhouse_receiver_accepted_spans_total{receiver="otlp_http"}'
    assert metric(after, accepted) - metric(before, accepted) == 2, after


def test_query_needs_its_token(secured):
    sh = secured
    trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
    r = sh.session.post(sh.traces_url, headers={"Content-Type": "application/json",
                                                **bearer(INGEST_TOKEN)},
                        data=otlp_json_request([otlp_json_span(trace_id, span_id, "q")]),
                        timeout=30)
    assert r.status_code == 200, describe_response(r)

    before = scrape(sh)
    for path in (f"/api/traces/{trace_id}", "/api/spans/count?resource_attr=service.name&value=x",
                 "/metrics"):
        for what, headers in BAD_CREDENTIALS + [("ingest token", bearer(INGEST_TOKEN))]:
            r = sh.session.get(sh.query_url + path, headers=headers, timeout=30)
            assert_401(r, f"query {path}, {what}")
            # One try per connection, with or without a body.
            assert r.headers.get("Connection") == "close", describe_response(r)
    after = scrape(sh)
    label = 'spanhouse_auth_failures_total{listener="query",reason="wrong"}'
    assert metric(after, label) - metric(before, label) == 6, after

    # Probes stay open.
    r = sh.session.get(sh.healthz_url, timeout=30)
    assert r.status_code == 200 and r.text.strip() == "ok", describe_response(r)
    r = sh.session.get(sh.query_url + "/readyz", timeout=30)
    assert r.status_code != 401, describe_response(r)

    # With the token: the trace, polled until stored.
    deadline = time.monotonic() + 30
    while True:
        r = sh.session.get(sh.trace_url(trace_id), headers=bearer(QUERY_TOKEN), timeout=30)
        if r.status_code == 200 and trace_span_ids(r.json()) == [span_id]:
            break
        assert r.status_code in (200, 404), describe_response(r)
        assert time.monotonic() < deadline, f"trace not stored: {describe_response(r)}"
        time.sleep(0.1)


def run_sdk_emitter(endpoint: str, env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(E2E_DIR / "emit_trace.py"), "--endpoint", endpoint]
    child_env = clean_env(env)
    # The SDK's exporter puts the certificate on a requests Session, where a
    # CA bundle named by these variables would override it (a requests quirk).
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        child_env.pop(name, None)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=child_env)


def test_sdk_sends_with_token_over_tls_and_reads_back_over_https(secured, tls_dir):
    sh = secured
    assert sh.traces_url.startswith("https://")
    env = {"OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{INGEST_TOKEN}",
           "OTEL_EXPORTER_OTLP_CERTIFICATE": str(tls_dir / "cert.pem")}
    proc = run_sdk_emitter(sh.traces_url, env)
    assert proc.returncode == 0, \
        f"emit_trace.py exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    sent = json.loads(proc.stdout)
    want = sorted(s["span_id"] for s in sent["spans"])
    assert len(want) == 6

    deadline = time.monotonic() + 30
    while True:
        r = sh.session.get(sh.trace_url(sent["trace_id"]), headers=bearer(QUERY_TOKEN), timeout=30)
        got = sorted(trace_span_ids(r.json())) if r.status_code == 200 else []
        if got == want:
            break
        assert r.status_code in (200, 404), describe_response(r)
        assert time.monotonic() < deadline, \
            f"stored spans {got}, want {want}; last: {describe_response(r)}\n{sh.diagnostics()}"
        time.sleep(0.1)


def test_sdk_with_a_wrong_token_is_refused(secured, tls_dir):
    sh = secured
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20wrong-token",
           "OTEL_EXPORTER_OTLP_CERTIFICATE": str(tls_dir / "cert.pem")}
    proc = run_sdk_emitter(sh.traces_url, env)
    assert proc.returncode == 1, f"want failed exports\n{proc.stdout}\n{proc.stderr}"
    assert "401" in proc.stderr or "Unauthorized" in proc.stderr, proc.stderr


def test_plain_http_on_the_tls_port_closes_only_that_connection(secured):
    sh = secured
    before = metric(scrape(sh), 'spanhouse_tls_handshake_failures_total{listener="otlp_http"}')
    for port in (sh.otlp_port, sh.query_port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = b""
            try:
                while chunk := s.recv(4096):
                    got += chunk
            except ConnectionResetError:
                pass
        assert b"HTTP/1.1" not in got, got

    # And an HTTP client that speaks plain HTTP gets no answer, only a closed connection.
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{sh.query_port}/healthz", timeout=10)

    assert sh.running(), sh.diagnostics()
    r = sh.session.get(sh.healthz_url, timeout=30)
    assert r.status_code == 200, describe_response(r)
    after = scrape(sh)
    assert metric(after, 'spanhouse_tls_handshake_failures_total{listener="otlp_http"}') == \
        before + 1, after
    assert metric(after, 'spanhouse_tls_handshake_failures_total{listener="query"}') >= 2, after
    r = sh.session.post(sh.traces_url, timeout=30, data=otlp_json_request(
        [otlp_json_span(os.urandom(16).hex(), os.urandom(8).hex())]),
        headers={"Content-Type": "application/json", **bearer(INGEST_TOKEN)})
    assert r.status_code == 200, describe_response(r)


def run_serve(args: list, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([spanhouse_bin(), "serve"] + args, capture_output=True, text=True,
                          timeout=120, env=clean_env(env), cwd=str(cwd))


def test_tokens_from_environment_variables(tmp_path):
    env = {"SPANHOUSE_AUTH_INGEST_TOKENS": "env-ingest-token-1,env-ingest-token-2",
           "SPANHOUSE_AUTH_QUERY_TOKENS": "env-query-token-1"}
    r = run_serve(["--data-dir", str(tmp_path / "data"), "--print-config"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    # Applied, and shown only as set: --print-config never prints a secret.
    assert "<redacted, 2 tokens>" in r.stdout, r.stdout
    assert "<redacted, 1 token>" in r.stdout, r.stdout
    assert "env-ingest-token" not in r.stdout and "env-query-token" not in r.stdout, r.stdout

    r = run_serve(["--data-dir", str(tmp_path / "data"), "--print-config"],
                  {"SPANHOUSE_AUTH_QUERY_TOKENS": "a,,b"}, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "auth.query_tokens" in r.stderr, r.stderr


def test_bad_certificate_paths_stop_start_up(tmp_path, tls_dir):
    otlp_port, query_port, grpc_port, zipkin_port = free_ports(4)
    base = ["--data-dir", str(tmp_path / "data"), "--otlp-http-listen", f"127.0.0.1:{otlp_port}",
            "--query-listen", f"127.0.0.1:{query_port}", "--otlp-grpc-listen",
            f"127.0.0.1:{grpc_port}", "--zipkin-listen", f"127.0.0.1:{zipkin_port}"]
    missing = tmp_path / "no-such-cert.pem"
    cfg = tmp_path / "missing.yaml"
    cfg.write_text(f"query:\n  tls_cert: {missing}\n  tls_key: {tls_dir / 'key.pem'}\n")
    r = run_serve(base + ["--config", str(cfg)], {}, tmp_path)
    assert r.returncode != 0, r.stderr
    assert str(missing) in r.stderr, r.stderr

    cfg.write_text(f"otlp_http:\n  tls_cert: {tls_dir / 'cert.pem'}\n"
                   f"  tls_key: {tls_dir / 'cert.pem'}\n")  # a certificate is no key
    r = run_serve(base + ["--config", str(cfg)], {}, tmp_path)
    assert r.returncode != 0, r.stderr
    assert "TLS key" in r.stderr, r.stderr

    cfg.write_text(f"otlp_http:\n  tls_cert: {tls_dir / 'cert.pem'}\n")  # no key
    r = run_serve(base + ["--config", str(cfg)], {}, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "otlp_http.tls_key" in r.stderr, r.stderr


def test_grpc_and_zipkin_share_the_ingest_tls_and_tokens(secured, tls_dir):
    """OTLP/gRPC speaks TLS with the OTLP/HTTP certificate and wants the ingest token in
    `authorization`; Zipkin is HTTPS with the same guard."""
    trace_id = os.urandom(16).hex()
    body = export_request(trace_id, [("d000000000000001", "over-tls", time.time_ns())])
    creds = grpc.ssl_channel_credentials(root_certificates=(tls_dir / "cert.pem").read_bytes())
    with grpc.secure_channel(secured.grpc_target, creds) as channel:
        call = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as refused:
            call(body, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
        call(body, timeout=30, metadata=[("authorization", f"Bearer {INGEST_TOKEN}")])
    # Plaintext gRPC on the TLS port gets no answer.
    with grpc.insecure_channel(secured.grpc_target) as channel:
        call = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as plain:
            call(body, timeout=10, metadata=[("authorization", f"Bearer {INGEST_TOKEN}")])
        assert plain.value.code() == grpc.StatusCode.UNAVAILABLE, plain.value
    zipkin = json.dumps(zipkin_spans(os.urandom(16).hex(), time.time_ns() // 1000))
    r = secured.session.post(secured.zipkin_url, data=zipkin, timeout=30)
    assert_401(r, "zipkin without a token")
    r = secured.session.post(secured.zipkin_url, data=zipkin, timeout=30,
                             headers=bearer(INGEST_TOKEN))
    assert r.status_code == 202, describe_response(r)
    r = secured.session.get(secured.trace_url(trace_id), headers=bearer(QUERY_TOKEN), timeout=30)
    deadline = time.monotonic() + 30
    while r.status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.3)
        r = secured.session.get(secured.trace_url(trace_id), headers=bearer(QUERY_TOKEN),
                                timeout=30)
    assert r.status_code == 200, describe_response(r)
    assert [s["operationName"] for s in r.json()["data"][0]["spans"]] == ["over-tls"]
