"""Round trips of hand-built OTLP/JSON requests (bytes, kvlists, mixed arrays), field by field.

The real clients' round trips (the Python SDK among them) are in test_clients.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import time
import zlib

import pytest

import zstandard

from conftest import describe_response, trace_span_ids
from roundtrip_check import tags_by_key

# ---- hand-built OTLP/JSON ----

TRACE_STATE = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
BYTES = bytes([0, 1, 2, 0x7f, 0x80, 0xfe, 0xff]) + b"spanhouse"


def handbuilt_request(trace_id: str, base_ns: int) -> dict:
    """An OTLP/JSON request: a bytes attribute, a kvlist, an array, a traceState."""
    return {"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": "json-client"}},
            {"key": "host.id", "value": {"bytesValue": base64.b64encode(b"\x01\x02host").decode()}},
            {"key": "build", "value": {"kvlistValue": {"values": [
                {"key": "commit", "value": {"stringValue": "abc123"}},
                {"key": "dirty", "value": {"boolValue": False}}]}}},
        ]},
        "scopeSpans": [{
            "scope": {"name": "handmade", "version": "7"},
            "spans": [
                {
                    "traceId": trace_id,
                    "spanId": "1111111111111111",
                    "traceState": TRACE_STATE,
                    "name": "root op",
                    "kind": 2,
                    "startTimeUnixNano": str(base_ns),
                    "endTimeUnixNano": str(base_ns + 5_000_000),
                    "attributes": [
                        {"key": "payload", "value": {"bytesValue": base64.b64encode(BYTES).decode()}},
                        {"key": "config", "value": {"kvlistValue": {"values": [
                            {"key": "name", "value": {"stringValue": "x"}},
                            {"key": "count", "value": {"intValue": "7"}},
                            {"key": "ratio", "value": {"doubleValue": 0.5}},
                            {"key": "on", "value": {"boolValue": True}},
                            {"key": "list", "value": {"arrayValue": {"values": [
                                {"intValue": "1"}, {"stringValue": "two"}]}}},
                            {"key": "nested", "value": {"kvlistValue": {"values": [
                                {"key": "deep", "value": {"stringValue": "yes"}}]}}},
                        ]}}},
                        {"key": "mixed", "value": {"arrayValue": {"values": [
                            {"stringValue": "a"}, {"intValue": "-3"}, {"boolValue": True},
                            {"doubleValue": 2.5}]}}},
                        {"key": "big", "value": {"intValue": "-9223372036854775808"}},
                    ],
                    "status": {"code": 2, "message": "boom"},
                },
                {
                    "traceId": trace_id,
                    "spanId": "2222222222222222",
                    "parentSpanId": "1111111111111111",
                    "name": "child op",
                    "kind": "SPAN_KIND_CLIENT",
                    "startTimeUnixNano": str(base_ns + 1_000_000),
                    "endTimeUnixNano": str(base_ns + 2_000_000),
                    "events": [{"timeUnixNano": str(base_ns + 1_500_000), "name": "retry",
                                "attributes": [{"key": "raw", "value": {
                                    "bytesValue": base64.b64encode(b"\xff\x00").decode()}}]}],
                    "links": [{"traceId": "0af7651916cd43dd8448eb211c80319c",
                               "spanId": "b7ad6b7169203331", "traceState": "k=v"}],
                },
            ],
        }],
    }]}


def check_handbuilt(sh, trace_id: str, base_ns: int) -> None:
    want_ids = {"1111111111111111", "2222222222222222"}
    sh.wait_for_trace(trace_id, lambda d: want_ids <= set(trace_span_ids(d)),
                      what="did not return both spans")
    resp = sh.get_trace(trace_id)
    assert resp.status_code == 200, describe_response(resp)
    jt = resp.json()["data"][0]
    ctx = f"GET /api/traces/{trace_id}"
    ids = [s["spanID"] for s in jt["spans"]]
    assert sorted(ids) == sorted(want_ids), f"{ctx}: span ids {ids}"
    spans = {s["spanID"]: s for s in jt["spans"]}

    root = spans["1111111111111111"]
    where = f"{ctx}: root span"
    assert root["operationName"] == "root op"
    assert root["references"] == [], f"{where}: references {root['references']}"
    assert root["startTime"] == base_ns // 1000 and root["duration"] == 5000, \
        f"{where}: startTime {root['startTime']} duration {root['duration']}"
    tags = tags_by_key(root["tags"], where)
    assert tags["payload"]["type"] == "binary", f"{where}: payload tag {tags['payload']}"
    assert base64.b64decode(tags["payload"]["value"]) == BYTES, \
        f"{where}: payload {tags['payload']['value']!r}, want base64 of {BYTES!r}"
    assert tags["config"]["type"] == "string", f"{where}: kvlist tag {tags['config']}"
    assert json.loads(tags["config"]["value"]) == {
        "name": "x", "count": 7, "ratio": 0.5, "on": True, "list": [1, "two"],
        "nested": {"deep": "yes"}}, f"{where}: kvlist tag {tags['config']}"
    assert tags["mixed"]["type"] == "string" and \
        json.loads(tags["mixed"]["value"]) == ["a", -3, True, 2.5], f"{where}: {tags['mixed']}"
    # Beyond 2^53 as a string of its digits, as Jaeger sends it (a JavaScript client rounds
    # a number that large).
    assert tags["big"] == {"key": "big", "type": "int64", "value": "-9223372036854775808"}, \
        f"{where}: {tags['big']}"
    assert tags["w3c.tracestate"]["value"] == TRACE_STATE, f"{where}: {tags.get('w3c.tracestate')}"
    assert tags["span.kind"]["value"] == "server"
    assert tags["error"]["value"] is True and tags["error"]["type"] == "bool", f"{where}: {tags}"
    assert tags["otel.status_code"]["value"] == "ERROR"
    assert tags["otel.status_description"]["value"] == "boom"
    assert tags["otel.scope.name"]["value"] == "handmade"
    assert tags["otel.scope.version"]["value"] == "7"

    child = spans["2222222222222222"]
    where = f"{ctx}: child span"
    assert child["references"] == [
        {"refType": "CHILD_OF", "traceID": trace_id, "spanID": "1111111111111111"},
        {"refType": "FOLLOWS_FROM", "traceID": "0af7651916cd43dd8448eb211c80319c",
         "spanID": "b7ad6b7169203331"}], f"{where}: references {child['references']}"
    ctags = tags_by_key(child["tags"], where)
    assert ctags["span.kind"]["value"] == "client", f"{where}: {ctags}"
    assert "w3c.tracestate" not in ctags and "error" not in ctags, f"{where}: {ctags}"
    assert len(child["logs"]) == 1, f"{where}: logs {child['logs']}"
    log = child["logs"][0]
    assert log["timestamp"] == (base_ns + 1_500_000) // 1000
    assert log["fields"][0] == {"key": "event", "type": "string", "value": "retry"}, log
    assert log["fields"][1]["key"] == "raw" and log["fields"][1]["type"] == "binary" and \
        base64.b64decode(log["fields"][1]["value"]) == b"\xff\x00", f"{where}: log {log}"

    procs = jt["processes"]
    assert len(procs) == 1, f"{ctx}: processes {procs}"
    proc = next(iter(procs.values()))
    assert proc["serviceName"] == "json-client"
    ptags = tags_by_key(proc["tags"], f"{ctx}: process")
    assert set(ptags) == {"host.id", "build"}, f"{ctx}: process tags {proc['tags']}"
    assert ptags["host.id"]["type"] == "binary" and \
        base64.b64decode(ptags["host.id"]["value"]) == b"\x01\x02host", ptags
    assert ptags["build"]["type"] == "string" and \
        json.loads(ptags["build"]["value"]) == {"commit": "abc123", "dirty": False}, ptags


def post_handbuilt(sh, trace_id: str, encoding: str, compress) -> int:
    base_ns = (time.time_ns() // 1000) * 1000 - 30_000_000_000 + 123
    body = compress(json.dumps(handbuilt_request(trace_id, base_ns)).encode())
    resp = sh.post_traces(body, "application/json", encoding)
    assert resp.status_code == 200, describe_response(resp)
    assert resp.headers.get("Content-Type", "").startswith("application/json"), describe_response(resp)
    assert resp.json() == {}, describe_response(resp)
    return base_ns


def test_handbuilt_json_gzip(spanhouse):
    trace_id = "5b8efff798038103d269b633813fc60c"
    base_ns = post_handbuilt(spanhouse, trace_id, "gzip", gzip.compress)
    check_handbuilt(spanhouse, trace_id, base_ns)


@pytest.mark.parametrize("encoding", ["deflate", None])
def test_handbuilt_json_other_encodings(spanhouse, encoding):
    trace_id = "5b8efff798038103d269b633813fc6" + ("0e" if encoding else "0f")
    compress = zlib.compress if encoding == "deflate" else (lambda b: b)
    base_ns = post_handbuilt(spanhouse, trace_id, encoding, compress)
    check_handbuilt(spanhouse, trace_id, base_ns)


def test_handbuilt_json_zstd(spanhouse):
    trace_id = "5b8efff798038103d269b633813fc60d"
    base_ns = post_handbuilt(spanhouse, trace_id, "zstd",
                             lambda b: zstandard.ZstdCompressor().compress(b))
    check_handbuilt(spanhouse, trace_id, base_ns)
