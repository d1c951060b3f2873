"""/healthz and /readyz of a real spanhouse: alive while the process runs,
ready only while it takes spans (503 while starting and once shutdown has
begun, while the queued spans are still being written)."""

from __future__ import annotations

import os
import signal
import time

import requests

from conftest import describe_response, otlp_json_request, otlp_json_span

DEADLINE_S = 30.0


def get(sh, path: str) -> requests.Response:
    return requests.get(f"{sh.query_url}{path}", timeout=10)


def test_ready_while_serving_then_not_ready_while_draining(spanhouse_factory, tmp_path):
    cfg = tmp_path / "faults.yaml"
    cfg.write_text("debug:\n  fault_injection: true\n")
    sh = spanhouse_factory(config=cfg)

    deadline = time.monotonic() + DEADLINE_S
    while True:  # /healthz answers from the moment the query listener is up
        r = get(sh, "/readyz")
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        assert r.status_code == 503 and r.text.startswith("not ready: starting"), \
            describe_response(r)
        time.sleep(0.05)
    assert r.status_code == 200 and r.text == "ready\n", describe_response(r)

    # Slow inserts, so that the spans below are still being written after SIGTERM.
    r = requests.post(f"{sh.query_url}/debug/sink?insert_delay_ms=3000", timeout=10)
    assert r.status_code == 200, describe_response(r)
    trace_id = os.urandom(16).hex()
    resp = sh.post_traces(otlp_json_request([otlp_json_span(trace_id, os.urandom(8).hex())]))
    assert resp.status_code == 200, describe_response(resp)

    sh.proc.send_signal(signal.SIGTERM)
    seen = None
    while sh.running() and seen is None:
        try:
            r = get(sh, "/readyz")
        except requests.RequestException:
            break
        if r.status_code == 503:
            seen = r
        time.sleep(0.02)
    assert seen is not None, f"/readyz never answered 503 during shutdown\n{sh.diagnostics()}"
    assert seen.text.startswith("not ready: shutting down"), describe_response(seen)
    # Still alive meanwhile (or already gone, if the drain just ended).
    try:
        alive = get(sh, "/healthz")
        assert alive.status_code == 200 and alive.text == "ok\n", describe_response(alive)
    except requests.RequestException:
        pass
    assert sh.stop() == 0, sh.diagnostics()
