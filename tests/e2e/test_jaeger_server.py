"""The Jaeger v2 fixture (jaeger_server.py) works: a trace posted to Jaeger's OTLP/HTTP receiver
comes back from its query API with its service, operations, typed tags, event and parent, for
the memory store and for the Badger store (across a restart); and on OpenSearch 2.19.6 and
Elasticsearch 7.10.2 (each test on both, `search_store`), Jaeger's own documents, indices and
index templates, which JAEGER_OS_SAMPLES_DIR=DIR (OpenSearch) and JAEGER_ES_SAMPLES_DIR=DIR
(Elasticsearch) save for comparison with spanhouse's writer."""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

import pytest
import requests

from jaeger_server import JAEGER_VERSION, Jaeger

SERVICE = "jaeger-fixture-check"


def otlp_trace(trace_id: str, root_id: str, child_id: str) -> bytes:
    """Two spans in OTLP/JSON: a server root and an internal child with typed attributes,
    an event, and the root as its parent."""
    now = time.time_ns()
    attrs = [
        {"key": "str.attr", "value": {"stringValue": "hello"}},
        {"key": "int.attr", "value": {"intValue": "42"}},
        {"key": "bool.attr", "value": {"boolValue": True}},
        {"key": "double.attr", "value": {"doubleValue": 2.5}},
    ]
    root = {"traceId": trace_id, "spanId": root_id, "name": "GET /checkout", "kind": 2,
            "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 5_000_000),
            "attributes": [{"key": "http.method", "value": {"stringValue": "GET"}}]}
    child = {"traceId": trace_id, "spanId": child_id, "parentSpanId": root_id,
             "name": "compute-total", "kind": 1,
             "startTimeUnixNano": str(now + 1_000_000), "endTimeUnixNano": str(now + 3_000_000),
             "attributes": attrs,
             "events": [{"timeUnixNano": str(now + 2_000_000), "name": "cache-miss",
                         "attributes": [{"key": "cache.key", "value": {"stringValue": "k1"}}]}],
             "status": {"code": 1}}
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": SERVICE}},
            {"key": "host.name", "value": {"stringValue": "fixture-host"}}]},
        "scopeSpans": [{"scope": {"name": "fixture-scope", "version": "1.0"},
                        "spans": [root, child]}],
    }]}).encode()


def tags(obj: dict) -> dict:
    return {t["key"]: (t["type"], t["value"]) for t in obj.get("tags") or []}


def post_and_check(j: Jaeger) -> tuple[str, dict]:
    trace_id, root_id, child_id = secrets.token_hex(16), secrets.token_hex(8), secrets.token_hex(8)
    r = j.post_otlp_json(otlp_trace(trace_id, root_id, child_id))
    assert r.status_code == 200, f"OTLP/HTTP POST: HTTP {r.status_code} {r.text}\n{j.diagnostics()}"
    trace = j.wait_for_trace(trace_id, 2)
    check_trace(trace, trace_id, root_id, child_id)
    return trace_id, trace


def check_trace(trace: dict, trace_id: str, root_id: str, child_id: str) -> None:
    assert trace["traceID"] == trace_id
    spans = {s["spanID"]: s for s in trace["spans"]}
    assert set(spans) == {root_id, child_id}, trace
    root, child = spans[root_id], spans[child_id]
    for span in (root, child):
        assert trace["processes"][span["processID"]]["serviceName"] == SERVICE
        ptags = tags(trace["processes"][span["processID"]])
        assert ptags["host.name"] == ("string", "fixture-host"), ptags
    assert root["operationName"] == "GET /checkout"
    assert child["operationName"] == "compute-total"
    assert not root.get("references"), root
    assert child["references"] == [
        {"refType": "CHILD_OF", "traceID": trace_id, "spanID": root_id}], child
    assert root["duration"] == 5000 and child["duration"] == 2000
    assert child["startTime"] - root["startTime"] == 1000

    rt, ct = tags(root), tags(child)
    assert rt["span.kind"] == ("string", "server"), rt
    assert rt["http.method"] == ("string", "GET"), rt
    assert ct["str.attr"] == ("string", "hello"), ct
    assert ct["int.attr"] == ("int64", 42), ct
    assert ct["bool.attr"] == ("bool", True), ct
    assert ct["double.attr"] == ("float64", 2.5), ct
    assert ct["otel.scope.name"] == ("string", "fixture-scope"), ct
    assert ct["otel.scope.version"] == ("string", "1.0"), ct
    # Jaeger v2 tags internal spans too, and an OK status.
    assert ct["span.kind"] == ("string", "internal"), ct
    assert ct["otel.status_code"] == ("string", "OK"), ct
    assert "otel.status_code" not in rt, rt  # unset status: no tag

    assert len(child["logs"]) == 1, child
    log = child["logs"][0]
    assert log["timestamp"] - child["startTime"] == 1000
    fields = tags({"tags": log["fields"]})
    assert fields["event"] == ("string", "cache-miss"), fields
    assert fields["cache.key"] == ("string", "k1"), fields


def test_memory_store(jaeger):
    trace_id, _ = post_and_check(jaeger)
    services = jaeger_get(jaeger, "/api/services")["data"]
    assert SERVICE in services
    ops = jaeger_get(jaeger, f"/api/services/{SERVICE}/operations")["data"]
    assert sorted(ops) == ["GET /checkout", "compute-total"], ops
    ops = jaeger_get(jaeger, "/api/operations", params={"service": SERVICE})["data"]
    assert sorted((o["name"], o["spanKind"]) for o in ops) == [
        ("GET /checkout", "server"), ("compute-total", "internal")], ops
    found = jaeger_get(jaeger, "/api/traces", params={
        "service": SERVICE, "lookback": "1h", "limit": 20})["data"]
    assert trace_id in {t["traceID"] for t in found}


def test_badger_store_keeps_traces_across_restart(jaeger_factory):
    j = jaeger_factory(storage="badger")
    trace_id, before = post_and_check(j)
    assert j.stop() == 0, j.diagnostics()
    assert any(j.badger_dir.rglob("*")), "badger wrote nothing under its directory"
    j.start()
    after = j.wait_for_trace(trace_id, 2)
    by_id = lambda t: sorted(t["spans"], key=lambda s: s["spanID"])  # noqa: E731
    assert [(s["spanID"], s["operationName"], s["startTime"], s["duration"], tags(s))
            for s in by_id(after)] == \
           [(s["spanID"], s["operationName"], s["startTime"], s["duration"], tags(s))
            for s in by_id(before)]


def jaeger_get(j: Jaeger, path: str, params: dict | None = None) -> dict:
    r = requests.get(f"{j.query_url}{path}", params=params, timeout=30)
    assert r.status_code == 200, f"GET {path}: HTTP {r.status_code} {r.text}\n{j.diagnostics()}"
    return r.json()


# ---- OpenSearch and Elasticsearch: Jaeger writes its document format, and reads it back ----

# Where test_search_store saves what Jaeger wrote, per engine, when the variable is set.
SAMPLES_DIR_ENV = {"opensearch": "JAEGER_OS_SAMPLES_DIR",
                   "elasticsearch": "JAEGER_ES_SAMPLES_DIR"}


def otlp_error_trace(trace_id: str, span_id: str, linked: tuple[str, str]) -> bytes:
    """One client span with an ERROR status and message, a link to a span of another trace,
    and bytes and array attributes."""
    now = time.time_ns()
    span = {"traceId": trace_id, "spanId": span_id, "name": "POST /pay", "kind": 3,
            "startTimeUnixNano": str(now), "endTimeUnixNano": str(now + 7_000_000),
            "attributes": [{"key": "bytes.attr", "value": {"bytesValue": "AQID"}},
                           {"key": "array.attr", "value": {"arrayValue": {"values": [
                               {"stringValue": "a"}, {"intValue": "1"}]}}}],
            "links": [{"traceId": linked[0], "spanId": linked[1]}],
            "status": {"code": 2, "message": "card declined"}}
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [
            {"key": "service.name", "value": {"stringValue": SERVICE}},
            {"key": "host.name", "value": {"stringValue": "fixture-host"}}]},
        "scopeSpans": [{"scope": {"name": "fixture-scope"}, "spans": [span]}],
    }]}).encode()


def utc_day(micros: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(micros / 1e6))


def test_search_store(jaeger_factory, search_store):
    """Jaeger writes a trace into OpenSearch or Elasticsearch (its backend of that name: daily
    indices, its own legacy index templates) and its query API reads it back. With
    JAEGER_OS_SAMPLES_DIR (OpenSearch) or JAEGER_ES_SAMPLES_DIR (Elasticsearch) set, what
    Jaeger wrote is saved there: indices.json, span-docs.json, service-docs.json,
    templates.json, index-templates.json, mappings.json, settings.json, query-api.json,
    jaeger-config.json."""
    node = search_store
    j = jaeger_factory(storage=node.engine, search_url=node.url)
    assert j.config()["extensions"]["jaeger_storage"]["backends"]["store"].keys() == {
        node.engine}
    trace_id, trace = post_and_check(j)
    err_trace_id, err_span_id = secrets.token_hex(16), secrets.token_hex(8)
    linked = (secrets.token_hex(16), secrets.token_hex(8))
    r = j.post_otlp_json(otlp_error_trace(err_trace_id, err_span_id, linked))
    assert r.status_code == 200, r.text
    err_trace = j.wait_for_trace(err_trace_id, 1)
    (err_span,) = err_trace["spans"]
    et = tags(err_span)
    assert et["error"] == ("bool", True), et
    assert et["otel.status_description"] == ("string", "card declined"), et
    assert et["span.kind"] == ("string", "client"), et
    assert err_span["references"] == [
        {"refType": "FOLLOWS_FROM", "traceID": linked[0], "spanID": linked[1]}], err_span

    day = utc_day(trace["spans"][0]["startTime"])
    node.refresh("jaeger-*")
    indices = sorted(i["index"] for i in node.request(
        "GET", "_cat/indices/jaeger-*", params={"format": "json"}).json())
    assert f"jaeger-span-{day}" in indices and f"jaeger-service-{day}" in indices, indices

    docs = node.search("jaeger-span-*", {"query": {"terms": {"traceID": [trace_id, err_trace_id]}},
                                         "size": 10})["hits"]["hits"]
    assert {d["_index"] for d in docs} == {f"jaeger-span-{day}"}, docs
    by_span = {d["_source"]["spanID"]: d["_source"] for d in docs}
    assert len(by_span) == 3, docs
    for span in trace["spans"] + err_trace["spans"]:
        src = by_span[span["spanID"]]
        assert src["traceID"] == span["traceID"]
        assert src["operationName"] == span["operationName"]
        assert src["startTime"] == span["startTime"]
        assert src["startTimeMillis"] == span["startTime"] // 1000
        assert src["duration"] == span["duration"]
        assert src["process"]["serviceName"] == SERVICE
        # span.kind (and error) are always object fields, tag.span@kind, in Jaeger v2's
        # writer, even with tags_as_fields off; the other tags are the nested array.
        assert src["tag"]["span@kind"] == tags(span)["span.kind"][1], src
        assert "span.kind" not in {t["key"] for t in src["tags"] or []}, src
    assert by_span[err_span_id]["tag"] == {"span@kind": "client", "error": True}

    services = node.hits("jaeger-service-*", {"size": 100})
    assert {(s["serviceName"], s["operationName"]) for s in services} >= {
        (SERVICE, "GET /checkout"), (SERVICE, "compute-total"), (SERVICE, "POST /pay")}

    legacy = node.request("GET", "_template").json()
    for kind in ("span", "service"):
        assert legacy[f"jaeger-{kind}"]["index_patterns"] == [f"*jaeger-{kind}-*"], legacy
    # Legacy templates only: Jaeger uses composable ones (_index_template) for Elasticsearch 8
    # and later alone.
    index_templates = node.request("GET", "_index_template").json()
    assert not [t for t in index_templates["index_templates"]
                if "jaeger" in t["name"]], index_templates

    out = os.environ.get(SAMPLES_DIR_ENV[node.engine])
    if out:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        samples = {
            "indices": node.request("GET", "_cat/indices/jaeger-*",
                                    params={"format": "json"}).json(),
            "span-docs": docs,
            "service-docs": node.search("jaeger-service-*", {"size": 100})["hits"]["hits"],
            "templates": legacy,
            "index-templates": index_templates,
            "mappings": node.request("GET", "jaeger-*/_mapping").json(),
            "settings": node.request("GET", "jaeger-*/_settings").json(),
            "query-api": {"trace": trace, "error-trace": err_trace},
            "jaeger-config": j.config(),
        }
        for name, doc in samples.items():
            (out / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        (out / "README").write_text(
            f"Written by Jaeger {JAEGER_VERSION} (cmd/jaeger, {node.engine} backend, "
            f"no index prefix, create_mappings true, shards 1, replicas 0) into {node.title} "
            f"{node.version} by "
            f"tests/e2e/test_jaeger_server.py::test_search_store[{node.engine}].\n")


def test_search_store_index_prefix_and_create_mappings(jaeger_factory, search_store):
    """index_prefix names Jaeger's indices and templates; create_mappings false writes no
    template (the spans still go in)."""
    node = search_store
    j = jaeger_factory(name="prefixed", storage=node.engine, search_url=node.url,
                       index_prefix="jtest")
    trace_id, trace = post_and_check(j)
    day = utc_day(trace["spans"][0]["startTime"])
    node.refresh("jtest-*")
    indices = {i["index"] for i in node.request(
        "GET", "_cat/indices/jtest-*", params={"format": "json"}).json()}
    assert {f"jtest-jaeger-span-{day}", f"jtest-jaeger-service-{day}"} <= indices, indices
    legacy = node.request("GET", "_template/jtest-*").json()
    # A leading * in the patterns, prefix or none: jaeger-span's "*jaeger-span-*" matches the
    # prefixed indices as well.
    assert legacy["jtest-jaeger-span"]["index_patterns"] == ["*jtest-jaeger-span-*"], legacy
    assert legacy["jtest-jaeger-service"]["index_patterns"] == ["*jtest-jaeger-service-*"]

    nomap = jaeger_factory(name="nomappings", storage=node.engine, search_url=node.url,
                           index_prefix="jnomap", create_mappings=False)
    tid = secrets.token_hex(16)
    r = nomap.post_otlp_json(otlp_trace(tid, secrets.token_hex(8), secrets.token_hex(8)))
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 30
    while node.count("jnomap-jaeger-span-*") < 2:
        assert time.monotonic() < deadline, nomap.diagnostics()
        time.sleep(0.2)
    assert node.request("GET", "_template/jnomap*", ok=(404,)).json() == {}
