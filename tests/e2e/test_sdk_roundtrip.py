"""Round trips: spans sent by real clients come back field by field from the query API."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import time
import zlib
from collections import Counter

import pytest

import zstandard

from conftest import E2E_DIR, clean_env, describe_response, trace_span_ids

TAG_TYPE_OF = {bool: "bool", int: "int64", float: "float64", str: "string"}


def expected_tag(value):
    """(type, value) of the Jaeger tag for an SDK attribute value."""
    if isinstance(value, list):
        return "string", value  # JSON text; compared parsed (see check_tags)
    return TAG_TYPE_OF[type(value)], value


def tags_by_key(tags: list, where: str) -> dict:
    keys = [t.get("key") for t in tags]
    dups = [k for k, n in Counter(keys).items() if n > 1]
    assert not dups, f"{where}: duplicate tag keys {dups} in {tags}"
    return {t["key"]: t for t in tags}


def check_tag(tag: dict, want_type: str, want_value, where: str) -> None:
    key = tag["key"]
    assert tag.get("type") == want_type, \
        f"{where}: tag {key!r} has type {tag.get('type')!r}, want {want_type!r} (tag {tag})"
    got = tag.get("value")
    if isinstance(want_value, list):
        assert isinstance(got, str), f"{where}: sequence tag {key!r} must be JSON text, got {tag}"
        try:
            parsed = json.loads(got)
        except ValueError as e:
            raise AssertionError(f"{where}: sequence tag {key!r} is not valid JSON text: "
                                 f"{got!r} ({e})") from None
        assert parsed == want_value, \
            f"{where}: sequence tag {key!r} = {got!r}, want JSON of {want_value!r}"
        assert [type(x) is bool for x in parsed] == [type(y) is bool for y in want_value], \
            f"{where}: sequence tag {key!r} = {got!r}: bools and numbers mixed up"
        assert all(type(x) is int for x, y in zip(parsed, want_value) if type(y) is int), \
            f"{where}: sequence tag {key!r} = {got!r}: ints must stay integers"
        return
    if want_type == "bool":
        assert got is want_value, f"{where}: bool tag {key!r} = {got!r}, want {want_value!r}"
    elif want_type == "int64":
        assert type(got) is int and got == want_value, \
            f"{where}: int64 tag {key!r} = {got!r} ({type(got).__name__}), want the JSON " \
            f"number {want_value!r}"
    elif want_type == "float64":
        assert type(got) in (int, float) and float(got) == want_value, \
            f"{where}: float64 tag {key!r} = {got!r} ({type(got).__name__}), want the JSON " \
            f"number {want_value!r}"
    else:
        assert got == want_value, f"{where}: tag {key!r} = {got!r}, want {want_value!r}"


def check_tags(tags: list, want: dict, where: str) -> None:
    """`want` maps key -> (type, value); tags must hold exactly those keys."""
    got = tags_by_key(tags, where)
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, \
        f"{where}: tag keys differ: missing {missing}, unexpected {extra}; got tags {tags}"
    for key, (want_type, want_value) in want.items():
        check_tag(got[key], want_type, want_value, where)


def run_emitter(endpoint: str) -> dict:
    cmd = [sys.executable, str(E2E_DIR / "emit_trace.py"), "--endpoint", endpoint]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=clean_env())
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"emit_trace.py did not finish in 120s; stderr: {e.stderr}", pytrace=False)
    assert proc.returncode == 0, \
        f"emit_trace.py exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return json.loads(proc.stdout)


def test_sdk_trace_roundtrip(spanhouse):
    sent = run_emitter(spanhouse.traces_url)
    trace_id = sent["trace_id"]
    spans = sent["spans"]
    assert len(spans) >= 5
    assert {s["trace_id"] for s in spans} == {trace_id}
    want_ids = {s["span_id"] for s in spans}
    assert len(want_ids) == len(spans)
    assert {s["service"] for s in spans} == {"frontend", "payment"}
    assert {s["kind"] for s in spans} == {"server", "client", "internal", "producer", "consumer"}

    doc = spanhouse.wait_for_trace(
        trace_id, lambda d: want_ids <= set(trace_span_ids(d)),
        what=f"did not return all {len(want_ids)} spans")
    resp = spanhouse.get_trace(trace_id)
    assert resp.status_code == 200, describe_response(resp)
    doc = resp.json()
    ctx = f"GET /api/traces/{trace_id}"

    # Envelope.
    assert doc.get("errors") is None, f"{ctx}: errors {doc.get('errors')}"
    for k in ("total", "limit", "offset"):
        assert k in doc, f"{ctx}: envelope lacks {k!r}: {list(doc)}"
    assert isinstance(doc.get("data"), list) and len(doc["data"]) == 1, \
        f"{ctx}: want exactly one trace in data, got {len(doc.get('data') or [])}"
    jt = doc["data"][0]
    assert jt["traceID"] == trace_id, f"{ctx}: traceID {jt['traceID']!r}, want {trace_id!r}"

    # Every span exactly once.
    ids = [s["spanID"] for s in jt["spans"]]
    dups = [i for i, n in Counter(ids).items() if n > 1]
    assert not dups, f"{ctx}: spans returned more than once: {dups}"
    assert set(ids) == want_ids, \
        f"{ctx}: span ids differ: missing {want_ids - set(ids)}, unexpected {set(ids) - want_ids}"

    # Processes: exactly the two services, with the resource attributes as typed tags.
    processes = jt["processes"]
    assert isinstance(processes, dict) and len(processes) == 2, \
        f"{ctx}: want 2 processes, got {processes}"
    by_service = {}
    for pid, proc in processes.items():
        assert proc["serviceName"] not in by_service, f"{ctx}: service twice in {processes}"
        by_service[proc["serviceName"]] = pid
    assert set(by_service) == {"frontend", "payment"}, f"{ctx}: processes {processes}"
    resources = {s["service"]: s["resource"] for s in spans}
    for service, resource in resources.items():
        want = {k: expected_tag(v) for k, v in resource.items() if k != "service.name"}
        check_tags(processes[by_service[service]]["tags"], want, f"{ctx}: process of {service}")

    got_spans = {s["spanID"]: s for s in jt["spans"]}
    want_parent = {s["span_id"]: s["parent_span_id"] for s in spans}
    got_parent = {}
    for s in spans:
        sid = s["span_id"]
        g = got_spans[sid]
        where = f"{ctx}: span {sid} ({s['name']!r}, {s['service']})"
        assert g["traceID"] == trace_id, f"{where}: traceID {g['traceID']!r}"
        assert g["operationName"] == s["name"], f"{where}: operationName {g['operationName']!r}"
        assert type(g.get("flags")) is int, f"{where}: flags {g.get('flags')!r}"
        assert g["processID"] == by_service[s["service"]], \
            f"{where}: processID {g['processID']!r}, want {by_service[s['service']]!r}"

        # Times: µs, truncated.
        assert g["startTime"] == s["start_ns"] // 1000, \
            f"{where}: startTime {g['startTime']}, want {s['start_ns'] // 1000} (from " \
            f"{s['start_ns']} ns)"
        want_dur = (s["end_ns"] - s["start_ns"]) // 1000
        assert g["duration"] == want_dur, \
            f"{where}: duration {g['duration']}, want {want_dur} µs ({s['start_ns']}..{s['end_ns']} ns)"

        # References: parent first as CHILD_OF, then each link as FOLLOWS_FROM.
        want_refs = []
        if s["parent_span_id"]:
            want_refs.append({"refType": "CHILD_OF", "traceID": trace_id,
                              "spanID": s["parent_span_id"]})
        for link in s["links"]:
            want_refs.append({"refType": "FOLLOWS_FROM", "traceID": link["trace_id"],
                              "spanID": link["span_id"]})
        assert g["references"] == want_refs, \
            f"{where}: references {g['references']}, want {want_refs}"
        child_of = [r["spanID"] for r in g["references"] if r["refType"] == "CHILD_OF"]
        got_parent[sid] = child_of[0] if child_of else ""

        # Tags: attributes plus span.kind, status, scope, tracestate; nothing else.
        want_tags = {k: expected_tag(v) for k, v in s["attributes"].items()}
        want_tags["span.kind"] = ("string", s["kind"])
        if s["status"]["code"] == "ERROR":
            want_tags["error"] = ("bool", True)
            want_tags["otel.status_code"] = ("string", "ERROR")
        elif s["status"]["code"] == "OK":
            want_tags["otel.status_code"] = ("string", "OK")
        if s["status"]["description"]:
            want_tags["otel.status_description"] = ("string", s["status"]["description"])
        want_tags["otel.scope.name"] = ("string", s["scope"]["name"])
        if s["scope"]["version"]:
            want_tags["otel.scope.version"] = ("string", s["scope"]["version"])
        if s["trace_state"]:
            want_tags["w3c.tracestate"] = ("string", s["trace_state"])
        check_tags(g["tags"], want_tags, where)

        # Events -> logs, in order.
        logs = g.get("logs") or []
        assert len(logs) == len(s["events"]), \
            f"{where}: {len(logs)} logs, want {len(s['events'])}: {logs}"
        for i, (log, ev) in enumerate(zip(logs, s["events"])):
            lwhere = f"{where}: log {i} (event {ev['name']!r})"
            assert log["timestamp"] == ev["timestamp_ns"] // 1000, \
                f"{lwhere}: timestamp {log['timestamp']}, want {ev['timestamp_ns'] // 1000}"
            fields = log["fields"]
            assert fields and fields[0].get("key") == "event" and \
                fields[0].get("value") == ev["name"] and fields[0].get("type") == "string", \
                f"{lwhere}: first field must be the event name, got {fields}"
            check_tags(fields[1:], {k: expected_tag(v) for k, v in ev["attributes"].items()},
                       lwhere)

        assert g.get("warnings") in (None, []), f"{where}: warnings {g.get('warnings')}"

    # The parent/child tree, and that the statuses are where they were set.
    assert got_parent == want_parent, f"{ctx}: tree {got_parent}, want {want_parent}"
    roots = [sid for sid, p in want_parent.items() if not p]
    assert len(roots) == 1
    errors = [sid for sid, g in got_spans.items()
              if any(t["key"] == "error" for t in g["tags"])]
    assert errors == [s["span_id"] for s in spans if s["status"]["code"] == "ERROR"], \
        f"{ctx}: error tags on {errors}"


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
    assert tags["big"] == {"key": "big", "type": "int64", "value": -9223372036854775808}, \
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
