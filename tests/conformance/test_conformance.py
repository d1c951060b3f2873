"""Conformance of spanhouse's Jaeger API with Jaeger v2 itself (v1.75.0, memory store).

The same spans go to both through one OTLP/HTTP fan-out: the rich traces of traces.py, the
real OpenTelemetry SDKs' traces of the client tests (Python, Node.js, Java), and loadgen's (the
fresh corpus). Then every read path of the Jaeger API is asked of both and the answers compared field
by field: /api/traces/{id}, searches (service, operation, tags, durations, limits, time ranges),
/api/services, /api/services/{s}/operations, /api/operations, /api/dependencies. Only the
deliberate differences of differences.py are normalised away; anything else that differs fails
the test, with the field's path.

spanhouse is asked twice: reading from ClickHouse (the embedded engine), and reading from the
OpenSearch node its secondary sink dual-writes in Jaeger's format (read source switched at run
time), so the three answers agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests

import differences
import traces
from compare import canonical_traces, diff
from conftest import SpanhouseFactory, spanhouse_bin
from jaeger_server import Jaeger
from otlp_fanout import Fanout
from roundtrip_check import run_emitter

E2E = Path(__file__).resolve().parent.parent / "e2e"
DEADLINE_S = 90.0
SOURCES = ("clickhouse", "opensearch")
LOADGEN_SPANS = 3000
LOADGEN_SAMPLE_PER_SERVICE = 4
# The Python SDK's traces start this long before they are sent (the rich traces 10 s, loadgen's
# now, the other SDKs' 60 s).
SENT_AGE_S = 5


@dataclass
class World:
    jaeger: Jaeger
    sh: object  # conftest.Spanhouse
    opensearch: object
    # trace id -> its span count (loadgen's: as spanhouse stored them)
    sent: dict[str, int] = field(default_factory=dict)
    loadgen_run: str = ""
    loadgen_spans: int = 0
    sent_end_s: float = 0.0
    loadgen_services: list[str] = field(default_factory=list)
    start_us: int = 0
    end_us: int = 0
    rich_first_ns: int = 0


def get(url: str, path: str, params=None) -> requests.Response:
    return requests.get(f"{url}{path}", params=params, timeout=60)


def ok_json(r: requests.Response, who: str) -> dict:
    assert r.status_code == 200, f"{who} {r.request.url}: HTTP {r.status_code} {r.text[:2000]}"
    return r.json()


def span_count(url: str, trace_id: str) -> int:
    r = get(url, f"/api/traces/{trace_id}")
    if r.status_code != 200:
        return 0
    return sum(len(t.get("spans") or []) for t in r.json().get("data") or [])


def wait_until(what: str, done, deadline_s: float = DEADLINE_S, diagnostics=lambda: "") -> None:
    deadline = time.monotonic() + deadline_s
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {deadline_s:.0f}s\n{diagnostics()}", pytrace=False)
        time.sleep(0.2)


def switch_source(world: World, source: str) -> None:
    r = requests.put(f"{world.sh.query_url}/api/admin/read-source", params={"to": source},
                     timeout=30)
    assert r.status_code == 200, f"read-source {source}: HTTP {r.status_code} {r.text}"


def send_everything(world: World, fan: Fanout) -> None:
    body, counts, first_ns, last_ns = traces.rich_request()
    r = requests.post(fan.url, data=body, headers={"Content-Type": "application/json"},
                      timeout=60)
    assert r.status_code == 200, f"rich traces: HTTP {r.status_code} {r.text}"
    world.sent.update(counts)
    world.rich_first_ns = first_ns

    # The OpenTelemetry SDKs of the client tests (tests/e2e/test_clients.py), OTLP/HTTP.
    node, jar = E2E / "clients" / "node", E2E / "clients" / "java" / "target" / "emit-otel.jar"
    emitters = [("python", [sys.executable, str(E2E / "emit_trace.py"), "--age-s",
                            str(SENT_AGE_S)], None)] * 3
    emitters += [(f"node {e}", ["node", str(node / "emit_otel.js"), "--encoding", e],
                  node / "node_modules") for e in ("proto", "json")]
    emitters += [("java", ["java", "-jar", str(jar), "--protocol", "http"], jar)]
    for name, cmd, needs in emitters:
        if needs is not None and not needs.exists():
            if os.environ.get("CI"):
                pytest.fail(f"{needs} is missing: scripts/setup.sh --tests makes it")
            continue
        sent = run_emitter(cmd + ["--endpoint", fan.url], name)
        world.sent[sent["trace_id"]] = len(sent["spans"])

    out = subprocess.run([spanhouse_bin(), "loadgen", "--endpoint", fan.url, "--rate", "3000",
                          "--spans", str(LOADGEN_SPANS), "--corpus", "fresh", "--seed", "29",
                          "--connections", "1", "--json", "-q"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"loadgen: {out.returncode}\n{out.stdout}\n{out.stderr}"
    report = json.loads(out.stdout.strip().splitlines()[-1])
    world.sent_end_s = time.time()
    world.loadgen_run = report["run_id"]
    world.loadgen_spans = report["spans_accepted"]
    assert world.loadgen_spans >= LOADGEN_SPANS, report
    assert fan.failed == {t: 0 for t in fan.failed}, f"the fan-out lost requests: {fan.failed}"


def wait_stored(world: World) -> None:
    sh, jg = world.sh, world.jaeger

    # loadgen's spans: every accepted one stored by spanhouse, then pick traces of each service.
    def loadgen_stored() -> bool:
        r = get(sh.query_url, "/api/spans/count",
                {"resource_attr": "loadgen.run_id", "value": world.loadgen_run})
        return r.status_code == 200 and r.json()["count"] >= world.loadgen_spans
    wait_until("spanhouse did not store loadgen's spans", loadgen_stored,
               diagnostics=sh.diagnostics)
    services = ok_json(get(sh.query_url, "/api/services"), "spanhouse")["data"]
    known = {traces.SHOP, traces.PAYMENTS, traces.WAREHOUSE, "frontend", "payment"}
    for s in services:
        if s in known or s.endswith("service-name") or s == "service-name-wrong-type":
            continue
        found = ok_json(get(sh.query_url, "/api/traces", {
            "service": s, "limit": LOADGEN_SAMPLE_PER_SERVICE,
            "tags": json.dumps({"loadgen.run_id": world.loadgen_run})}), "spanhouse")["data"]
        if found:
            world.loadgen_services.append(s)
        for t in found:
            world.sent[t["traceID"]] = len(t["spans"])

    # Every trace whole in both stores, and in OpenSearch through spanhouse.
    for source in SOURCES:
        switch_source(world, source)
        for tid, n in world.sent.items():
            wait_until(f"trace {tid} ({n} spans) not whole in spanhouse reading {source}",
                       lambda: span_count(sh.query_url, tid) >= n, diagnostics=sh.diagnostics)
    for tid, n in world.sent.items():
        wait_until(f"trace {tid} ({n} spans) not whole in Jaeger",
                   lambda: span_count(jg.query_url, tid) >= n, diagnostics=jg.diagnostics)


@pytest.fixture(scope="module")
def world(tmp_path_factory, opensearch, request):
    root = tmp_path_factory.mktemp("conformance")
    jaeger = Jaeger(root, storage="memory")
    factory = SpanhouseFactory(root)
    request.module._spanhouse_factories = [factory]
    config = root / "spanhouse.yaml"
    config.write_text(
        "secondary:\n  type: opensearch\n"
        f"opensearch:\n  urls: {opensearch.url}\n  index_prefix: conf\n"
        "  shards: 1\n  replicas: 0\n"
        "query:\n  fallback: false\n"
        "writer:\n  max_age_ms: 200\n"
        # The dependency job runs at start, then not again within the test: test_dependencies
        # restarts spanhouse once every minute of the sends has ended, and that start computes
        # them all (the job reads back first_lookback, 15 min, on an empty table).
        "dependencies:\n  interval_s: 3600\n  lag_s: 0\n")
    sh = factory(config=config)
    fan = Fanout([sh.traces_url, f"{jaeger.otlp_http_url}/v1/traces"])
    w = World(jaeger=jaeger, sh=sh, opensearch=opensearch)
    w.start_us = time.time_ns() // 1000 - 3_600_000_000
    try:
        send_everything(w, fan)
        # The OpenSearch sink's writes become searchable at the node's next refresh.
        wait_stored(w)
        w.end_us = time.time_ns() // 1000 + 60_000_000
        yield w
    finally:
        fan.stop()
        try:
            factory.teardown()
        finally:
            jaeger.stop()


@pytest.fixture(scope="module", params=SOURCES)
def source(request, world) -> str:
    switch_source(world, request.param)
    return request.param


def both(world: World, source: str, path: str, params=None) -> tuple[requests.Response,
                                                                      requests.Response]:
    jr = get(world.jaeger.query_url, path, params)
    sr = get(world.sh.query_url, path, params)
    if sr.status_code == 200:
        assert sr.headers.get("X-Spanhouse-Read-Source") == source, \
            f"{path}: answered by {sr.headers.get('X-Spanhouse-Read-Source')}, not {source}"
    return jr, sr


def report(problems: list[str], limit: int = 80) -> str:
    more = f"\n... and {len(problems) - limit} more" if len(problems) > limit else ""
    return "\n".join(problems[:limit]) + more


def compare_traces(jaeger_answer, sh_answer: dict, what: str) -> list[str]:
    """jaeger_answer: an answer, or its traces in canonical_traces form."""
    jt = jaeger_answer if "data" not in jaeger_answer else canonical_traces(jaeger_answer)
    st = canonical_traces(sh_answer)
    problems = []
    for tid in sorted(set(jt) | set(st)):
        if tid not in st:
            problems.append(f"{what}: trace {tid} only in Jaeger's answer")
            continue
        if tid not in jt:
            problems.append(f"{what}: trace {tid} only in spanhouse's answer")
            continue
        j, s = differences.normalise_trace(jt[tid], st[tid])
        problems += [f"{what} {tid}: {d}" for d in diff(j, s)]
    return problems


def test_trace_by_id(world, source):
    problems = []
    for tid in world.sent:
        jr, sr = both(world, source, f"/api/traces/{tid}")
        j, s = ok_json(jr, "jaeger"), ok_json(sr, "spanhouse")
        problems += compare_traces(j, s, "trace")
        problems += [f"trace {tid} envelope: {d}" for d in
                     diff(differences.envelope(j), differences.envelope(s))]
    assert not problems, report(problems)


def test_unknown_trace_id(world, source):
    jr, sr = both(world, source, f"/api/traces/{traces.trace_id()}")
    assert (jr.status_code, sr.status_code) == (404, 404), (jr.text, sr.text)
    problems = diff(jr.json(), sr.json())
    assert not problems, report(problems)


def test_services(world, source):
    jr, sr = both(world, source, "/api/services")
    j, s = ok_json(jr, "jaeger"), ok_json(sr, "spanhouse")
    problems = diff(differences.names(j), differences.names(s))
    assert not problems, report(problems)


def test_operations(world, source):
    jr, _ = both(world, source, "/api/services")
    problems = []
    for service in ok_json(jr, "jaeger")["data"]:
        path = f"/api/services/{urllib.parse.quote(service, safe='')}/operations"
        j, s = (ok_json(r, who) for r, who in zip(both(world, source, path),
                                                    ("jaeger", "spanhouse")))
        problems += [f"{path}: {d}" for d in
                     diff(differences.names(j), differences.names(s))]
        for kind in (None, "server", "client", "internal", "producer", "consumer"):
            params = {"service": service, **({"spanKind": kind} if kind else {})}
            j, s = (ok_json(r, who) for r, who in zip(both(world, source, "/api/operations",
                                                           params), ("jaeger", "spanhouse")))
            known = kind is not None or source != "opensearch"  # OPENSEARCH_OPERATION_KINDS
            problems += [f"/api/operations {params}: {d}" for d in
                         diff(differences.operations(j, known), differences.operations(s))]
    assert not problems, report(problems)


def search_cases(world: World) -> list[dict]:
    first_us = world.rich_first_ns // 1000
    # Checkouts 4..7 (their spans start 1.00 to 1.79 s after the first's; the 4th ends 1.85 s
    # after), none on an edge.
    window = {"start": first_us + 900_000, "end": first_us + 1_900_000}
    return [
        {"service": traces.SHOP},
        {"service": traces.SHOP, "operation": "POST /pay"},
        {"service": traces.SHOP, "operation": "GET /checkout/{id}",
         "tags": json.dumps({"url.path": "/checkout/3"})},
        {"service": traces.PAYMENTS, "tags": json.dumps({"error": "true"})},
        {"service": traces.PAYMENTS, "tags": json.dumps({"payment.retried": "true"})},
        {"service": traces.SHOP, "tags": json.dumps({"http.response.status_code": "200"})},
        {"service": traces.SHOP, "tags": json.dumps({"host.name": "shop-1"})},
        {"service": traces.SHOP, "tag": "flag:true"},
        {"service": traces.WAREHOUSE, "tags": json.dumps({"span.kind": "consumer"})},
        {"service": traces.SHOP, "minDuration": "48ms", "maxDuration": "48.005ms"},
        {"service": traces.PAYMENTS, "minDuration": "20ms"},
        {"service": traces.WAREHOUSE, "maxDuration": "1ms"},
        {"service": traces.SHOP, **window},
        {"service": traces.SHOP, "lookback": "1h"},
        {"service": "frontend"},
        {"service": "payment", "operation": "POST /payment"},
        {"service": "missing-service-name"},
        {"service": "no-such-service"},
        *[{"service": s, "tags": json.dumps({"loadgen.run_id": world.loadgen_run}),
           "limit": 1500} for s in world.loadgen_services[:3]],
    ]


def shown_tag(case: dict) -> tuple[str, str] | None:
    """The tag of a search that Jaeger's memory store cannot match (SYNTHETIC_TAG_SEARCH)."""
    tags = json.loads(case.get("tags", "{}"))
    shown = [(k, v) for k, v in tags.items() if k in differences.SHOWN_TAGS]
    assert len(shown) <= 1 and (not shown or len(tags) == 1), f"one shown tag alone: {case}"
    return shown[0] if shown else None


def test_search(world, source):
    problems = []
    for case in search_cases(world):
        # Every match: which of more matches than the limit a store picks is its own choice
        # (test_search_limit).
        params = {"start": world.start_us, "end": world.end_us, "limit": 1500, **case}
        if "lookback" in case:
            params.pop("start")
            params.pop("end")
        shown = shown_tag(case)
        jparams = {k: v for k, v in params.items() if not (shown and k == "tags")}
        jr = get(world.jaeger.query_url, "/api/traces", jparams)
        _, sr = both(world, source, "/api/traces", params)
        j, s = canonical_traces(ok_json(jr, "jaeger")), ok_json(sr, "spanhouse")
        if shown:
            j = differences.filter_by_shown_tag(j, case["service"], *shown)
        if not j and case["service"] != "no-such-service":
            problems.append(f"search {case}: Jaeger found nothing (the case tests nothing)")
        problems += compare_traces(j, s, f"search {case}")
    assert not problems, report(problems)


def test_search_limit(world, source):
    """With a limit below the matches, both answer that many traces, all of them matches."""
    problems = []
    for service, limit in ((traces.SHOP, 3), (traces.PAYMENTS, 1)):
        params = {"service": service, "start": world.start_us, "end": world.end_us}
        jr, sr = both(world, source, "/api/traces", {**params, "limit": 1500})
        everything = canonical_traces(ok_json(sr, "spanhouse"))
        jr, sr = both(world, source, "/api/traces", {**params, "limit": limit})
        j, s = canonical_traces(ok_json(jr, "jaeger")), canonical_traces(ok_json(sr, "spanhouse"))
        if (len(j), len(s)) != (limit, limit):
            problems.append(f"{service} limit {limit}: Jaeger {len(j)}, spanhouse {len(s)} traces")
        problems += [f"{service} limit {limit}: {t} is not a match" for t in s if t not in
                     everything]
    assert not problems, report(problems)


def test_dependencies(world, source):
    """The edges of every trace sent. spanhouse computes a minute's edges once it has ended (here
    lag_s 0): once every minute of the sends has, spanhouse is restarted and its dependency job
    computes them at start; the answers are compared until they agree or a deadline."""
    params = {"endTs": world.end_us // 1000, "lookback": 2 * 3_600_000}
    if source == "opensearch":
        # On OpenSearch the edges are the documents Jaeger's dependency job (spark-dependencies)
        # writes; none ran here, so Jaeger's own edges are written as that job would.
        edges = ok_json(get(world.jaeger.query_url, "/api/dependencies", params), "jaeger")["data"]
        # Stamped when the traces were sent, inside the range asked.
        at = time.gmtime(world.end_us / 1e6 - 60)
        world.opensearch.request(
            "PUT", f"conf-jaeger-dependencies-{time.strftime('%Y-%m-%d', at)}/_doc/conformance",
            {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", at), "dependencies": edges},
            params={"refresh": "true"})
    else:
        minute_over = (int(world.sent_end_s) // 60 + 1) * 60 + 1
        time.sleep(max(0.0, minute_over - time.time()))
        world.sh.restart()
    deadline = time.monotonic() + DEADLINE_S
    while True:
        jr, sr = both(world, source, "/api/dependencies", params)
        j, s = ok_json(jr, "jaeger"), ok_json(sr, "spanhouse")
        # SELF_EDGES: spanhouse's own job leaves them out; on OpenSearch the edges are the
        # documents as written, Jaeger's edges (self edges too).
        problems = diff(differences.dependencies(j, jaeger=source != "opensearch"),
                        differences.dependencies(s))
        if not problems or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert j["data"], "Jaeger found no edges (the test tests nothing)"
    assert not problems, report(problems)


def test_traces_by_ids(world, source):
    """/api/traces?traceID=a&traceID=b: the traces of several ids at once, one of them unknown."""
    ids = list(world.sent)[:5] + [traces.trace_id()]
    jr, sr = both(world, source, "/api/traces", {"traceID": ids})
    j, s = ok_json(jr, "jaeger"), ok_json(sr, "spanhouse")
    problems = compare_traces(j, s, "traceID=")
    problems += [f"envelope: {d}" for d in diff(differences.envelope(j), differences.envelope(s))]
    assert not problems, report(problems)
