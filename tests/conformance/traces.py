"""The rich traces written for the conformance suite, as OTLP/JSON requests: between them every
attribute value type (ints beyond +-2^53, empty values, bytes, arrays, maps), events (one with
no attributes, one with an attribute named `event`), links (to the parent, with an OpenTracing
ref_type, to another span of the trace, to another trace), every span kind, both statuses with
and without a message, trace state, trace flags 0 and 1, dropped counts, a zero-length span, a
span whose parent never arrives, resources without service.name, with an empty one and with one
of the wrong type, scopes with and without a version, and names in several scripts.

Each call draws fresh ids and times (a few seconds in the past), so a run never meets the
traces of an earlier one."""

from __future__ import annotations

import json
import secrets
import time

from conftest import otlp_attrs as attrs

# Services of the rich traces; the searches of the suite look for them.
SHOP = "conf-shop"
PAYMENTS = "conf-payments"
WAREHOUSE = "conf-warehouse"


def span_id() -> str:
    return secrets.token_hex(8)


def trace_id() -> str:
    return secrets.token_hex(16)


class TraceSet:
    """A request under construction: resources, their scopes, their spans."""

    def __init__(self):
        self.resource_spans: list[dict] = []
        # trace id -> number of spans sent in it
        self.traces: dict[str, int] = {}

    def add(self, resource: dict, scope: dict, spans: list[dict]) -> None:
        self.resource_spans.append({"resource": {"attributes": attrs(resource)},
                                    "scopeSpans": [{"scope": scope, "spans": spans}]})
        for s in spans:
            self.traces[s["traceId"]] = self.traces.get(s["traceId"], 0) + 1

    def body(self) -> bytes:
        return json.dumps({"resourceSpans": self.resource_spans}).encode()


def span(trace: str, sid: str, name: str, start_ns: int, dur_ns: int, kind: int = 1,
         parent: str = "", **extra) -> dict:
    s = {"traceId": trace, "spanId": sid, "name": name, "kind": kind,
         "startTimeUnixNano": str(start_ns), "endTimeUnixNano": str(start_ns + dur_ns)}
    if parent:
        s["parentSpanId"] = parent
    s.update(extra)
    return s


def checkout_trace(ts: TraceSet, n: int, start_ns: int) -> str:
    """A shop -> payments -> warehouse trace of 7 spans with everything on it."""
    t = trace_id()
    root, validate, pay_client, pay_server, reserve, publish, orphan = (span_id() for _ in range(7))
    ms = 1_000_000
    shop_spans = [
        span(t, root, f"GET /checkout/{{id}}", start_ns, 48 * ms + n * 1000, kind=2,
             flags=1, traceState="ot=th:8;rv:00f067aa0ba902",
             attributes=attrs({
                 "http.request.method": "GET", "url.path": f"/checkout/{n}",
                 "http.response.status_code": 200, "int.big": 9_007_199_254_740_993,
                 "int.big.negative": -9_007_199_254_740_993, "int.max": 2**63 - 1,
                 "int.min": -(2**63), "int.safe": 9_007_199_254_740_991, "ratio": 0.25,
                 "float.whole": 3.0, "float.tiny": 1e-300, "cached": False, "flag": True,
                 "blob": b"\x00\x01\xfe\xff", "tags": ["a", "b", 3], "empty.string": "",
                 "empty.value": None, "map": {"k": "v", "n": 1},
                 "unicode": "grüße, 世界 \u2713 \"quoted\" \\ back\nslash"}),
             status={"code": 1},
             events=[{"timeUnixNano": str(start_ns + 1000), "name": "request.parsed",
                      "attributes": attrs({"bytes": 512, "ok": True})},
                     {"timeUnixNano": str(start_ns + 2000), "name": "no.attributes"},
                     {"timeUnixNano": str(start_ns + 3000), "name": "renamed",
                      "attributes": attrs({"event": "its own name", "why": "clash"})}],
             droppedAttributesCount=2, droppedEventsCount=1),
        span(t, validate, "validate cart", start_ns + 1 * ms, 2 * ms, kind=1, parent=root,
             attributes=attrs({"cart.items": n % 7}),
             links=[{"traceId": t, "spanId": root,
                     "attributes": attrs({"opentracing.ref_type": "follows_from"})}]),
        span(t, pay_client, "POST /pay", start_ns + 5 * ms, 30 * ms, kind=3, parent=root,
             attributes=attrs({"peer.service": PAYMENTS, "server.port": 8443}),
             links=[{"traceId": t, "spanId": validate}]),
    ]
    ts.add({"service.name": SHOP, "host.name": f"shop-{n % 3}", "process.pid": 4000 + n,
            "service.version": "1.2.3"},
           {"name": "shop.http", "version": "2.0.0"}, shop_spans)
    pay_spans = [
        span(t, pay_server, "POST /pay", start_ns + 6 * ms, 28 * ms, kind=2, parent=pay_client,
             status={"code": 2, "message": "card declined"},
             attributes=attrs({"payment.amount": 99.95 + n, "payment.retried": n % 2 == 0}),
             events=[{"timeUnixNano": str(start_ns + 20 * ms), "name": "exception",
                      "attributes": attrs({"exception.type": "CardDeclined",
                                           "exception.message": f"card {n} declined",
                                           "exception.stacktrace": "at pay()\nat main()"}),
                      "droppedAttributesCount": 1}],
             links=[{"traceId": trace_id(), "spanId": span_id(),
                     "attributes": attrs({"opentracing.ref_type": "child_of"})},
                    {"traceId": trace_id(), "spanId": span_id(),
                     "attributes": attrs({"link.reason": "batch"})}],
             droppedLinksCount=3),
        span(t, publish, "publish payment.failed", start_ns + 30 * ms, 0, kind=4,
             parent=pay_server, attributes=attrs({"messaging.system": "kafka"})),
    ]
    ts.add({"service.name": PAYMENTS, "k8s.pod.name": f"payments-{n}"},
           {"name": "payments.lib"}, pay_spans)
    wh_spans = [
        span(t, reserve, "reserve stock", start_ns + 31 * ms, 5 * ms, kind=5, parent=publish,
             flags=0, status={"code": 2}),
        span(t, orphan, "late callback", start_ns + 40 * ms, 1 * ms, kind=0,
             parent=span_id()),
    ]
    ts.add({"service.name": WAREHOUSE}, {}, wh_spans)
    return t


def nameless_trace(ts: TraceSet, n: int, start_ns: int) -> str:
    """A trace whose spans come from resources without a usable service.name: none at all,
    an empty one, and one that is not a string."""
    t = trace_id()
    root, a, b = span_id(), span_id(), span_id()
    ts.add({"host.name": f"bare-{n}"}, {"name": "bare"},
           [span(t, root, "cron tick", start_ns, 3_000_000, kind=1)])
    ts.add({"service.name": "", "host.name": "empty"}, {"name": "bare"},
           [span(t, a, "empty-named work", start_ns + 100_000, 1_000_000, parent=root)])
    ts.add({"service.name": 42}, {"name": "bare"},
           [span(t, b, "typed work", start_ns + 200_000, 1_000_000, parent=root)])
    return t


def rich_request(n_traces: int = 12) -> tuple[bytes, dict[str, int], int, int]:
    """One OTLP/JSON request of n_traces checkout traces and two nameless ones, spread over the
    last few seconds. Returns the body, the span count per trace id, and the first and last
    span start (ns)."""
    ts = TraceSet()
    now = time.time_ns() - 10_000_000_000
    first = now
    for n in range(n_traces):
        checkout_trace(ts, n, now + n * 250_000_000)
    nameless_trace(ts, 0, now + 3_100_000_000)
    nameless_trace(ts, 1, now + 3_300_000_000)
    return ts.body(), ts.traces, first, now + 3_500_000_000
