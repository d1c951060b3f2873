"""Moving off Elasticsearch/OpenSearch: spanhouse dual-writes every accepted span to ClickHouse
and, in Jaeger's document format, to a real search node; Jaeger v2 itself (v1.75.0, its
Elasticsearch/OpenSearch backend) is the reference reader and writer of that format. Every
test runs on OpenSearch 2.19 and on Elasticsearch 7.10.2 (`search_store`).

- Jaeger reads what spanhouse wrote: the same OTLP traces go to spanhouse (index prefix "sh") and
  to a Jaeger that writes them itself (prefix "jg"); the span documents are equal field for
  field, and Jaeger's query API answers the same for both.
- OpenSearch taken away for 60 s under load: ClickHouse keeps storing (and answering) as before;
  OpenSearch catches up once it is back; neither store holds a span twice.
- Reads switched before the backfill ends: a trace lookup is completed from the old store.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from conftest import otlp_attrs as attrs
from jaeger_server import jaeger_factory  # noqa: F401  (a fixture)

DEADLINE_S = 90.0


def write_config(path: Path, store, prefix: str, extra: str = "") -> Path:
    """spanhouse dual-writing to `store` (a search_store node), its section named for the
    engine (secondary.type elasticsearch or search_store)."""
    path.write_text(
        f"secondary:\n  type: {store.engine}\n"
        f"{store.engine}:\n  urls: {store.url}\n  index_prefix: {prefix}\n"
        "  shards: 1\n  replicas: 0\n"
        "writer:\n  max_age_ms: 300\n" + extra)
    return path


def rich_request(n_traces: int, seed: int, first_start_ns: int | None = None,
                 spread_ns: int = 0) -> tuple[bytes, dict[str, int]]:
    """OTLP/JSON with n_traces traces of 3 spans: every value type, events (one with an `event`
    attribute), links (one to the parent, one child_of), error and ok statuses, every kind, a
    scope with a version, trace state, and a resource without service.name. Returns the body and
    the span count per trace id. The first trace starts at first_start_ns (default: 5 s ago),
    each next one 1 ms later; a trace's 2nd and 3rd spans start 1 and 2 ms after its root, and
    spread_ns and twice that more."""
    now = time.time_ns() - 5_000_000_000 if first_start_ns is None else first_start_ns
    resource_spans = []
    counts: dict[str, int] = {}
    for t in range(n_traces):
        trace = f"{seed:08x}{t:08x}{(seed * 7919 + t) & 0xffffffff:08x}00000001"
        root, child, leaf = f"{t + 1:08x}aaaa0001", f"{t + 1:08x}aaaa0002", f"{t + 1:08x}aaaa0003"
        start = now + t * 1_000_000
        spans = [
            {"traceId": trace, "spanId": root, "name": f"GET /checkout/{t}", "kind": 2,
             "startTimeUnixNano": str(start),
             "endTimeUnixNano": str(start + 9_876_543 + 2 * spread_ns),
             "traceState": "ot=th:8", "flags": 1,
             "attributes": attrs({"http.method": "GET", "http.status_code": 200,
                                  "big": -9007199254740993, "ratio": 0.25, "cached": False,
                                  "blob": b"\x01\xab", "tags": ["a", "b"]}),
             "status": {"code": 1},
             "events": [{"timeUnixNano": str(start + 1000), "name": "started",
                         "attributes": attrs({"step": 1})},
                        {"timeUnixNano": str(start + 2000), "name": "renamed",
                         "attributes": attrs({"event": "own name"})}]},
            {"traceId": trace, "spanId": child, "parentSpanId": root, "name": "SELECT orders",
             "kind": 3, "startTimeUnixNano": str(start + 1_000_000 + spread_ns),
             "endTimeUnixNano": str(start + 3_000_001 + spread_ns),
             "attributes": attrs({"db.system": "postgresql", "db.statement": f"SELECT {t}"}),
             "status": {"code": 2, "message": "deadlock detected"},
             "links": [{"traceId": trace, "spanId": root},
                       {"traceId": "ffeeddccbbaa99887766554433221100",
                        "spanId": "0102030405060708",
                        "attributes": attrs({"opentracing.ref_type": "child_of"})}]},
        ]
        resource_spans.append({
            "resource": {"attributes": attrs({"service.name": f"shop-{t % 3}",
                                              "host.name": f"node-{t % 5}",
                                              "process.pid": 4000 + t})},
            "scopeSpans": [{"scope": {"name": "io.shop", "version": "1.2.3"}, "spans": spans}]})
        # A resource without service.name, a producer span of the same trace.
        resource_spans.append({
            "resource": {"attributes": attrs({"k8s.pod.name": f"pod-{t}"})},
            "scopeSpans": [{"scope": {"name": "bare"}, "spans": [
                {"traceId": trace, "spanId": leaf, "parentSpanId": child, "name": "publish",
                 "kind": 4, "startTimeUnixNano": str(start + 2_000_000 + 2 * spread_ns),
                 "endTimeUnixNano": str(start + 2_500_000 + 2 * spread_ns)}]}]})
        counts[trace] = 3
    return json.dumps({"resourceSpans": resource_spans}).encode(), counts


def count(search_store, pattern: str) -> int:
    """Documents in `pattern`, or -1 while the cluster cannot count them yet (an index just
    created has its shards allocated a moment later: 503)."""
    from opensearch_server import OpenSearchError
    try:
        return search_store.count(pattern)
    except OpenSearchError:
        return -1


def span_docs(search_store, prefix: str, trace: str) -> dict[str, dict]:
    hits = search_store.hits(f"{prefix}-jaeger-span-*",
                           {"size": 100, "query": {"term": {"traceID": trace}}})
    return {h["spanID"]: h for h in hits}


def normalized_trace(answer: dict) -> list[dict]:
    """Jaeger's /api/traces/{id} answer as its spans, each with its process inlined (process ids
    are numbered per answer), sorted by span id."""
    (trace,) = answer["data"]
    out = []
    for span in trace["spans"]:
        span = dict(span)
        span["process"] = trace["processes"][span.pop("processID")]
        out.append(span)
    return sorted(out, key=lambda s: s["spanID"])


def wait_until(what: str, done, deadline_s: float = DEADLINE_S, every: float = 0.5):
    deadline = time.time() + deadline_s
    last = None
    while time.time() < deadline:
        last = done()
        if last:
            return last
        time.sleep(every)
    pytest.fail(f"{what}: not within {deadline_s:.0f} s (last: {last!r})", pytrace=False)


def test_jaeger_reads_what_spanhouse_wrote(search_store, spanhouse_factory, jaeger_factory,
                                           tmp_path):
    body, counts = rich_request(6, seed=1)
    # Jaeger writes the reference documents itself (prefix jg); a second Jaeger reads
    # spanhouse's (prefix sh) with the templates spanhouse put, creating none of its own.
    writer = jaeger_factory("jaeger-writer", storage=search_store.engine,
                            search_url=search_store.url,
                            index_prefix="jg")
    sh = spanhouse_factory(config=write_config(tmp_path / "sh.yaml", search_store, "sh"))
    r = sh.post_traces(body)
    assert r.status_code == 200, r.text
    r = writer.post_otlp_json(body)
    assert r.status_code == 200, r.text
    total = sum(counts.values())
    wait_until("spanhouse's documents in OpenSearch",
               lambda: count(search_store, "sh-jaeger-span-*") == total)
    wait_until("Jaeger's own documents", lambda: count(search_store, "jg-jaeger-span-*") == total)

    # The templates spanhouse put are Jaeger's field types.
    mapping = search_store.request("GET", "/sh-jaeger-span-*/_mapping").json()
    (props,) = [m["mappings"]["properties"] for m in mapping.values()]
    assert props["tags"]["type"] == "nested" and props["startTimeMillis"]["type"] == "date"
    assert props["traceID"]["type"] == "keyword"

    for trace in counts:
        ours, theirs = span_docs(search_store, "sh", trace), span_docs(search_store, "jg", trace)
        assert sorted(ours) == sorted(theirs)
        for span_id, doc in theirs.items():
            assert ours[span_id] == doc, (
                f"span {trace}/{span_id}: spanhouse's document differs from Jaeger's\n"
                f"spanhouse: {json.dumps(ours[span_id], sort_keys=True)}\n"
                f"jaeger:    {json.dumps(doc, sort_keys=True)}")
    # Service documents: the same ids (Jaeger's hash of service and operation) and contents.
    # Both writers send service documents in bulks of their own after the spans', so wait for
    # them to be searchable (a refresh per look) before comparing.
    def services(prefix):
        search_store.refresh(f"{prefix}-jaeger-service-*")
        answer = search_store.search(f"{prefix}-jaeger-service-*", {"size": 100})
        return {h["_id"]: h["_source"] for h in answer["hits"]["hits"]}

    deadline = time.time() + DEADLINE_S
    while True:
        ours, theirs = services("sh"), services("jg")
        if (ours and ours == theirs) or time.time() > deadline:
            break
        time.sleep(0.5)
    assert ours == theirs

    reader = jaeger_factory("jaeger-reader", storage=search_store.engine,
                            search_url=search_store.url,
                            index_prefix="sh", create_mappings=False)
    for trace in counts:
        a = reader.get_trace(trace)
        b = writer.get_trace(trace)
        assert a.status_code == 200 and b.status_code == 200, (a.text, b.text)
        assert normalized_trace(a.json()) == normalized_trace(b.json())
    services = requests.get(f"{reader.query_url}/api/services", timeout=10).json()["data"]
    assert sorted(services) == sorted(
        requests.get(f"{writer.query_url}/api/services", timeout=10).json()["data"])
    assert {"shop-0", "shop-1", "shop-2"} <= set(services)


class Load(threading.Thread):
    """Small OTLP/JSON requests at a steady rate, each span new; records what was acknowledged."""

    def __init__(self, sh, rate: float, tag: int):
        super().__init__(daemon=True)
        self.sh, self.period, self.tag = sh, 1.0 / rate, tag
        self.acked: dict[str, int] = {}  # trace -> spans
        self.sent_at: dict[str, float] = {}
        self.failed = 0
        self.halt = threading.Event()

    def run(self):
        i = 0
        while not self.halt.is_set():
            body, counts = rich_request(2, seed=(self.tag << 20) + i)
            i += 1
            try:
                r = self.sh.post_traces(body, timeout=10)
                if r.status_code == 200:
                    self.acked.update(counts)
                    for t in counts:
                        self.sent_at[t] = time.time()
                else:
                    self.failed += 1
            except requests.RequestException:
                self.failed += 1
            self.halt.wait(self.period)


def metric(sh, name: str, labels: str = "") -> float:
    text = requests.get(f"{sh.query_url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if (line.startswith(name + "{") or line.startswith(name + " ")) and labels in line)


def test_opensearch_outage_holds_back_only_itself(search_store, spanhouse_factory, tmp_path):
    sh = spanhouse_factory(config=write_config(tmp_path / "sh.yaml", search_store, "outage"))
    load = Load(sh, rate=10, tag=2)
    load.start()
    time.sleep(10)
    search_store.stop()
    down_at = time.time()
    try:
        # ClickHouse stores and answers as before while OpenSearch is away.
        time.sleep(20)
        sent_while_down = [t for t, at in load.sent_at.items() if at > down_at + 1]
        assert len(sent_while_down) > 50, "the load stopped while OpenSearch was away"
        for trace in sent_while_down[-20:]:
            wait_until(f"trace {trace} in ClickHouse while OpenSearch is down",
                       lambda: sh.get_trace(trace).status_code == 200, deadline_s=15)
        assert metric(sh, "spanhouse_sink_lag_milliseconds", 'sink="opensearch"') > 5000
        assert metric(sh, "spanhouse_sink_items_retried_total", 'sink="opensearch"') > 0
        time.sleep(max(0.0, 60 - (time.time() - down_at)))
    finally:
        search_store.start()
    time.sleep(10)
    load.halt.set()
    load.join()
    assert load.failed == 0, f"{load.failed} requests were not acknowledged"
    total = sum(load.acked.values())
    wait_until("OpenSearch caught up", lambda: count(search_store, "outage-jaeger-span-*") == total,
               deadline_s=120, every=2)
    # No span twice in OpenSearch (ids are the span's; count per id) nor in ClickHouse.
    agg = search_store.search("outage-jaeger-span-*", {
        "size": 0, "aggs": {"traces": {"terms": {"field": "traceID", "size": 100000}}}})
    per_trace = {b["key"]: b["doc_count"] for b in agg["aggregations"]["traces"]["buckets"]}
    assert per_trace == load.acked
    for trace, n in list(load.acked.items())[::7]:
        doc = sh.get_trace(trace).json()
        ids = [s["spanID"] for s in doc["data"][0]["spans"]]
        assert len(ids) == n == len(set(ids)), trace
    assert metric(sh, "spanhouse_sink_rows_written_total", 'sink="opensearch"') >= total
    assert metric(sh, "spanhouse_sink_lag_milliseconds", 'sink="opensearch"') == 0


class Readers(threading.Thread):
    """Reads the given traces through spanhouse's query API in a loop; records every answer's
    status and the store that answered (X-Spanhouse-Read-Source)."""

    def __init__(self, sh, traces: dict[str, int]):
        super().__init__(daemon=True)
        self.sh, self.traces = sh, traces
        self.answers: list[tuple[float, int, str, str, bool]] = []
        self.halt = threading.Event()

    def run(self):
        session = requests.Session()
        while not self.halt.is_set():
            for trace, n in self.traces.items():
                try:
                    r = session.get(self.sh.trace_url(trace), timeout=30)
                    whole = r.status_code == 200 and len(r.json()["data"][0]["spans"]) == n
                    self.answers.append((time.time(), r.status_code,
                                         r.headers.get("X-Spanhouse-Read-Source", ""),
                                         r.headers.get("X-Spanhouse-Read-Fallback", ""), whole))
                except requests.RequestException as e:
                    self.answers.append((time.time(), 0, "", str(e), False))
                self.halt.wait(0.05)

    def sources_since(self, t: float) -> set[str]:
        return {a[2] for a in self.answers if a[0] >= t}


def test_read_switch_and_fallback_under_query_load(search_store, spanhouse_factory, tmp_path):
    config = tmp_path / "sh.yaml"
    write_config(config, search_store, "reads")
    sh = spanhouse_factory(config=config)
    body, counts = rich_request(4, seed=3)
    assert sh.post_traces(body).status_code == 200
    total = sum(counts.values())
    wait_until("OpenSearch holds the spans",
               lambda: count(search_store, "reads-jaeger-span-*") == total)
    for trace, n in counts.items():
        sh.wait_for_trace(trace, lambda d, n=n: len(d["data"][0]["spans"]) == n)
    admin = f"{sh.query_url}/api/admin/read-source"
    engine = search_store.engine  # the search store's name as a read source
    assert requests.get(admin, timeout=10).json() == {
        "read_from": "clickhouse", "fallback": True, "fill_gaps": True,
        "sources": ["clickhouse", engine]}

    readers = Readers(sh, counts)
    readers.start()
    try:
        time.sleep(2)
        assert readers.sources_since(0) == {"clickhouse"}
        # Switched at run time: the answers come from the search store, the same traces whole
        # (named either way: opensearch and elasticsearch both name it).
        other = "opensearch" if engine == "elasticsearch" else "elasticsearch"
        r = requests.put(f"{admin}?to={other}", timeout=10)
        assert r.status_code == 200 and r.json()["read_from"] == engine, r.text
        switched = time.time()
        time.sleep(2)
        assert readers.sources_since(switched + 0.5) == {engine}
        # The same answer from either store for a trace (the fields Jaeger's format keeps).
        trace = next(iter(counts))
        a = sh.get_trace(trace)
        assert a.headers["X-Spanhouse-Read-Source"] == engine
        assert {s["spanID"] for s in a.json()["data"][0]["spans"]} == {
            s["spanID"] for s in requests.get(sh.trace_url(trace), timeout=10).json()[
                "data"][0]["spans"]}
        # The store read from dies: ClickHouse answers, saying why.
        search_store.kill()
        killed = time.time()
        time.sleep(3)
        late = [a for a in readers.answers if a[0] >= killed + 0.5]
        assert late and {a[2] for a in late} == {"clickhouse"}
        assert all(f"{engine} failed" in a[3] for a in late), late[:3]
        metrics = requests.get(f"{sh.query_url}/metrics", timeout=10).text
        assert (f'spanhouse_query_read_fallbacks_total{{source="{engine}",reason="failed"}}'
                in metrics)
        search_store.start()
        back = time.time()
        # (It answers while start() still waits for the cluster's health.)
        wait_until("reads from OpenSearch again",
                   lambda: readers.sources_since(back + 0.5) == {engine})
        # A reload of the configuration file switches too (SIGHUP, no restart).
        write_config(config, search_store, "reads", "query:\n  read_from: clickhouse\n")
        sh.proc.send_signal(signal.SIGHUP)
        wait_until("reads switched back by the reload",
                   lambda: requests.get(admin, timeout=10).json()["read_from"] == "clickhouse")
        reloaded = time.time()
        time.sleep(2)
        assert readers.sources_since(reloaded + 0.5) == {"clickhouse"}
    finally:
        readers.halt.set()
        readers.join()
        if not search_store.running():
            search_store.start()
    failed = [a for a in readers.answers if a[1] != 200 or not a[4]]
    assert not failed, f"{len(failed)} of {len(readers.answers)} reads failed: {failed[:5]}"
    assert len(readers.answers) > 100
    bad = requests.put(f"{admin}?to=solr", timeout=10)
    assert bad.status_code == 400 and f"clickhouse, {engine}" in bad.text


def run_cli(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    from conftest import clean_env, spanhouse_bin
    return subprocess.run([spanhouse_bin()] + args, capture_output=True, text=True,
                          timeout=timeout, env=clean_env())


def jaeger_view(span: dict, processes: dict) -> dict:
    """A span of a Jaeger query-API answer, reduced to what both Jaeger and spanhouse show the
    same today: tags as a key -> (type, value) map without spanhouse's own additions (see the
    README's API section), references and logs as sets, the process by content."""
    own = {"otel.status_code", "otel.dropped_attributes_count", "otel.dropped_events_count",
           "otel.dropped_links_count"}
    tags = {t["key"]: (t["type"], t["value"]) for t in span["tags"] if t["key"] not in own}
    process = processes[span["processID"]]
    return {"spanID": span["spanID"], "operationName": span["operationName"],
            "startTime": span["startTime"], "duration": span["duration"], "tags": tags,
            "references": sorted((r["refType"], r["traceID"], r["spanID"])
                                 for r in span["references"]),
            "logs": sorted((log["timestamp"], json.dumps(sorted(
                (f["key"], f["type"], str(f["value"])) for f in log["fields"])))
                for log in span.get("logs") or []),
            "process": (process["serviceName"],
                        sorted((t["key"], t["type"], str(t["value"])) for t in process["tags"]))}


def trace_view(answer: dict) -> list[dict]:
    (trace,) = answer["data"]
    return sorted((jaeger_view(s, trace["processes"]) for s in trace["spans"]),
                  key=lambda s: s["spanID"])


def assert_same_trace(ours: requests.Response, theirs: requests.Response, trace: str):
    """spanhouse's answer for a trace is Jaeger's, as trace_view shows them; names what differs."""
    assert ours.status_code == 200 and theirs.status_code == 200, (trace, ours.text, theirs.text)
    a, b = trace_view(ours.json()), trace_view(theirs.json())
    assert [s["spanID"] for s in a] == [s["spanID"] for s in b], trace
    for x, y in zip(a, b):
        diff = {k: (x[k], y[k]) for k in x if x[k] != y[k]}
        if "tags" in diff:
            tx, ty = diff.pop("tags")
            diff["tags"] = {k: (tx.get(k), ty.get(k)) for k in set(tx) | set(ty)
                            if tx.get(k) != ty.get(k)}
        assert not diff, f"{trace}/{x['spanID']}: spanhouse vs Jaeger: {diff}"


def stored_spans(sh, now: float) -> int:
    """Rows of ClickHouse's spans table in the hour before `now` (each copy of a span counts)."""
    r = sh.session.get(f"{sh.query_url}/api/admin/span-counts",
                       params={"source": "clickhouse", "start": int(now - 3600) * 1_000_000,
                               "end": int(now + 60) * 1_000_000}, timeout=60)
    assert r.status_code == 200, r.text
    return sum(row["spans"] for row in r.json()["rows"])


def test_backfill_resumes_after_a_kill_and_adds_nothing_twice(search_store, spanhouse_factory,
                                                             jaeger_factory, tmp_path):
    # History written by Jaeger itself, before spanhouse existed.
    jaeger = jaeger_factory("jaeger-history", storage=search_store.engine,
                            search_url=search_store.url,
                            index_prefix="hist")
    counts: dict[str, int] = {}
    for seed in range(40):
        body, c = rich_request(10, seed=100 + seed)
        assert jaeger.post_otlp_json(body).status_code == 200
        counts.update(c)
    total = sum(counts.values())
    wait_until("Jaeger wrote the history",
               lambda: count(search_store, "hist-jaeger-span-*") == total)
    sh = spanhouse_factory()
    now = time.time()
    checkpoint = tmp_path / "backfill.checkpoint"
    args = ["backfill", "--from", search_store.engine, "--opensearch", search_store.url,
            "--index-prefix", "hist", "--server", sh.query_url,
            "--start", str(int(now - 3600)), "--end", str(int(now + 60)),
            "--checkpoint", str(checkpoint), "--page-spans", "7", "--parallel", "4"]

    # Killed half-way, while its four workers read chunks of their own: once the checkpoint
    # says a quarter was imported.
    from conftest import clean_env, spanhouse_bin
    proc = subprocess.Popen([spanhouse_bin()] + args, stderr=subprocess.PIPE, text=True,
                            env=clean_env())
    saved: dict = {}
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            saved = json.loads(checkpoint.read_text())
        except (OSError, ValueError):
            saved = {}
        if saved.get("read", 0) >= total // 4:
            proc.kill()
            break
        time.sleep(0.01)
    proc.wait(timeout=30)
    err = proc.stderr.read()
    assert proc.returncode == -9, err
    saved = json.loads(checkpoint.read_text())
    assert 0 < saved["read"] < total and not saved["done"], saved
    assert saved["total"] == total and len(saved["chunks"]) > 4
    started = [k for k in saved["chunks"] if k["after"] is not None or k["done"]]
    assert len(started) > 1, saved["chunks"]  # several chunks were read at once

    # Resumed (with another --parallel): the rest, nothing twice.
    r = run_cli(args[:-1] + ["3"])
    assert r.returncode == 0, r.stderr + r.stdout
    assert "resuming" in r.stderr and "spans read" in r.stderr, r.stderr
    done = json.loads(checkpoint.read_text())
    assert done["done"] and all(k["done"] for k in done["chunks"]), done
    # Pages imported but not yet in the checkpoint at the kill were read again, and found stored.
    assert done["read"] >= total and done["imported"] <= total
    assert done["imported"] + done["already_stored"] == done["read"]
    # Every span stored once: the rows of the spans table (done means stored).
    assert stored_spans(sh, now) == total
    for trace, n in counts.items():
        doc = sh.wait_for_trace(trace, lambda d, n=n: len(d["data"][0]["spans"]) >= n)
        ids = [s["spanID"] for s in doc["data"][0]["spans"]]
        assert len(ids) == len(set(ids)) == n, trace

    # A second run with the checkpoint does nothing; without it, it reads all and adds nothing.
    r = run_cli(args)
    assert r.returncode == 0 and "already complete" in r.stdout, r.stdout + r.stderr
    checkpoint.unlink()
    r = run_cli(args)
    assert r.returncode == 0, r.stderr
    again = json.loads(checkpoint.read_text())
    assert again["imported"] == 0 and again["already_stored"] == total
    assert stored_spans(sh, now) == total

    # One worker stores the same as four: another spanhouse, backfilled with --parallel 1.
    one = spanhouse_factory("spanhouse-one")
    one_args = ["backfill", "--from", search_store.engine, "--url", search_store.url,
                "--index-prefix", "hist", "--server", one.query_url,
                "--start", str(int(now - 3600)), "--end", str(int(now + 60)),
                "--checkpoint", str(tmp_path / "one.checkpoint"), "--page-spans", "50",
                "--parallel", "1"]
    r = run_cli(one_args)
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads((tmp_path / "one.checkpoint").read_text())["imported"] == total
    assert stored_spans(one, now) == total
    for trace in counts:
        a, b = sh.get_trace(trace), one.get_trace(trace)
        assert a.status_code == 200 and b.status_code == 200, trace
        assert normalized_trace(a.json()) == normalized_trace(b.json()), trace

    # The same page imported by six clients at once (a page sent again while its first send is
    # in flight): each span stored once, counted imported once.
    race = spanhouse_factory("spanhouse-race")
    docs = search_store.hits("hist-jaeger-span-*", {"size": 300, "sort": [{"startTime": "asc"}]})
    page = "".join(json.dumps(d) + "\n" for d in docs).encode()

    def send(answers: list) -> None:
        r = requests.post(f"{race.query_url}/api/admin/import", data=page, timeout=120,
                          headers={"Content-Type": "application/x-ndjson"})
        answers.append((r.status_code, r.json()))

    answers: list = []
    senders = [threading.Thread(target=send, args=(answers,)) for _ in range(6)]
    for t in senders:
        t.start()
    for t in senders:
        t.join()
    assert [a[0] for a in answers] == [200] * 6, answers
    assert sum(a[1]["imported"] for a in answers) == len(docs), answers
    assert all(a[1]["imported"] + a[1]["already_stored"] == len(docs) for a in answers), answers
    r = requests.post(f"{race.query_url}/api/admin/import?wait=stored", data=b"", timeout=120)
    assert r.status_code == 200 and r.json()["received"] == 0, r.text
    assert stored_spans(race, now) == len(docs)

    # The imported traces are what Jaeger answers for them.
    for trace in list(counts)[:40]:
        assert_same_trace(sh.get_trace(trace), jaeger.get_trace(trace), trace)

    # A checkpoint of the single-cursor format (before chunks) resumes after its position.
    hits = search_store.search("hist-jaeger-span-*", {
        "size": 1, "from": total // 2,
        "sort": [{"startTime": "asc"}, {"traceID": "asc"}, {"spanID": "asc"}]})["hits"]["hits"]
    checkpoint.write_text(json.dumps({
        "from": "opensearch", "index": "hist-jaeger-span-*-*-*",
        "start_us": int(now - 3600) * 1_000_000, "end_us": int(now + 60) * 1_000_000,
        "after": hits[0]["sort"], "pages": 3, "read": total // 2 + 1, "imported": 0,
        "already_stored": total // 2 + 1, "invalid": 0, "done": False}))
    r = run_cli(args)
    assert r.returncode == 0, r.stderr + r.stdout
    rest = json.loads(checkpoint.read_text())
    assert rest["done"] and rest["imported"] == 0
    assert rest["read"] == total, rest  # the half before the position was not read again

    # Bad input is refused clearly.
    r = run_cli(["backfill", "--from", "mysql", "--opensearch", search_store.url,
                 "--start", "1", "--end", "2", "--server", sh.query_url])
    assert r.returncode == 2 and "--from" in r.stderr
    r = run_cli(["backfill", "--from", search_store.engine, "--opensearch", search_store.url,
                 "--start", "yesterday", "--end", "2", "--server", sh.query_url])
    assert r.returncode == 2 and "--start" in r.stderr
    r = run_cli(args[:args.index("--start")] + ["--start", "1", "--end", "2"] +
                args[args.index("--checkpoint"):])
    assert r.returncode == 2 and "another backfill" in r.stderr, r.stderr


def test_reads_switched_before_the_backfill_ends_are_completed_from_the_old_store(
        search_store, spanhouse_factory, jaeger_factory, tmp_path):
    store = search_store  # the old store, of whichever engine (the backfill's --from names either)
    # History written by Jaeger itself: traces whose root and child start before `cut` and whose
    # third span starts after it, and traces wholly after it.
    cut = int(time.time()) - 600
    jaeger = jaeger_factory("jaeger-gap", storage=store.engine, search_url=store.url,
                            index_prefix="gap")
    body, halved = rich_request(6, seed=400, first_start_ns=(cut - 2) * 10**9, spread_ns=10**9)
    assert jaeger.post_otlp_json(body).status_code == 200
    body, later = rich_request(3, seed=401, first_start_ns=(cut + 5) * 10**9)
    assert jaeger.post_otlp_json(body).status_code == 200
    total = sum(halved.values()) + sum(later.values())
    wait_until("Jaeger wrote the history", lambda: count(store, "gap-jaeger-span-*") == total)

    # Dual-writing to that store, reading ClickHouse; the backfill up to `cut` copies two spans
    # of each halved trace and nothing of the later ones.
    config = write_config(tmp_path / "sh.yaml", store, "gap")
    sh = spanhouse_factory(config=config)
    admin = f"{sh.query_url}/api/admin/read-source"
    state = requests.get(admin, timeout=10).json()
    assert state["read_from"] == "clickhouse" and state["fill_gaps"] is True, state
    (other,) = [s for s in state["sources"] if s != "clickhouse"]
    r = run_cli(["backfill", "--from", store.engine, "--opensearch", store.url,
                 "--index-prefix", "gap", "--server", sh.query_url, "--start", str(cut - 3600),
                 "--end", str(cut), "--checkpoint", str(tmp_path / "backfill.checkpoint")])
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads((tmp_path / "backfill.checkpoint").read_text())["imported"] == 2 * len(halved)

    # Every trace whole, as Jaeger answers it, saying what came from the old store.
    for trace, added in [(t, 1) for t in halved] + [(t, 3) for t in later]:
        ours = sh.get_trace(trace)
        assert_same_trace(ours, jaeger.get_trace(trace), trace)
        assert ours.headers.get("X-Spanhouse-Read-Source") == "clickhouse", ours.headers
        assert ours.headers.get("X-Spanhouse-Read-Completed") == f"{other}; spans={added}", (
            trace, ours.headers)
    assert metric(sh, "spanhouse_query_read_completed_spans_total",
                  f'source="{other}"') == len(halved) + 3 * len(later)
    # A search finds what ClickHouse holds (the halved traces), each whole.
    search = requests.get(f"{sh.query_url}/api/traces", timeout=30, params={
        "service": "shop-0", "start": (cut - 60) * 10**6, "end": (cut + 60) * 10**6,
        "limit": 100})
    assert search.status_code == 200, search.text
    found = {t["traceID"]: len(t["spans"]) for t in search.json()["data"]}
    assert found == {t: 3 for i, t in enumerate(halved) if i % 3 == 0}, found
    assert search.headers.get("X-Spanhouse-Read-Source") == "clickhouse"
    assert search.headers.get("X-Spanhouse-Read-Completed") == f"{other}; spans={len(found)}"

    # Off at run time: exactly what ClickHouse holds.
    r = requests.put(admin, params={"fill_gaps": "false"}, timeout=10)
    assert r.status_code == 200 and r.json()["fill_gaps"] is False, r.text
    for trace in halved:
        ours = sh.get_trace(trace)
        assert ours.status_code == 200, ours.text
        assert len(ours.json()["data"][0]["spans"]) == 2, trace
        assert "X-Spanhouse-Read-Completed" not in ours.headers
    for trace in later:
        assert sh.get_trace(trace).status_code == 404, trace
    assert requests.put(admin, params={"fill_gaps": "maybe"}, timeout=10).status_code == 400
    # On again by a reload of the configuration file (SIGHUP).
    write_config(config, store, "gap", "query:\n  fill_gaps: on\n")
    sh.proc.send_signal(signal.SIGHUP)
    wait_until("fill_gaps on after the reload",
               lambda: requests.get(admin, timeout=10).json()["fill_gaps"] is True)
    trace = next(iter(later))
    assert_same_trace(sh.get_trace(trace), jaeger.get_trace(trace), trace)


def test_reconcile_agrees_then_names_deleted_and_altered_spans(search_store, spanhouse_factory,
                                                               tmp_path):
    sh = spanhouse_factory(config=write_config(tmp_path / "sh.yaml", search_store, "rec"))
    counts: dict[str, int] = {}
    for seed in range(3):
        body, c = rich_request(8, seed=200 + seed)
        assert sh.post_traces(body).status_code == 200
        counts.update(c)
    total = sum(counts.values())
    wait_until("the search store holds the spans",
               lambda: count(search_store, "rec-jaeger-span-*") == total)
    for trace, n in counts.items():
        sh.wait_for_trace(trace, lambda d, n=n: len(d["data"][0]["spans"]) == n)
    now = time.time()
    report = tmp_path / "report.json"
    args = ["reconcile", "--from", search_store.engine, "--to", "clickhouse",
            "--server", sh.query_url, "--start", str(int(now - 3600)), "--end",
            str(int(now + 60)), "--bucket", "1h",
            "--samples", str(10 * total), "--seed", "7", "--json", str(report)]
    r = run_cli(args)
    assert r.returncode == 0, r.stdout + r.stderr
    agreed = json.loads(report.read_text())
    assert agreed["agree"] and agreed["spans"] == {"from": total, "to": total}
    assert agreed["samples"] == total  # every span drawn at least once
    assert "the stores agree" in r.stdout and "reconcile:" in r.stderr  # a report, and progress

    # Two spans deleted from OpenSearch, a field of a third altered, on purpose.
    traces = list(counts)
    deleted = [(traces[0], "00000001aaaa0002"), (traces[5], "00000006aaaa0003")]
    for trace, span in deleted:
        search_store.delete_by_query("rec-jaeger-span-*", {"bool": {"filter": [
            {"term": {"traceID": trace}}, {"term": {"spanID": span}}]}})
    altered_trace, altered_span = traces[9], "00000002aaaa0001"
    (hit,) = search_store.search("rec-jaeger-span-*", {"query": {"bool": {"filter": [
        {"term": {"traceID": altered_trace}}, {"term": {"spanID": altered_span}}]}}})[
        "hits"]["hits"]
    doc = dict(hit["_source"], operationName="tampered")
    search_store.request("PUT", f"/{hit['_index']}/_doc/{hit['_id']}", doc)
    search_store.refresh("rec-jaeger-span-*")
    r = run_cli(args)
    assert r.returncode == 1, r.stdout + r.stderr
    found = json.loads(report.read_text())
    assert not found["agree"]
    assert found["spans"] == {"from": total - 2, "to": total}
    only_in_clickhouse = sorted(s for cell in found["differing_cells"]
                                for s in cell["only_in_to"])
    assert only_in_clickhouse == sorted(f"{t}/{s}" for t, s in deleted)
    assert all(not cell["only_in_from"] for cell in found["differing_cells"])
    diffs = {(d["trace"], d["span"], d["field"]): (d["from"], d["to"])
             for d in found["field_differences"]}
    assert diffs == {(altered_trace, altered_span, "operationName"): (
        '"tampered"', '"GET /checkout/1"')}, diffs
    assert "the stores DIFFER" in r.stdout and "tampered" in r.stdout
    # Within a tolerance that covers the deleted spans' cells, only the altered field remains.
    r = run_cli(args[:-2] + ["--tolerance", "0.5"])
    assert r.returncode == 1 and "0 of" in r.stdout, r.stdout


def test_documents_opensearch_refuses_go_to_the_dead_letter(search_store, spanhouse_factory,
                                                           tmp_path):
    # An index whose mapping cannot take Jaeger's documents (operationName as a number).
    body, counts = rich_request(2, seed=300)
    first_start = min(int(s["startTimeUnixNano"]) for rs in json.loads(body)["resourceSpans"]
                      for ss in rs["scopeSpans"] for s in ss["spans"])
    day = time.strftime("%Y-%m-%d", time.gmtime(first_start / 1e9))
    search_store.create_index(f"dl-jaeger-span-{day}", {
        "settings": {"number_of_replicas": 0},
        "mappings": {"properties": {"operationName": {"type": "long"}}}})
    sh = spanhouse_factory(config=write_config(tmp_path / "sh.yaml", search_store, "dl"))
    assert sh.post_traces(body).status_code == 200
    total = sum(counts.values())
    for trace, n in counts.items():  # ClickHouse stores them all
        sh.wait_for_trace(trace, lambda d, n=n: len(d["data"][0]["spans"]) == n)
    wait_until("every refused span dead-lettered", lambda: metric(
        sh, "spanhouse_sink_dead_letter_rows_total", 'sink="opensearch"') == total)
    dead = sh.data_dir / "dead-letter" / "opensearch.ndjson"
    lines = [json.loads(line) for line in dead.read_text().splitlines()]
    spans = [line for line in lines if "jaeger-span" in line["action"]["create"]["_index"]]
    assert len(spans) == total
    assert all("HTTP 400" in line["error"] and "operationName" in line["error"] for line in spans)
    assert {line["document"]["traceID"] for line in spans} == set(counts)
    # Given up for good, not retried: nothing waits for OpenSearch.
    wait_until("nothing waiting", lambda: metric(
        sh, "spanhouse_durable_queue_spilled_waiting_requests", 'sink="opensearch"') == 0
        and metric(sh, "spanhouse_sink_lag_milliseconds", 'sink="opensearch"') == 0)
    assert metric(sh, "spanhouse_sink_items_retried_total", 'sink="opensearch"') == 0
    # (A restart hands the OpenSearch sink the records of the queue's unreleased segments
    # again, as it does not seal its writes: written again they are 409s, refused again they
    # are dead-lettered again; README's known limit.) ClickHouse keeps every span once.
    sh.restart()
    for trace, n in counts.items():
        doc = sh.wait_for_trace(trace, lambda d, n=n: len(d["data"][0]["spans"]) == n)
        ids = [s["spanID"] for s in doc["data"][0]["spans"]]
        assert len(ids) == len(set(ids)) == n
    assert count(search_store, "dl-jaeger-span-*") == 0
