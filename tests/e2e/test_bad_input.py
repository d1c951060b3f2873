"""Malformed and misdirected requests get the right status and an explanatory body,
and none of them hurts the server: afterwards it is healthy and still stores spans.

All cases share one spanhouse (module scope); test_server_unharmed runs last.
"""

from __future__ import annotations

import gzip
import json
import os
import time

import pytest
import requests
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from conftest import describe_response, otlp_json_request, otlp_json_span, trace_span_ids

MiB = 1 << 20


def valid_proto_request() -> bytes:
    now = time.time_ns()
    span = Span(trace_id=os.urandom(16), span_id=os.urandom(8), name="op" * 50,
                start_time_unix_nano=now, end_time_unix_nano=now + 1000,
                attributes=[KeyValue(key=f"k{i}", value=AnyValue(string_value="v" * 40))
                            for i in range(10)])
    req = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name",
                                               value=AnyValue(string_value="bad-input"))]),
        scope_spans=[ScopeSpans(spans=[span])])])
    return req.SerializeToString()


def assert_not_protobuf(data: bytes) -> None:
    """The test's own check that the bytes really are not an ExportTraceServiceRequest."""
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest.FromString(data)


INVALID_PROTO = b"\x0a\x05\xff\xff\xff\xff\xff\x07not a protobuf message"
_valid = valid_proto_request()
TRUNCATED_PROTO = _valid[: len(_valid) // 2]


def json_bad_trace_id() -> bytes:
    span = otlp_json_span("not-a-hex-trace-id-at-all-000000", "0123456789abcdef")
    return otlp_json_request([span])


# (id, method, port ("otlp"/"query"), path, headers, body, want status, body kind)
#   body kind: "proto" google.rpc.Status, "json" google.rpc.Status in JSON,
#              "jaeger" Jaeger error envelope, "text" any non-empty text.
CASES = [
    ("invalid-protobuf", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/x-protobuf"}, INVALID_PROTO, 400, "proto"),
    ("truncated-protobuf", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/x-protobuf"}, TRUNCATED_PROTO, 400, "proto"),
    ("invalid-json", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/json"}, b'{"resourceSpans": [{"scopeSpans": [', 400, "json"),
    ("json-bad-trace-id", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/json"}, json_bad_trace_id(), 400, "json"),
    ("unknown-content-type", "POST", "otlp", "/v1/traces",
     {"Content-Type": "text/plain"}, b"hello", 415, "text"),
    ("unknown-content-encoding", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/json", "Content-Encoding": "br"},
     otlp_json_request([otlp_json_span("0" * 31 + "1", "0" * 15 + "1")]), 415, "json"),
    ("corrupt-gzip", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/json", "Content-Encoding": "gzip"},
     b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + b"\xde\xad\xbe\xef" * 64, 400, "json"),
    ("gzip-bomb-25MiB", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/json", "Content-Encoding": "gzip"},
     gzip.compress(b"\0" * (25 * MiB), compresslevel=9), 413, "json"),
    ("uncompressed-over-20MiB", "POST", "otlp", "/v1/traces",
     {"Content-Type": "application/x-protobuf"}, b"\0" * (20 * MiB + 4096), 413, "text"),
    ("get-v1-traces", "GET", "otlp", "/v1/traces", {}, None, 405, "text"),
    ("post-v2-foo", "POST", "otlp", "/v2/foo",
     {"Content-Type": "application/json"}, b"{}", 404, "text"),
    ("query-unknown-trace", "GET", "query", "/api/traces/" + "ab" * 16, {}, None, 404, "jaeger"),
    ("query-malformed-trace-id", "GET", "query", "/api/traces/not-hex!", {}, None, 400, "jaeger"),
    ("query-trace-id-too-long", "GET", "query", "/api/traces/" + "1" * 33, {}, None, 400, "jaeger"),
]


def test_cases_are_really_bad():
    assert_not_protobuf(INVALID_PROTO)
    assert_not_protobuf(TRUNCATED_PROTO)
    with pytest.raises(ValueError):
        json.loads(CASES[2][5])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_request(module_spanhouse, case):
    name, method, port, path, headers, body, want_status, kind = case
    sh = module_spanhouse
    base = sh.otlp_url if port == "otlp" else sh.query_url
    try:
        resp = requests.request(method, base + path, headers=headers, data=body, timeout=60)
    except requests.RequestException as e:
        pytest.fail(f"{name}: {method} {path} got no HTTP answer ({type(e).__name__}: {e}); "
                    f"want {want_status}\n{sh.diagnostics()}", pytrace=False)
    info = describe_response(resp)
    assert resp.status_code == want_status, f"{name}: want HTTP {want_status}, got: {info}"
    assert resp.content.strip(), f"{name}: empty body: {info}"

    if want_status == 405:
        assert resp.headers.get("Allow") == "POST", f"{name}: want 'Allow: POST': {info}"

    if kind == "proto":
        assert resp.headers.get("Content-Type", "").startswith("application/x-protobuf"), info
        try:
            st = status_pb2.Status.FromString(resp.content)
        except DecodeError as e:
            raise AssertionError(f"{name}: body is not a google.rpc.Status ({e}): {info}") from None
        assert st.code == 3 and st.message, f"{name}: google.rpc.Status {st}: {info}"
    elif kind == "json":
        assert resp.headers.get("Content-Type", "").startswith("application/json"), info
        try:
            doc = resp.json()
        except ValueError:
            raise AssertionError(f"{name}: body is not JSON: {info}") from None
        assert isinstance(doc.get("message"), str) and doc["message"], \
            f"{name}: JSON body lacks a message: {info}"
        assert doc.get("code") == 3, f"{name}: want google.rpc code 3: {info}"
    elif kind == "jaeger":
        assert resp.headers.get("Content-Type", "").startswith("application/json"), info
        doc = resp.json()
        assert doc.get("data") is None, f"{name}: {info}"
        errors = doc.get("errors")
        assert isinstance(errors, list) and len(errors) == 1, f"{name}: errors: {info}"
        assert errors[0].get("code") == want_status and errors[0].get("msg"), f"{name}: {info}"
        if want_status == 404:
            assert errors[0]["msg"] == "trace not found", f"{name}: {info}"
    else:
        assert resp.text.strip(), f"{name}: {info}"


def test_server_unharmed(module_spanhouse):
    """After every bad request above: healthy, and a valid span is accepted and stored."""
    sh = module_spanhouse
    assert sh.running(), f"spanhouse died\n{sh.diagnostics()}"
    r = requests.get(sh.healthz_url, timeout=10)
    assert r.status_code == 200 and r.text.strip() == "ok", describe_response(r)

    trace_id, span_id = os.urandom(16).hex(), os.urandom(8).hex()
    resp = sh.post_traces(otlp_json_request([otlp_json_span(trace_id, span_id, "after-bad")]))
    assert resp.status_code == 200, describe_response(resp)
    doc = sh.wait_for_trace(trace_id, lambda d: span_id in trace_span_ids(d),
                            what="did not store the valid span sent after the bad input")
    assert trace_span_ids(doc) == [span_id]
    assert doc["data"][0]["spans"][0]["operationName"] == "after-bad"

    # And a valid protobuf request too.
    resp = sh.post_traces(valid_proto_request(), "application/x-protobuf")
    assert resp.status_code == 200, describe_response(resp)
