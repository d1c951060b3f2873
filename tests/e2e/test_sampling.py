"""Head sampling end to end: consistent decisions by trace id in every process and across a
restart, and metrics that stay exact when most spans are not stored.

The expected decisions are computed here from the OpenTelemetry sampling rules (randomness:
the trace id's last 56 bits; threshold (1 - p) * 2^56 written with 4 significant hex digits),
independently of spanhouse's code.
"""

from __future__ import annotations

import random
import re
import signal
import time

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

from conftest import Spanhouse

PROTO = "application/x-protobuf"
S = 1_000_000_000
KIND = {"server": trace_pb2.Span.SPAN_KIND_SERVER, "client": trace_pb2.Span.SPAN_KIND_CLIENT}


def threshold(p: float) -> int:
    """The rejection threshold of probability p, rounded to 4 significant hex digits."""
    th = round((1 - p) * 2**56)
    idle = 0xF if th >= 2**55 else 0
    digits = f"{th:014x}"
    lead = len(digits) - len(digits.lstrip("f" if idle else "0"))
    drop = 14 - lead - 4
    if drop > 0:
        unit = 16**drop
        th = (th + unit // 2) // unit * unit
    return th


def kept(trace_id: bytes, p: float) -> bool:
    return int.from_bytes(trace_id[9:], "big") >= threshold(p)


def export(spans: list[dict]) -> bytes:
    """One OTLP/protobuf request; spans grouped by their service."""
    req = ExportTraceServiceRequest()
    by_service: dict[str, list[dict]] = {}
    for s in spans:
        by_service.setdefault(s["service"], []).append(s)
    for service, group in by_service.items():
        rs = req.resource_spans.add()
        a = rs.resource.attributes.add()
        a.key = "service.name"
        a.value.string_value = service
        ss = rs.scope_spans.add()
        ss.scope.name = "e2e-sampling"
        for s in group:
            sp = ss.spans.add()
            sp.trace_id = s["trace_id"]
            sp.span_id = s["span_id"]
            sp.parent_span_id = s.get("parent", b"")
            sp.name = s["name"]
            sp.kind = KIND[s["kind"]]
            sp.start_time_unix_nano = s["start"]
            sp.end_time_unix_nano = s["end"]
            if s.get("error"):
                sp.status.code = trace_pb2.Status.STATUS_CODE_ERROR
                sp.status.message = "boom"
            at = sp.attributes.add()
            at.key = "http.route"
            at.value.string_value = f"/item/{random.randrange(10**9)}"
    return req.SerializeToString()


def post(sh: Spanhouse, spans: list[dict], per_request: int = 5000) -> None:
    for i in range(0, len(spans), per_request):
        r = sh.post_traces(export(spans[i:i + per_request]), content_type=PROTO)
        assert r.status_code == 200, f"{r.status_code} {r.text}\n{sh.diagnostics()}"


def config(tmp_path, name: str, body: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(body)
    return path


def span_keys(sh: Spanhouse, service: str, start_ns: int, end_ns: int) -> list[tuple[str, str]]:
    r = sh.session.get(f"{sh.query_url}/api/admin/span-ids",
                       params={"service": service, "start": start_ns // 1000,
                               "end": end_ns // 1000, "limit": 1000000}, timeout=60)
    assert r.status_code == 200, r.text
    return [tuple(k) for k in r.json()["spans"]]


def wait_for_keys(sh: Spanhouse, service: str, want: set, start_ns: int, end_ns: int,
                  deadline_s: float = 120) -> None:
    """Until the stored spans of `service` are exactly `want` (each once)."""
    deadline = time.monotonic() + deadline_s
    while True:
        got = span_keys(sh, service, start_ns, end_ns)
        if len(got) == len(want) and set(got) == want:
            return
        assert len(got) == len(set(got)), f"{service}: a span stored twice"
        extra = set(got) - want
        assert not extra, f"{service}: {len(extra)} spans stored that sampling drops, e.g. " \
                          f"{sorted(extra)[:3]}"
        if time.monotonic() > deadline:
            pytest.fail(f"{service}: {len(got)} of {len(want)} kept spans stored after "
                        f"{deadline_s:.0f}s\n{sh.diagnostics()}", pytrace=False)
        time.sleep(0.5)


def metric(sh: Spanhouse, name: str, labels: str) -> float:
    text = sh.session.get(f"{sh.query_url}/metrics", timeout=30).text
    m = re.search(rf"^{re.escape(name)}{{{re.escape(labels)}}} (\S+)$", text, re.M)
    assert m, f"{name}{{{labels}}} not in /metrics"
    return float(m.group(1))


def hexid(b: bytes) -> str:
    return b.hex()


def test_head_sampling_keeps_whole_traces_in_every_process_and_across_a_restart(
        spanhouse_factory, tmp_path):
    """100k traces, 10%: each trace's root goes to one process, its child to another (killed
    and restarted half-way, its queue read back); both keep exactly the traces the rules say."""
    p = 0.1
    cfg = config(tmp_path, "head", "sampling:\n  head:\n    probability: 0.1\n")
    front = spanhouse_factory(name="front", config=cfg)
    back = spanhouse_factory(name="back", config=cfg)
    rng = random.Random(27)
    now = time.time_ns()
    start_ns = now - 600 * S
    roots, children = [], []
    for t in range(100_000):
        tid = rng.randbytes(16)
        t0 = start_ns + t * 5_000_000
        roots.append({"service": "front", "trace_id": tid, "span_id": rng.randbytes(8),
                      "name": "GET /", "kind": "server", "start": t0, "end": t0 + 3_000_000})
        children.append({"service": "back", "trace_id": tid, "span_id": rng.randbytes(8),
                         "parent": roots[-1]["span_id"], "name": "lookup", "kind": "server",
                         "start": t0 + 1_000_000, "end": t0 + 2_000_000})
    want_front = {(hexid(s["trace_id"]), hexid(s["span_id"])) for s in roots
                  if kept(s["trace_id"], p)}
    want_back = {(hexid(s["trace_id"]), hexid(s["span_id"])) for s in children
                 if kept(s["trace_id"], p)}
    share = len(want_front) / len(roots)
    # Binomial sd ~ 0.00095 at 100k traces: 5 sd.
    assert abs(share - p) < 0.0048, share

    post(front, roots)
    post(back, children[:50_000])
    back.stop(signal.SIGKILL)  # answered = in the durable queue; read back at start
    back.start(keep_ports=True)
    post(back, children[50_000:])
    end_ns = now + 60 * S
    wait_for_keys(front, "front", want_front, start_ns, end_ns)
    wait_for_keys(back, "back", want_back, start_ns, end_ns)
    kept_traces = {k[0] for k in want_front}
    assert kept_traces == {k[0] for k in want_back}

    # The kept spans say what kept them (ot=th:), and the counters and the API say the share.
    some = sorted(want_front)[0][0]
    doc = front.get_trace(some).json()
    tags = {t["key"]: t["value"] for t in doc["data"][0]["spans"][0]["tags"]}
    assert tags.get("w3c.tracestate") == f"ot=th:{threshold(p):014x}".rstrip("0"), tags
    assert metric(front, "spanhouse_sampling_traces_total",
                  'policy="head_probability",decision="kept"') == len(want_front)
    assert metric(front, "spanhouse_sampling_traces_total",
                  'policy="head_probability",decision="dropped"') == len(roots) - len(want_front)
    info = front.session.get(f"{front.query_url}/api/spanhouse/sampling", timeout=30).json()
    assert info["data"]["head"]["probability"] == p
    assert info["data"]["keptShare"] == pytest.approx(share)
    assert info["data"]["metricsCountEverySpan"] is True
    front.stop_ok()
    back.stop_ok()


def corpus(n_traces: int, now_ns: int, seed: int) -> list[dict]:
    """Traces of three services: web (server) -> api (server, 7% errors) -> store (server),
    durations log-normal, start times spread over minutes 12..4 before now."""
    rng = random.Random(seed)
    spans = []
    for _ in range(n_traces):
        tid = rng.randbytes(16)
        t0 = now_ns - rng.randrange(4 * 60 * S, 12 * 60 * S)
        web = rng.randbytes(8)
        api = rng.randbytes(8)
        d_api = int(rng.lognormvariate(16, 1))  # ~9 ms median
        d_store = int(d_api * rng.uniform(0.1, 0.9))
        spans.append({"service": "web", "trace_id": tid, "span_id": web, "name": "GET /cart",
                      "kind": "server", "start": t0, "end": t0 + d_api + 2_000_000})
        spans.append({"service": "api", "trace_id": tid, "span_id": api, "parent": web,
                      "name": rng.choice(["cart.get", "cart.put"]), "kind": "server",
                      "start": t0 + 1_000_000, "end": t0 + 1_000_000 + d_api,
                      "error": rng.random() < 0.07})
        spans.append({"service": "store", "trace_id": tid, "span_id": rng.randbytes(8),
                      "parent": api, "name": "SELECT", "kind": "server",
                      "start": t0 + 1_500_000, "end": t0 + 1_500_000 + d_store})
    return spans


def get(sh: Spanhouse, path: str, params=None) -> dict:
    r = sh.session.get(f"{sh.query_url}{path}", params=params, timeout=60)
    assert r.status_code == 200, f"{path}: {r.status_code} {r.text}"
    return r.json()


def wait_count(sh: Spanhouse, want: int, start_ns: int, end_ns: int,
               deadline_s: float = 120) -> None:
    """Until `want` spans are stored between the two times."""
    deadline = time.monotonic() + deadline_s
    while True:
        doc = get(sh, "/api/admin/span-counts", {"start": start_ns // 1000, "end": end_ns // 1000})
        got = sum(r["spans"] for r in doc["rows"])
        if got == want:
            return
        assert time.monotonic() < deadline, f"{got} spans stored, want {want}\n{sh.diagnostics()}"
        time.sleep(0.5)


def test_red_metrics_and_dependencies_equal_with_sampling_on_and_off(spanhouse_factory, tmp_path):
    """The same 20k traces to a process keeping 10% (the store 2%) and to one keeping all: rates,
    error counts, latency percentiles, operations and dependency edges agree."""
    jobs = "dependencies:\n  interval_s: 1\n  lag_s: 0\n"
    on = spanhouse_factory(name="on", config=config(
        tmp_path, "on", "sampling:\n  head:\n    probability: 0.1\n    services: store=0.02\n"
        + jobs))
    off = spanhouse_factory(name="off", config=config(tmp_path, "off", jobs))
    now = time.time_ns()
    spans = corpus(20_000, now, seed=2027)
    post(on, spans)
    post(off, spans)
    p = {"web": 0.1, "api": 0.1, "store": 0.02}
    stored = sum(kept(s["trace_id"], p[s["service"]]) for s in spans)
    assert 0.05 * len(spans) < stored < 0.1 * len(spans)
    wait_count(off, len(spans), now - 3600 * S, now + 60 * S)
    wait_count(on, stored, now - 3600 * S, now + 60 * S)
    # The dependency job computes a minute once it has ended; these spans came after it had
    # passed theirs, so a restart has it look back again (as test_query_api does).
    on.restart()
    off.restart()

    end_ms = (now // S // 60 + 1) * 60 * 1000
    window = {"endTs": end_ms, "lookback": 30 * 60 * 1000}
    deadline = time.monotonic() + 120
    while True:
        d_on = sorted((e["parent"], e["child"], e["callCount"])
                      for e in get(on, "/api/dependencies", window)["data"])
        d_off = sorted((e["parent"], e["child"], e["callCount"])
                       for e in get(off, "/api/dependencies", window)["data"])
        if d_off == [("api", "store", 20_000), ("web", "api", 20_000)] and d_on == d_off:
            break
        assert time.monotonic() < deadline, f"edges sampled {d_on}, unsampled {d_off}"
        time.sleep(0.5)

    assert get(on, "/api/services")["data"] == get(off, "/api/services")["data"]
    s_on = {r["service"]: r for r in get(on, "/api/spanhouse/services/summary", window)["data"]}
    s_off = {r["service"]: r for r in get(off, "/api/spanhouse/services/summary", window)["data"]}
    assert set(s_on) == set(s_off) == {"web", "api", "store"}
    errors = sum(1 for s in spans if s.get("error"))
    assert s_off["api"]["errors"] == errors and s_off["api"]["calls"] == 20_000
    for service, row in s_off.items():
        mine = s_on[service]
        assert (mine["calls"], mine["errors"]) == (row["calls"], row["errors"]), service
        for q in ("p50_ms", "p95_ms", "p99_ms"):
            # The same durations in t-digest states merged in another order.
            assert mine[q] == pytest.approx(row[q], rel=0.03), (service, q, mine[q], row[q])
    for service in ("web", "api", "store"):
        path = f"/api/spanhouse/services/{service}/operations/summary"
        ops_on = {(r["operation"], r["span_kind"]): (r["calls"], r["errors"])
                  for r in get(on, path, {**window, "spanKind": "all"})["data"]}
        ops_off = {(r["operation"], r["span_kind"]): (r["calls"], r["errors"])
                   for r in get(off, path, {**window, "spanKind": "all"})["data"]}
        assert ops_on == ops_off, service
        assert get(on, "/api/operations", {"service": service})["data"] == \
            get(off, "/api/operations", {"service": service})["data"]
    calls = {"service": "api", "endTs": end_ms, "lookback": 20 * 60 * 1000, "step": 60_000,
             "ratePer": 60_000}
    assert get(on, "/api/metrics/calls", calls) == get(off, "/api/metrics/calls", calls)
    assert get(on, "/api/metrics/errors", calls) == get(off, "/api/metrics/errors", calls)
    on.stop_ok()
    off.stop_ok()
