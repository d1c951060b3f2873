#!/usr/bin/env python3
"""Traces for the web UI's browser test, sent with the real OpenTelemetry Python SDK.

send(endpoint) sends:
- CHECKOUT: one 12-span trace over four services (frontend, checkout, inventory,
  payment) with explicit start and end times, two spans with status ERROR (one
  with an exception event), attributes of several types, and a known critical
  path: every span but "cache lookup" is on it (it ran beside "GET stock" and
  ended after "GET stock" started, so nothing waited for it);
- PRODUCTS: a few two-span traces (frontend -> catalog), one of them an error,
  so lists and charts have more than one row.
It returns a description of what was sent (ids, parents, services, names,
times in ns) for the test to compare with what the browser shows.

Run alone to fill a spanhouse for a look at the UI:
  .venv/bin/python tests/e2e/ui_traces.py --endpoint http://127.0.0.1:4318/v1/traces
"""

from __future__ import annotations

import argparse
import json
import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

MS = 1_000_000  # ns

# (key, service, name, kind, parent key, start ms, end ms, error)
CHECKOUT = [
    ("F1", "frontend", "GET /checkout", SpanKind.SERVER, None, 0, 120, False),
    ("F2", "frontend", "POST checkout", SpanKind.CLIENT, "F1", 5, 112, False),
    ("C1", "checkout", "POST /checkout", SpanKind.SERVER, "F2", 8, 110, False),
    ("C2", "checkout", "cache lookup", SpanKind.INTERNAL, "C1", 10, 18, False),
    ("C3", "checkout", "GET stock", SpanKind.CLIENT, "C1", 12, 40, False),
    ("I1", "inventory", "GET /stock", SpanKind.SERVER, "C3", 14, 38, False),
    ("I2", "inventory", "SELECT stock", SpanKind.CLIENT, "I1", 16, 34, False),
    ("C4", "checkout", "charge", SpanKind.CLIENT, "C1", 44, 104, False),
    ("P1", "payment", "POST /charge", SpanKind.SERVER, "C4", 46, 102, True),
    ("P2", "payment", "fraud check", SpanKind.INTERNAL, "P1", 48, 58, False),
    ("P3", "payment", "card network", SpanKind.CLIENT, "P1", 60, 100, True),
    ("F3", "frontend", "render", SpanKind.INTERNAL, "F1", 113, 119, False),
]
OFF_CRITICAL_PATH = {"C2"}


def _providers(endpoint: str, services) -> dict:
    out = {}
    for svc in services:
        p = TracerProvider(resource=Resource.create({
            "service.name": svc, "service.version": "1.4.2", "deployment.environment": "ui-test"}))
        p.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=10)))
        out[svc] = p
    return out


def _emit(providers, plan, base_ns: int, jitter_us: int = 37) -> dict:
    """Sends one trace as planned; ends get i * jitter_us µs more (odd durations)."""
    spans = {}
    sent = []
    for i, (key, svc, name, kind, parent, s_ms, e_ms, error) in enumerate(plan):
        tracer = providers[svc].get_tracer("ui-test", "1.0")
        ctx = trace.set_span_in_context(spans[parent]) if parent else None
        start = base_ns + s_ms * MS
        end = base_ns + e_ms * MS + i * jitter_us * 1000
        attrs = {"ui.test.key": key, "ui.test.index": i, "ui.test.ratio": i / 4, "ui.test.flag": i % 2 == 0}
        if svc == "inventory" and kind == SpanKind.CLIENT:
            attrs.update({"db.system": "postgresql", "db.statement": "SELECT qty FROM stock WHERE sku = $1"})
        if kind == SpanKind.SERVER:
            attrs.update({"http.request.method": name.split()[0], "http.response.status_code": 500 if error else 200})
        span = tracer.start_span(name, context=ctx, kind=kind, start_time=start, attributes=attrs)
        if error:
            if key == "P3":
                span.add_event("exception", {"exception.type": "CardDeclined",
                                             "exception.message": "card declined <script>alert(1)</script>"},
                               timestamp=end - 2 * MS)
            span.set_status(Status(StatusCode.ERROR, "card declined"))
        else:
            span.add_event("checkpoint", {"step": key}, timestamp=start + 1000)
        spans[key] = span
        sent.append({"key": key, "service": svc, "name": name, "parent_key": parent or "",
                     "start_ns": start, "end_ns": end, "error": error})
    for key in reversed([p[0] for p in plan]):  # children end first, as in real code
        spans[key].end(end_time=next(s["end_ns"] for s in sent if s["key"] == key))
    by_key = {}
    for s in sent:
        ctx = spans[s["key"]].get_span_context()
        s["span_id"] = format(ctx.span_id, "016x")
        s["trace_id"] = format(ctx.trace_id, "032x")
        by_key[s["key"]] = s
    for s in sent:
        s["parent_span_id"] = by_key[s["parent_key"]]["span_id"] if s["parent_key"] else ""
    return {"trace_id": sent[0]["trace_id"], "spans": sent}


def send(endpoint: str) -> dict:
    services = ["frontend", "checkout", "inventory", "payment", "catalog"]
    providers = _providers(endpoint, services)
    now = time.time_ns()
    try:
        # 90 s back: their minute has ended, so the per-minute metrics (whole
        # minutes only) show them at once; with the dependency job's lag at 120 s
        # (test_ui.py) that minute is not computed yet, and is 30-90 s later.
        checkout = _emit(providers, CHECKOUT, now - 90_000 * MS)
        products = []
        for i in range(5):
            plan = [("R", "frontend", "GET /products", SpanKind.SERVER, None, 0, 20 + 15 * i, i == 3),
                    ("Q", "catalog", "list products", SpanKind.INTERNAL, "R", 2, 18 + 15 * i, False)]
            products.append(_emit(providers, plan, now - (90_000 - 130 - 20 * i) * MS, jitter_us=11))
    finally:
        for p in providers.values():
            p.shutdown()
    return {"checkout": checkout, "products": products,
            "off_critical_path": sorted(OFF_CRITICAL_PATH)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--endpoint", default="http://127.0.0.1:4318/v1/traces")
    print(json.dumps(send(ap.parse_args().endpoint), indent=1))


if __name__ == "__main__":
    main()
