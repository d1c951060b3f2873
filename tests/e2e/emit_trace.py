#!/usr/bin/env python3
"""Emits one trace to spanhouse with the real OpenTelemetry Python SDK.

Usage: emit_trace.py --endpoint http://127.0.0.1:PORT/v1/traces [--age-s 60]
       emit_trace.py --protocol grpc --endpoint http://127.0.0.1:PORT

Two services (two TracerProviders with different Resources) produce six spans
of all five kinds, with attributes of every type the SDK allows, events, an
error and an OK status, links (to a span of this trace and to a span of another
trace), a W3C tracestate, and explicit start/end times. The spans go out through
OTLPSpanExporter (OTLP/HTTP protobuf, or with --protocol grpc OTLP/gRPC, plain
text; one service gzip-compressed) via a SimpleSpanProcessor. A recording wrapper keeps every span the exporter was
given and whether the export succeeded.

On success it prints to stdout a JSON description of exactly what was sent:
  {"trace_id", "spans": [{"span_id", "parent_span_id", "trace_id", "name",
   "kind", "service", "resource", "scope": {"name", "version"}, "attributes",
   "events": [{"name", "timestamp_ns", "attributes"}],
   "links": [{"trace_id", "span_id", "attributes"}],
   "status": {"code", "description"}, "trace_state", "start_ns", "end_ns"}]}
and exits 0; if any export failed it exits 1 (after printing the description).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

ROOT_TRACE_STATE = TraceState([("spanhouse", "e2e"), ("rojo", "00f067aa0ba902b7")])


class TraceStateSampler(Sampler):
    """Samples everything; a root span gets ROOT_TRACE_STATE, a child its parent's."""

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None,
                      links=None, trace_state=None) -> SamplingResult:
        parent = trace.get_current_span(parent_context).get_span_context()
        state = parent.trace_state if parent.is_valid else ROOT_TRACE_STATE
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, state)

    def get_description(self) -> str:
        return "TraceStateSampler"


class RecordingExporter(SpanExporter):
    def __init__(self, inner: SpanExporter):
        self.inner = inner
        self.spans: list[ReadableSpan] = []
        self.failures: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        self.spans.extend(spans)
        if result != SpanExportResult.SUCCESS:
            self.failures.append(f"export of {[s.name for s in spans]} -> {result}")
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def plain(value):
    """An attribute value as plain JSON (tuples become lists)."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def attrs(mapping) -> dict:
    return {k: plain(v) for k, v in (mapping or {}).items()}


def describe(span: ReadableSpan) -> dict:
    ctx = span.get_span_context()
    return {
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_span_id": format(span.parent.span_id, "016x") if span.parent else "",
        "name": span.name,
        "kind": span.kind.name.lower(),
        "service": span.resource.attributes["service.name"],
        "resource": attrs(span.resource.attributes),
        "scope": {"name": span.instrumentation_scope.name,
                  "version": span.instrumentation_scope.version or ""},
        "attributes": attrs(span.attributes),
        "events": [{"name": e.name, "timestamp_ns": e.timestamp, "attributes": attrs(e.attributes)}
                   for e in span.events],
        "links": [{"trace_id": format(l.context.trace_id, "032x"),
                   "span_id": format(l.context.span_id, "016x"),
                   "attributes": attrs(l.attributes)} for l in span.links],
        "status": {"code": span.status.status_code.name,
                   "description": span.status.description or ""},
        "trace_state": ctx.trace_state.to_header(),
        "start_ns": span.start_time,
        "end_ns": span.end_time,
    }


def exporter(protocol: str, endpoint: str, gzip: bool) -> SpanExporter:
    """The SDK's OTLP exporter for `protocol`, gzip-compressed or not."""
    if protocol == "grpc":
        import grpc
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import \
            OTLPSpanExporter as GrpcExporter
        # It retries UNAVAILABLE until its timeout, for each of the six spans.
        return GrpcExporter(endpoint=endpoint, insecure=True, timeout=10,
                            compression=grpc.Compression.Gzip if gzip else None)
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter(endpoint=endpoint, timeout=30,
                            compression=Compression.Gzip if gzip else None)


def finish(providers: list, exporters: list, extra: dict) -> int:
    """Flushes and shuts the providers down, prints the description of every span the
    exporters were given (with `extra`'s members) and returns the exit code: 1 if an
    export failed."""
    for provider in providers:
        provider.force_flush()
    for provider in providers:
        provider.shutdown()
    spans = [describe(s) for e in exporters for s in e.spans]
    failures = [f for e in exporters for f in e.failures]
    json.dump({**extra, "spans": spans, "failures": failures}, sys.stdout, indent=1,
              sort_keys=True)
    sys.stdout.write("\n")
    if failures:
        print("export failures: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--protocol", choices=["http", "grpc"], default="http")
    ap.add_argument("--age-s", type=float, default=60.0,
                    help="how long before now the trace starts (default 60)")
    args = ap.parse_args()

    frontend_resource = Resource.create({
        "service.name": "frontend",
        "service.version": "2.3.1",
        "deployment.environment.name": "e2e",
        "host.cpu.count": 8,
        "process.offset": -9_000_000_000,
        "sample.ratio": 0.75,
        "feature.checkout_v2": True,
        "service.tags": ["web", "edge"],
    })
    payment_resource = Resource.create({
        "service.name": "payment",
        "service.namespace": "shop",
        "k8s.pod.restarts": 0,
        "region.latency_ms": 12.5,
        "canary": False,
        "zones": ["eu-1a", "eu-1b", "eu-1c"],
        "ports": [8080, 9090],
    })
    frontend_exp = RecordingExporter(exporter(args.protocol, args.endpoint, gzip=True))
    payment_exp = RecordingExporter(exporter(args.protocol, args.endpoint, gzip=False))
    sampler = TraceStateSampler()
    frontend = TracerProvider(resource=frontend_resource, sampler=sampler)
    frontend.add_span_processor(SimpleSpanProcessor(frontend_exp))
    payment = TracerProvider(resource=payment_resource, sampler=sampler)
    payment.add_span_processor(SimpleSpanProcessor(payment_exp))

    web = frontend.get_tracer("shop.frontend.instrumentation", "1.4.0")
    consumer_tracer = frontend.get_tracer("shop.consumer")  # no version
    pay = payment.get_tracer("payment.lib", "0.9.0")

    # Whole microseconds plus a sub-microsecond part: +100 ns on starts,
    # +900 ns on ends, so µs truncation is visible and unambiguous.
    base = (time.time_ns() // 1000) * 1000 - int(args.age_s * 1e9) // 1000 * 1000

    def at(ms: float, frac_ns: int) -> int:
        return base + int(ms * 1_000_000) + frac_ns

    def start(ms: float) -> int:
        return at(ms, 100)

    def end(ms: float) -> int:
        return at(ms, 900)

    root = web.start_span(
        "GET /checkout", kind=SpanKind.SERVER, start_time=start(0),
        attributes={
            "http.request.method": "GET",
            "url.path": "/checkout",
            "empty.string": "",
            "unicode.string": "héllo wörld ✓ \"quoted\" \\ back\nslash",
            "bool.true": True,
            "bool.false": False,
            "int.small": 42,
            "int.zero": 0,
            "int.negative": -17,
            "int.large": 9_007_199_254_740_993,  # 2**53 + 1: not exact as a double
            "int.max": 2**63 - 1,
            "int.min": -(2**63),
            "float.pi": 3.141592653589793,
            "float.negative": -0.5,
            "float.tiny": 1e-300,
            "float.huge": -2.5e+20,
            "float.inexact": 0.1 + 0.2,
            "float.whole": 3.0,
            "seq.str": ["a", "b", "c, d", "\"q\""],
            "seq.bool": [True, False, True],
            "seq.int": [1, -2, 2**40, -(2**63)],
            "seq.float": [1.5, -2.25, 3.0, 0.1],
            "seq.empty": [],
        })
    root_ctx = trace.set_span_in_context(root)

    validate = web.start_span("validate cart", context=root_ctx, kind=SpanKind.INTERNAL,
                              start_time=start(1), attributes={"cart.items": 3})
    validate.add_event("cart.validated", timestamp=at(2, 500), attributes={
        "cart.id": "c-77", "items": 3, "total": 99.95, "coupon": False,
        "skus": ["sku-1", "sku-2"]})
    validate.add_event("no.attributes", timestamp=at(2.5, 0))
    validate.end(end_time=end(3))

    client = web.start_span("POST /payment", context=root_ctx, kind=SpanKind.CLIENT,
                            start_time=start(5),
                            attributes={"http.request.method": "POST", "server.port": 8080,
                                        "peer.service": "payment"})
    client_ctx = trace.set_span_in_context(client)

    pay_server = pay.start_span("POST /payment", context=client_ctx, kind=SpanKind.SERVER,
                                start_time=start(6),
                                attributes={"http.response.status_code": 402,
                                            "payment.amount": 99.95,
                                            "payment.retried": True})
    pay_ctx = trace.set_span_in_context(pay_server)
    producer = pay.start_span("publish payment.failed", context=pay_ctx, kind=SpanKind.PRODUCER,
                              start_time=start(20),
                              attributes={"messaging.system": "kafka",
                                          "messaging.destination.name": "payment.failed",
                                          "messaging.batch.message_count": 1})
    producer.end(end_time=end(21))
    pay_server.record_exception(ValueError("card declined by issuer"), timestamp=at(28, 250),
                                attributes={"payment.attempt": 2})
    pay_server.set_status(Status(StatusCode.ERROR, "card declined"))
    pay_server.end(end_time=end(29))
    client.end(end_time=end(30))

    other_trace_ctx = SpanContext(trace_id=0x0AF7651916CD43DD8448EB211C80319C,
                                  span_id=0xB7AD6B7169203331, is_remote=True,
                                  trace_flags=TraceFlags(TraceFlags.SAMPLED))
    consume = consumer_tracer.start_span(
        "consume payment.failed", context=trace.set_span_in_context(producer),
        kind=SpanKind.CONSUMER, start_time=start(35),
        attributes={"messaging.operation.type": "process", "retry.count": 0},
        links=[Link(validate.get_span_context(), {"link.reason": "same-trace"}),
               Link(other_trace_ctx, {"link.reason": "other-trace", "link.weight": 2})])
    consume.end(end_time=end(45))

    root.set_status(Status(StatusCode.OK))
    root.end(end_time=end(50))

    return finish([frontend, payment], [frontend_exp, payment_exp],
                  {"trace_id": format(root.get_span_context().trace_id, "032x")})


if __name__ == "__main__":
    sys.exit(main())
