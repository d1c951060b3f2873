#!/usr/bin/env python3
"""Sends many spans through the real OpenTelemetry Python SDK as fast as it can.

Usage: sdk_flood.py --endpoint URL --spans N --run-id ID

BatchSpanProcessor + OTLPSpanExporter (OTLP/HTTP protobuf), with a generous
export timeout so the exporter's own retries (on 429/503, honouring
Retry-After) ride out a slow spanhouse. A recording wrapper notes which spans
the exporter reported as exported. Prints JSON {"exported": [span ids hex],
"failed": n} and exits 0.
"""

from __future__ import annotations

import argparse
import json
import threading

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult


class Recording(SpanExporter):
    def __init__(self, inner: SpanExporter):
        self.inner = inner
        self.lock = threading.Lock()
        self.exported: list[str] = []
        self.failed = 0

    def export(self, spans):
        result = self.inner.export(spans)
        with self.lock:
            if result == SpanExportResult.SUCCESS:
                self.exported.extend(format(s.context.span_id, "016x") for s in spans)
            else:
                self.failed += len(spans)
        return result

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--spans", type=int, default=20000)
    ap.add_argument("--run-id", required=True)
    args = ap.parse_args()

    exporter = Recording(OTLPSpanExporter(endpoint=args.endpoint, timeout=60))
    provider = TracerProvider(resource=Resource.create(
        {"service.name": "flood", "flood.run_id": args.run_id}))
    provider.add_span_processor(BatchSpanProcessor(
        # Room for every span, the roots (one per 10) included: a full queue drops spans
        # silently, and while spanhouse answers 429 the SDK's exports wait.
        exporter, max_queue_size=args.spans + args.spans // 10 + 1, max_export_batch_size=512,
        schedule_delay_millis=20))
    tracer = provider.get_tracer("sdk_flood")
    padding = "x" * 200  # make each span a few hundred bytes
    for i in range(args.spans):
        if i % 10 == 0:
            root = tracer.start_span("GET /flood")
            root.end()
        with tracer.start_as_current_span(f"op-{i % 50}") as span:
            span.set_attribute("i", i)
            span.set_attribute("padding", padding)
            span.set_attribute("user.id", f"user-{i % 997}")
    provider.force_flush(timeout_millis=240000)
    provider.shutdown()
    print(json.dumps({"exported": exporter.exported, "failed": exporter.failed}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
