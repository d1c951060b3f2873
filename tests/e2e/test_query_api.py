"""The Jaeger query API, the SPM metrics API and the summaries, end to end.

One spanhouse (the dependency job every second, no lag) receives a corpus of
traces sent by the real OpenTelemetry SDK (emit_corpus.py); every endpoint is
then queried over HTTP and its JSON checked, shape and values, against what
the SDK says it sent. Hostile parameters get a 400 in Jaeger's error envelope,
with no SQL or engine text.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime, timezone
from urllib.parse import quote

import pytest

from conftest import (E2E_DIR, POLL_DEADLINE_S, SpanhouseFactory, clean_env, describe_response,
                      otlp_json_request, otlp_json_span)

KIND = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, request, backend):
    """A spanhouse and the spans the SDK sent it, once every trace is stored."""
    workdir = tmp_path_factory.mktemp("query_api")
    config = workdir / "spanhouse.yaml"
    config.write_text("dependencies:\n  interval_s: 1\n  lag_s: 0\n")
    factory = SpanhouseFactory(workdir, clickhouse=backend)
    request.module._spanhouse_factories = [factory]
    sh = factory(config=config)
    proc = subprocess.run([sys.executable, str(E2E_DIR / "emit_corpus.py"), "--endpoint",
                           sh.traces_url], capture_output=True, text=True, timeout=120,
                          env=clean_env())
    assert proc.returncode == 0, f"emit_corpus.py failed:\n{proc.stdout}\n{proc.stderr}"
    spans = json.loads(proc.stdout)["spans"]
    traces = {s["trace_id"] for s in spans}
    assert len(traces) == 16 and len(spans) == 64
    # Every trace searchable at once (recent spans are answered from memory), and every span
    # stored (the writer inserts within a second or so: the catalog and RED come from the store).
    r = sh.session.get(f"{sh.query_url}/api/traces", params={"service": "shop-web", "limit": 100},
                       timeout=30)
    assert r.status_code == 200, describe_response(r)
    assert {t["traceID"] for t in r.json()["data"]} == traces
    deadline = time.monotonic() + POLL_DEADLINE_S
    while True:
        stored = 0
        for service in ("shop-web", "shop-api"):
            r = sh.session.get(f"{sh.query_url}/api/spans/count",
                               params={"resource_attr": "service.name", "value": service},
                               timeout=30)
            stored += r.json()["count"] if r.status_code == 200 else 0
        if stored == len(spans):
            break
        assert time.monotonic() < deadline, f"stored spans {stored}/{len(spans)}"
        time.sleep(0.2)
    yield sh, spans
    factory.teardown()


def get(sh, path: str, params=None, status: int = 200) -> dict:
    r = sh.session.get(f"{sh.query_url}{path}", params=params, timeout=30)
    assert r.status_code == status, describe_response(r)
    assert r.headers.get("Content-Type", "").startswith("application/json"), describe_response(r)
    return r.json()


def envelope_ok(doc: dict) -> None:
    assert set(doc) == {"data", "total", "limit", "offset", "errors"}, doc
    assert doc["errors"] is None and doc["limit"] == 0 and doc["offset"] == 0, doc


def newest_first(spans, match) -> list[str]:
    """Trace ids with a span matching `match`, by that span's newest start, then id."""
    newest = {}
    for s in spans:
        if match(s):
            newest[s["trace_id"]] = max(newest.get(s["trace_id"], 0), s["start_ns"])
    return [t for t, _ in sorted(newest.items(), key=lambda e: (-e[1], e[0]))]


def check_trace_shape(trace: dict, spans: list) -> None:
    """A Jaeger trace: every sent span once, its fields and process as sent."""
    assert set(trace) == {"traceID", "spans", "processes", "warnings"}
    sent = {s["span_id"]: s for s in spans if s["trace_id"] == trace["traceID"]}
    assert {s["spanID"] for s in trace["spans"]} == set(sent)
    for js in trace["spans"]:
        want = sent[js["spanID"]]
        # flags only when not 0, as in Jaeger's answers
        assert set(js) - {"flags"} == {"traceID", "spanID", "operationName", "references",
                                       "startTime", "duration", "tags", "logs", "processID",
                                       "warnings"}
        assert js.get("flags", 1) != 0, js
        assert js["operationName"] == want["name"]
        assert js["startTime"] == want["start_ns"] // 1000
        assert js["duration"] == (want["end_ns"] - want["start_ns"]) // 1000
        refs = [r for r in js["references"] if r["refType"] == "CHILD_OF"]
        assert [r["spanID"] for r in refs] == ([want["parent_span_id"]]
                                               if want["parent_span_id"] else [])
        tags = {t["key"]: t["value"] for t in js["tags"]}
        assert tags.get("span.kind") == want["kind"]
        assert (tags.get("error") is True) == (want["status"]["code"] == "ERROR")
        process = trace["processes"][js["processID"]]
        assert process["serviceName"] == want["service"]


def search(sh, spans, params: dict, match) -> None:
    doc = get(sh, "/api/traces", params)
    envelope_ok(doc)
    want = newest_first(spans, match)
    assert [t["traceID"] for t in doc["data"]] == want[:params.get("limit", 100)], params
    for t in doc["data"]:
        check_trace_shape(t, spans)


def test_services_and_operations(corpus):
    sh, spans = corpus
    doc = get(sh, "/api/services")
    envelope_ok(doc)
    assert doc["data"] == ["shop-api", "shop-web"] and doc["total"] == 2
    for service in ("shop-web", "shop-api"):
        doc = get(sh, f"/api/services/{service}/operations")
        assert doc["data"] == sorted({s["name"] for s in spans if s["service"] == service})
    doc = get(sh, "/api/operations", {"service": "shop-api", "spanKind": "server"})
    envelope_ok(doc)
    assert doc["data"] == [{"name": n, "spanKind": "server"} for n in ["api.lookup", "api.write"]]
    doc = get(sh, "/api/operations", {"service": "shop-web"})
    assert {(o["name"], o["spanKind"]) for o in doc["data"]} == \
        {(s["name"], s["kind"]) for s in spans if s["service"] == "shop-web"}


def test_search_by_tags_status_duration_and_time(corpus):
    sh, spans = corpus
    web = lambda s: s["service"] == "shop-web"  # noqa: E731
    api = lambda s: s["service"] == "shop-api"  # noqa: E731
    search(sh, spans, {"service": "shop-web", "limit": 5}, web)
    search(sh, spans, {"service": "shop-web", "operation": "POST /cart"},
           lambda s: web(s) and s["name"] == "POST /cart")
    # A span attribute, in both of Jaeger's forms.
    search(sh, spans, {"service": "shop-web", "tag": "http.request.method:GET"},
           lambda s: web(s) and s["attributes"].get("http.request.method") == "GET")
    search(sh, spans, {"service": "shop-api", "tags": json.dumps({"app.tenant": "t-1"})},
           lambda s: api(s) and s["attributes"].get("app.tenant") == "t-1")
    # A resource attribute.
    search(sh, spans, {"service": "shop-api", "tag": "k8s.pod.name:api-0"}, api)
    search(sh, spans, {"service": "shop-api", "tag": "k8s.pod.name:api-9"}, lambda s: False)
    # A user field, by its path in the user_fields column.
    search(sh, spans, {"service": "shop-web", "tag": "user_fields.app.channel:android"},
           lambda s: web(s) and s["attributes"].get("app.channel") == "android")
    # Status, as Jaeger's error tag and as otel.status_code.
    failed = lambda s: api(s) and s["status"]["code"] == "ERROR"  # noqa: E731
    assert newest_first(spans, failed)
    search(sh, spans, {"service": "shop-api", "tag": "error:true"}, failed)
    search(sh, spans, {"service": "shop-api", "tag": "otel.status_code:ERROR"}, failed)
    # Durations (Jaeger duration strings) and a span kind together.
    search(sh, spans, {"service": "shop-web", "minDuration": "50ms", "maxDuration": "0.1s",
                       "tag": "span.kind:server"},
           lambda s: web(s) and s["kind"] == "server"
           and 50_000_000 <= s["end_ns"] - s["start_ns"] <= 100_000_000)
    # A time range in microseconds: the middle of the corpus.
    starts = sorted(s["start_ns"] for s in spans if web(s) and s["kind"] == "server")
    lo, hi = starts[4] // 1000, starts[10] // 1000
    search(sh, spans, {"service": "shop-web", "start": lo, "end": hi},
           lambda s: web(s) and lo * 1000 <= s["start_ns"] <= hi * 1000)


def test_lookup_by_ids(corpus):
    sh, spans = corpus
    ids = sorted({s["trace_id"] for s in spans})
    doc = get(sh, f"/api/traces/{ids[3]}")
    assert [t["traceID"] for t in doc["data"]] == [ids[3]]
    check_trace_shape(doc["data"][0], spans)
    missing = "00000000000000000000000000000abc"
    doc = get(sh, "/api/traces", [("traceID", ids[5]), ("traceID", "abc"), ("traceID", ids[0])])
    assert [t["traceID"] for t in doc["data"]] == [ids[5], ids[0]]
    assert doc["errors"] == [{"msg": "trace not found", "traceID": missing}]
    doc = get(sh, f"/api/traces/{missing}", status=404)
    assert doc["errors"][0]["code"] == 404 and doc["data"] is None


def test_dependencies(corpus):
    sh, spans = corpus
    # The dependency job computes each minute once, when it has ended (lag_s 0 here): the
    # corpus, sent with past times after the start, came too late for it. After a
    # restart the job starts again from where its table ends (empty: 15 minutes back).
    sh.restart()
    want = len({s["trace_id"] for s in spans})  # one shop-web -> shop-api call per trace
    deadline = time.monotonic() + 60
    while True:
        doc = get(sh, "/api/dependencies", {"endTs": int(time.time() * 1000) + 60_000,
                                            "lookback": 3_600_000})
        if doc["data"] == [{"parent": "shop-web", "child": "shop-api", "callCount": want}]:
            break
        assert time.monotonic() < deadline, f"edges {doc['data']}, want {want} calls"
        time.sleep(0.5)
    envelope_ok(doc)
    assert get(sh, "/api/dependencies", {"service": "nobody"})["data"] == []
    assert get(sh, "/api/dependencies", {"service": "shop-api"})["data"] == doc["data"]


def minute(ns: int) -> int:
    return ns // 1_000_000_000 // 60 * 60


def test_spm_metrics(corpus):
    sh, spans = corpus
    end_s = (int(time.time()) // 60 + 1) * 60
    lookback, step, window = 10 * 60, 60, 120
    params = {"service": "shop-api", "endTs": end_s * 1000, "lookback": lookback * 1000,
              "step": step * 1000, "ratePer": window * 1000}
    server = [s for s in spans if s["service"] == "shop-api" and s["kind"] == "server"]
    points = list(range(end_s - lookback, end_s + 1, step))

    def in_window(t):
        return [s for s in server if t - window <= minute(s["start_ns"]) < t]

    def series(doc, name, help_text):
        assert doc["name"] == name and doc["type"] == "GAUGE" and doc["help"] == help_text
        assert len(doc["metrics"]) == 1
        m = doc["metrics"][0]
        assert m["labels"] == [{"name": "service_name", "value": "shop-api"}]
        out = {}
        for p in m["metricPoints"]:
            t = int(datetime.strptime(p["timestamp"], "%Y-%m-%dT%H:%M:%SZ")
                    .replace(tzinfo=timezone.utc).timestamp())
            out[t] = p["gaugeValue"]["doubleValue"]
        return out

    calls = series(get(sh, "/api/metrics/calls", params), "service_call_rate",
                   "calls/sec, grouped by service")
    assert calls == {t: len(in_window(t)) / window for t in points}
    errors = series(get(sh, "/api/metrics/errors", params), "service_error_rate",
                    "error rate, computed as a fraction of errors/sec over calls/sec, grouped by "
                    "service")
    want_errors = {}
    for t in points:
        w = in_window(t)
        if w:
            want_errors[t] = sum(s["status"]["code"] == "ERROR" for s in w) / len(w)
    assert errors == want_errors
    assert any(v > 0 for v in errors.values())
    lat = series(get(sh, "/api/metrics/latencies", {**params, "quantile": 0.5}),
                 "service_latencies", "0.50th quantile latency, grouped by service")
    assert set(lat) == set(want_errors)
    for t, v in lat.items():
        d = sorted((s["end_ns"] - s["start_ns"]) / 1e6 for s in in_window(t))
        lo = d[max(0, math.ceil(0.5 * len(d)) - 1)]
        hi = d[min(len(d) - 1, math.floor(0.5 * len(d)))]
        assert lo - max(0.05 * lo, 1) <= v <= hi + max(0.05 * hi, 1), (t, v, d)
    # Per operation, and the minimum step.
    doc = get(sh, "/api/metrics/calls", {**params, "groupByOperation": "true"})
    assert doc["name"] == "service_operation_call_rate"
    assert sorted(m["labels"][1]["value"] for m in doc["metrics"]) == ["api.lookup", "api.write"]
    assert get(sh, "/api/metrics/minstep")["data"] == 60000


def test_summaries(corpus):
    sh, spans = corpus
    end_s = (int(time.time()) // 60 + 1) * 60
    lookback = 30 * 60
    params = {"endTs": end_s * 1000, "lookback": lookback * 1000}
    doc = get(sh, "/api/spanhouse/services/summary", params)
    envelope_ok(doc)
    assert [r["service"] for r in doc["data"]] == ["shop-api", "shop-web"]
    for row in doc["data"]:
        assert set(row) == {"service", "rate_per_s", "error_rate", "p50_ms", "p95_ms", "p99_ms",
                            "calls", "errors"}
        mine = [s for s in spans if s["service"] == row["service"] and s["kind"] == "server"]
        errs = sum(s["status"]["code"] == "ERROR" for s in mine)
        assert row["calls"] == len(mine) and row["errors"] == errs
        assert row["rate_per_s"] == pytest.approx(len(mine) / lookback)
        assert row["error_rate"] == pytest.approx(errs / len(mine))
        d = sorted((s["end_ns"] - s["start_ns"]) / 1e6 for s in mine)
        assert d[0] - 1 <= row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"] <= d[-1] * 1.05 + 1
    doc = get(sh, "/api/spanhouse/services/shop-api/operations/summary",
              {**params, "spanKind": "all"})
    got = {(r["operation"], r["span_kind"]): (r["calls"], r["errors"]) for r in doc["data"]}
    want = defaultdict(lambda: [0, 0])
    for s in spans:
        if s["service"] == "shop-api":
            want[(s["name"], s["kind"])][0] += 1
            want[(s["name"], s["kind"])][1] += s["status"]["code"] == "ERROR"
    assert got == {k: tuple(v) for k, v in want.items()}


HOSTILE_400 = [
    ("/api/traces", {"service": "shop-web", "limit": "100000000000000000000"}),
    ("/api/traces", {"service": "shop-web", "limit": "1501"}),
    ("/api/traces", {"service": "shop-web", "limit": "-1"}),
    ("/api/traces", {"service": "shop-web", "limit": "5; DROP TABLE spanhouse.spans"}),
    ("/api/traces", {"service": "shop-web", "start": "1' OR '1'='1"}),
    ("/api/traces", {"service": "shop-web", "end": "-5"}),
    ("/api/traces", {"service": "shop-web", "start": "\u0661\u0662"}),  # Arabic-Indic digits
    ("/api/traces", {"service": "shop-web", "minDuration": "-1ms"}),
    ("/api/traces", {"service": "shop-web", "maxDuration": "1ms/**/"}),
    ("/api/traces", {"service": "shop-web", "minDuration": "10 ms"}),
    ("/api/traces", {"service": "shop-web", "minDuration": "2s", "maxDuration": "1s"}),
    ("/api/traces", {"service": "shop-web", "tags": "{\"a\": 1}"}),
    ("/api/traces", {"service": "shop-web", "tags": "{'a': 'b'}"}),
    ("/api/traces", {"service": "shop-web", "tag": "no-colon"}),
    ("/api/traces", {"traceID": "'; --"}),
    ("/api/traces", {}),
    ("/api/operations", {}),
    ("/api/operations", {"service": "shop-web", "spanKind": "server' --"}),
    ("/api/dependencies", {"endTs": "now"}),
    ("/api/dependencies", {"lookback": "99999999999999999"}),
    ("/api/metrics/latencies", {"service": "shop-api", "quantile": "0.95' OR 1=1"}),
    ("/api/metrics/latencies", {"service": "shop-api"}),
    ("/api/metrics/calls", {}),
    ("/api/metrics/calls", {"service": "shop-api", "step": "-60000"}),
    ("/api/metrics/errors", {"service": "shop-api", "spanKind": "SPAN_KIND_EVIL"}),
    ("/api/metrics/errors", {"service": "shop-api", "groupByOperation": "yes please"}),
    ("/api/spanhouse/services/summary", {"lookback": "1h"}),
    ("/api/spanhouse/services/shop-api/operations/summary", {"endTs": "1e12"}),
]


@pytest.mark.parametrize("path,params", HOSTILE_400)
def test_hostile_parameters_are_400_in_jaegers_envelope(corpus, path, params):
    sh, _ = corpus
    r = sh.session.get(f"{sh.query_url}{path}", params=params, timeout=30)
    assert r.status_code == 400, describe_response(r)
    doc = r.json()
    assert doc["data"] is None and doc["total"] == 0 and len(doc["errors"]) == 1, doc
    assert doc["errors"][0]["code"] == 400 and doc["errors"][0]["msg"], doc
    # The message may quote the bad value back; nothing else of SQL or the engine.
    msg = doc["errors"][0]["msg"]
    for value in params.values():
        msg = msg.replace(value, "")
    for leak in ("SELECT", "DB::Exception", "Code:", "spanhouse.", "red_1m", "trace_index"):
        assert leak not in msg, describe_response(r)


def test_hostile_strings_are_values(corpus):
    """Quotes, comment markers and unicode in names are searched for, not executed."""
    sh, _ = corpus
    for path, params in [
            ("/api/traces", {"service": "shop-web' OR 1=1 --"}),
            ("/api/traces", {"service": "shop-web", "operation": "x'); DROP TABLE t; --"}),
            ("/api/traces", {"service": "shop-web", "tag": "http.request.method' --:GET"}),
            ("/api/traces", {"service": "shop-web", "tag": "user_fields.a') OR 1=1 --:x"}),
            ("/api/traces", {"service": "\u202eshop-web \\\t\"", "tags": "{\"\\\\'\": \"\\u0000\"}"}),
            ("/api/metrics/calls", {"service": "shop-api') OR 1=1 --"}),
            (f"/api/services/{quote(chr(39) + ';--', safe='')}/operations", {}),
            (f"/api/spanhouse/services/{quote('x/**/', safe='')}/operations/summary", {})]:
        r = sh.session.get(f"{sh.query_url}{path}", params=params, timeout=30)
        assert r.status_code == 200, describe_response(r)
        doc = r.json()
        assert doc.get("data", doc.get("metrics")) == [], describe_response(r)
    # Nothing was dropped or changed.
    assert len(get(sh, "/api/traces", {"service": "shop-web"})["data"]) == 16


def test_unknown_routes_and_methods(corpus):
    sh, _ = corpus
    r = sh.session.post(f"{sh.query_url}/api/services", timeout=30)
    assert r.status_code == 405 and r.headers.get("Allow") == "GET", describe_response(r)
    r = sh.session.get(f"{sh.query_url}/api/nothing", timeout=30)
    assert r.status_code == 404 and r.json()["errors"][0]["code"] == 404


def test_configured_row_limit_is_a_400(spanhouse_factory, tmp_path):
    """query.max_rows bounds every answer: past it, a 400 that says how to narrow it."""
    config = tmp_path / "limits.yaml"
    config.write_text("query:\n  max_rows: 100\n")
    sh = spanhouse_factory(config=config)
    now = time.time_ns()
    spans = [otlp_json_span("7d3c1b0a9e8f7d6c5b4a39281706f5e4", f"{i + 1:016x}", f"op-{i:03d}",
                            start_ns=now + i) for i in range(101)]
    assert sh.post_traces(otlp_json_request(spans[:100], service="limits")).status_code == 200
    # 100 operations: at the limit, answered.
    deadline = time.monotonic() + POLL_DEADLINE_S
    while len(get(sh, "/api/services/limits/operations")["data"] or []) < 100:
        assert time.monotonic() < deadline, "the 100 operations were not stored"
        time.sleep(0.2)
    assert sh.post_traces(otlp_json_request(spans[100:], service="limits")).status_code == 200
    while True:  # 101: over it, once the last one is stored
        r = sh.session.get(f"{sh.query_url}/api/services/limits/operations", timeout=30)
        if r.status_code != 200:
            break
        assert time.monotonic() < deadline, describe_response(r)
        time.sleep(0.2)
    assert r.status_code == 400, describe_response(r)
    assert "limit of 100 rows" in r.json()["errors"][0]["msg"], describe_response(r)
