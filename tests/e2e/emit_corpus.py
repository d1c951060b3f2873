#!/usr/bin/env python3
"""Emits a small search corpus to spanhouse with the real OpenTelemetry Python SDK.

Usage: emit_corpus.py --endpoint http://127.0.0.1:PORT/v1/traces [--traces N]

N traces (16 by default), one every 15 s ending about a minute ago, over two
services: shop-web's SERVER span ("GET /product" or "POST /cart"), its CLIENT
call to shop-api, shop-api's SERVER span ("api.lookup" or "api.write") and an
INTERNAL "db query" under it. Attributes the searches use: http.request.method
(GET/POST), app.channel (android every third trace, else ios: a user field),
app.tenant, db.system; every fifth trace fails (shop-api's server span has
status ERROR and an exception event). Durations differ per trace. Start and
end times are explicit.

Prints the same JSON description as emit_trace.py ({"spans": [...]} with
trace_id, span_id, parent_span_id, name, kind, service, resource, attributes,
status, start_ns, end_ns, ...) and exits 0, or 1 if an export failed.
"""

from __future__ import annotations

import argparse
import sys
import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from emit_trace import RecordingExporter, finish

MS = 1_000_000


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--traces", type=int, default=16)
    args = ap.parse_args()

    providers = {}
    exporters = []
    for service, extra in (("shop-web", {"deployment.environment.name": "e2e"}),
                           ("shop-api", {"k8s.pod.name": "api-0", "service.version": "1.0"})):
        exporter = RecordingExporter(OTLPSpanExporter(endpoint=args.endpoint, timeout=30))
        provider = TracerProvider(resource=Resource.create({"service.name": service, **extra}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers[service] = provider
        exporters.append(exporter)
    web = providers["shop-web"].get_tracer("shop.web", "1.0.0")
    api = providers["shop-api"].get_tracer("shop.api", "2.0.0")

    n = args.traces
    base = time.time_ns() - (n * 15 + 60) * 1_000_000_000
    for k in range(n):
        t0 = base + k * 15_000_000_000
        post = k % 2 == 1
        fails = k % 5 == 0
        channel = "android" if k % 3 == 0 else "ios"
        total = (20 + 7 * k) * MS
        root = web.start_span("POST /cart" if post else "GET /product", kind=SpanKind.SERVER,
                              start_time=t0,
                              attributes={"http.request.method": "POST" if post else "GET",
                                          "app.channel": channel, "app.trace_no": k})
        root_ctx = trace.set_span_in_context(root)
        call = web.start_span("call shop-api", context=root_ctx, kind=SpanKind.CLIENT,
                              start_time=t0 + 2 * MS, attributes={"peer.service": "shop-api"})
        server = api.start_span("api.write" if post else "api.lookup",
                                context=trace.set_span_in_context(call), kind=SpanKind.SERVER,
                                start_time=t0 + 3 * MS,
                                attributes={"app.tenant": f"t-{k % 4}", "app.channel": channel})
        db = api.start_span("db query", context=trace.set_span_in_context(server),
                            kind=SpanKind.INTERNAL, start_time=t0 + 4 * MS,
                            attributes={"db.system": "postgresql"})
        db.end(end_time=t0 + 4 * MS + (k + 1) * MS)
        if fails:
            server.record_exception(RuntimeError(f"tenant t-{k % 4} over quota"),
                                    timestamp=t0 + total - 6 * MS)
            server.set_status(Status(StatusCode.ERROR, "over quota"))
        server.end(end_time=t0 + total - 5 * MS)
        call.end(end_time=t0 + total - 4 * MS)
        root.end(end_time=t0 + total)

    return finish(list(providers.values()), exporters, {})

if __name__ == "__main__":
    sys.exit(main())
