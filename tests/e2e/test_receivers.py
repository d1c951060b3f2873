"""The Zipkin v2 and OTLP/gRPC receivers of a real `spanhouse serve`: spans sent
over each come back through the query API (/api/traces/{id}), refusals carry
each protocol's status, and /metrics counts per receiver.

Zipkin by plain HTTP (JSON, gzip); OTLP/gRPC with the Python grpcio client and
the request built from the OTLP protobuf classes (the real SDKs' round trips
are tests/e2e/clients)."""

from __future__ import annotations

import gzip
import json
import os
import time

import grpc
import pytest
import requests

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from conftest import describe_response

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
INGEST_TOKEN = "receivers-e2e-ingest-token-1"

# Ingest stores alike in the embedded engine and in a ClickHouse server.
pytestmark = pytest.mark.usefixtures("backend")


def tags_of(span: dict) -> dict:
    return {t["key"]: t["value"] for t in span.get("tags") or []}


def service_of(doc: dict, span: dict) -> str:
    return doc["data"][0]["processes"][span["processID"]]["serviceName"]


def spans_by_id(doc: dict) -> dict:
    return {s["spanID"]: s for s in doc["data"][0]["spans"]}


def zipkin_spans(trace_id: str, now_us: int) -> list:
    return [
        {"traceId": trace_id, "id": "a000000000000001", "kind": "SERVER", "name": "get /cart",
         "timestamp": now_us, "duration": 2500,
         "localEndpoint": {"serviceName": "checkout", "ipv4": "10.0.0.1", "port": 8080},
         "remoteEndpoint": {"serviceName": "frontend", "ipv4": "10.0.0.9"},
         "annotations": [{"timestamp": now_us + 10, "value": "cache.miss"}],
         "tags": {"http.method": "GET", "error": "card declined"}},
        {"traceId": trace_id, "id": "a000000000000002", "parentId": "a000000000000001",
         "kind": "CLIENT", "name": "select", "timestamp": now_us + 100, "duration": 900,
         "localEndpoint": {"serviceName": "cart-db"}, "tags": {"db.system": "clickhouse"},
         "debug": True},
    ]


def export_request(trace_id: str, spans: list[tuple[str, str, int]],
                   service: str = "grpc-svc") -> bytes:
    """ExportTraceServiceRequest bytes: spans as (span id hex, name, start ns), 1 ms each."""
    req = trace_service_pb2.ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(common_pb2.KeyValue(
        key="service.name", value=common_pb2.AnyValue(string_value=service)))
    ss = rs.scope_spans.add()
    for span_id, name, start in spans:
        ss.spans.append(trace_pb2.Span(
            trace_id=bytes.fromhex(trace_id), span_id=bytes.fromhex(span_id), name=name,
            kind=trace_pb2.Span.SPAN_KIND_SERVER, start_time_unix_nano=start,
            end_time_unix_nano=start + 1_000_000,
            attributes=[common_pb2.KeyValue(key="grpc.e2e",
                                            value=common_pb2.AnyValue(int_value=42))]))
    return req.SerializeToString()


def export(sh, body: bytes, token: str = "", compression=None, method: str = EXPORT):
    """One unary call with raw bytes; returns (response bytes or None, grpc.RpcError or None)."""
    with grpc.insecure_channel(sh.grpc_target) as channel:
        call = channel.unary_unary(method)
        metadata = [("authorization", f"Bearer {token}")] if token else None
        try:
            return call(body, timeout=30, metadata=metadata, compression=compression), None
        except grpc.RpcError as e:
            return None, e


def metric(sh, name_and_labels: str) -> int:
    text = requests.get(sh.query_url + "/metrics", timeout=30).text
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return int(float(line.split()[-1]))
    raise AssertionError(f"no {name_and_labels} in /metrics:\n{text}")


def test_zipkin_json_round_trip(spanhouse):
    trace_id = os.urandom(16).hex()
    now_us = time.time_ns() // 1000
    r = requests.post(spanhouse.zipkin_url, data=json.dumps(zipkin_spans(trace_id, now_us)),
                      headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 202, describe_response(r)
    doc = spanhouse.wait_for_trace(trace_id, lambda d: len(d["data"][0]["spans"]) == 2,
                                   what="2 Zipkin spans")
    spans = spans_by_id(doc)
    server, client = spans["a000000000000001"], spans["a000000000000002"]
    assert server["operationName"] == "get /cart"
    assert service_of(doc, server) == "checkout"
    assert service_of(doc, client) == "cart-db"
    assert server["startTime"] == now_us and server["duration"] == 2500
    st = tags_of(server)
    assert st["span.kind"] == "server", st
    assert st["http.method"] == "GET", st
    assert st["error"] is True, st  # the error tag became the span's status
    assert st["service.peer.name"] == "frontend", st
    assert st["network.peer.address"] == "10.0.0.9", st
    assert [f["value"] for log in server["logs"] for f in log["fields"]] == ["cache.miss"], server
    ct = tags_of(client)
    assert ct["span.kind"] == "client" and ct["db.system"] == "clickhouse", ct
    assert ct["zipkin.debug"] is True, ct
    assert client["references"][0]["spanID"] == "a000000000000001", client
    assert metric(spanhouse, 'spanhouse_receiver_accepted_spans_total{receiver="zipkin"}') == 2


def test_zipkin_gzip_and_refusals(spanhouse):
    trace_id = os.urandom(16).hex()
    body = gzip.compress(json.dumps(zipkin_spans(trace_id, time.time_ns() // 1000)).encode())
    # No Content-Type: JSON, as Zipkin assumes.
    r = requests.post(spanhouse.zipkin_url, data=body, headers={"Content-Encoding": "gzip"},
                      timeout=30)
    assert r.status_code == 202, describe_response(r)
    spanhouse.wait_for_trace(trace_id, lambda d: len(d["data"][0]["spans"]) == 2)
    bad = requests.post(spanhouse.zipkin_url, data=b'[{"traceId": 7}]',
                        headers={"Content-Type": "application/json"}, timeout=30)
    assert bad.status_code == 400 and bad.text.strip(), describe_response(bad)
    odd = requests.post(spanhouse.zipkin_url, data=b"[]", headers={"Content-Type": "text/csv"},
                        timeout=30)
    assert odd.status_code == 415, describe_response(odd)
    assert metric(spanhouse, 'spanhouse_receiver_rejected_requests_total'
                             '{receiver="zipkin",reason="malformed"}') == 1


def test_otlp_grpc_round_trip_and_partial_success(spanhouse):
    trace_id = os.urandom(16).hex()
    now = time.time_ns()
    body = export_request(trace_id, [("b000000000000001", "grpc-op", now),
                                     ("b000000000000002", "too-late", now + 7200 * 10**9)])
    raw, err = export(spanhouse, body, compression=grpc.Compression.Gzip)
    assert err is None, f"{err.code()}: {err.details()}"
    resp = trace_service_pb2.ExportTraceServiceResponse.FromString(raw)
    # The span starting 2 h ahead is dropped and reported, not retried.
    assert resp.partial_success.rejected_spans == 1, resp
    assert "future_start" in resp.partial_success.error_message, resp
    doc = spanhouse.wait_for_trace(trace_id, lambda d: len(d["data"][0]["spans"]) >= 1)
    spans = doc["data"][0]["spans"]
    assert [s["operationName"] for s in spans] == ["grpc-op"], spans
    assert service_of(doc, spans[0]) == "grpc-svc"
    assert tags_of(spans[0])["grpc.e2e"] == 42
    assert metric(spanhouse, 'spanhouse_receiver_accepted_spans_total{receiver="otlp_grpc"}') == 1


def test_otlp_grpc_status_codes(spanhouse):
    _, err = export(spanhouse, b"\x0a\xff\xff\xff")
    assert err is not None and err.code() == grpc.StatusCode.INVALID_ARGUMENT, err
    _, err = export(spanhouse, b"", method="/opentelemetry.proto.collector.logs.v1.LogsService/Export")
    assert err is not None and err.code() == grpc.StatusCode.UNIMPLEMENTED, err
    assert metric(spanhouse, 'spanhouse_receiver_rejected_requests_total'
                             '{receiver="otlp_grpc",reason="malformed"}') == 1


def test_ingest_token_guards_zipkin_and_grpc(spanhouse_factory):
    sh = spanhouse_factory(env={"SPANHOUSE_AUTH_INGEST_TOKENS": INGEST_TOKEN})
    trace_id = os.urandom(16).hex()
    body = export_request(trace_id, [("c000000000000001", "guarded", time.time_ns())])
    _, err = export(sh, body)
    assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED, err
    _, err = export(sh, body, token="not-the-ingest-token-0000")
    assert err is not None and err.code() == grpc.StatusCode.UNAUTHENTICATED, err
    _, err = export(sh, body, token=INGEST_TOKEN)
    assert err is None, f"{err.code()}: {err.details()}"
    zipkin = json.dumps(zipkin_spans(os.urandom(16).hex(), time.time_ns() // 1000))
    r = requests.post(sh.zipkin_url, data=zipkin, timeout=30)
    assert r.status_code == 401, describe_response(r)
    r = requests.post(sh.zipkin_url, data=zipkin, timeout=30,
                      headers={"Authorization": f"Bearer {INGEST_TOKEN}"})
    assert r.status_code == 202, describe_response(r)
    sh.wait_for_trace(trace_id, lambda d: len(d["data"][0]["spans"]) == 1)
