"""Retried requests: a span sent again is stored, counted and shown once.

An exporter that gets no answer (a timeout, a broken connection, a restart of spanhouse in
between) sends the same request again, byte for byte. spanhouse drops the spans an accepted
request already had at intake, before the durable queue (src/pipeline/dedup/dedup_index.h,
src/receivers/intake/intake.cc), with its index of keys refilled from files at start, so a retry
after a restart is caught too; the query API shows a span a store holds twice only once
(DropRepeatedSpans in src/model/span_batch.h). What these tests check, end to end:

- test_retried_request_is_kept_once (OTLP/HTTP protobuf, OTLP/gRPC and Zipkin v2 JSON; the
  same request 2 times and 5 times, restarts between some of the sends, on one data dir):
  every send is answered as accepted (OTLP: 200 with rejected_spans 0, and from the first
  retry on the "N spans were accepted before (a retried request): kept once" message);
  each trace shows each span exactly once, right after the sends (the store's answer merged
  with the recent index in memory) and after a last restart (the store's alone); the recent
  index holds each span once; the receiver's duplicate counter adds up to (sends - 1) x
  spans; the store holds each span once (/api/spans/count); the RED summary and the
  dependency edges count each call once. All of these but the trace lookups (which hide a
  repeated span whatever the store holds) fail when dedup is off (dedup.enabled: false): the
  retries are then held, stored and counted again.
- test_zipkin_shared_span_*: a Zipkin shared span (client and server halves with one span
  id, different content) is two spans: both stored once, both shown (by the store, and right
  after the sends by the recent index alone), and a retry of them adds nothing.
- test_dual_write_reconcile_after_retries: with OpenSearch as the second store, a request sent
  3 times leaves both stores with the same spans: `spanhouse reconcile` finds no difference.

Every test makes fresh random trace and span ids and its own data dir, and waits by polling
with deadlines; nothing asserts a duration.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import grpc
import pytest
import requests

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from conftest import (POLL_DEADLINE_S, clean_env, describe_response, spanhouse_bin,
                      trace_span_ids)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PROTOBUF = "application/x-protobuf"
# The receiver label of spanhouse_receiver_*_total for each protocol.
RECEIVER = {"otlp_http": "otlp_http", "otlp_grpc": "otlp_grpc", "zipkin": "zipkin"}
SETTLE_DEADLINE_S = 60.0
OS_DEADLINE_S = 90.0

KIND_NAME = {"server": trace_pb2.Span.SPAN_KIND_SERVER, "client": trace_pb2.Span.SPAN_KIND_CLIENT,
             "internal": trace_pb2.Span.SPAN_KIND_INTERNAL}


def retried_message(n: int) -> str:
    return f"{n} spans were accepted before (a retried request): kept once"


# ---- the spans sent, described once, encoded per protocol ----

def new_id(n_bytes: int) -> str:
    while True:
        h = os.urandom(n_bytes).hex()
        if int(h, 16) != 0:
            return h


def make_traces(n_traces: int, front: str, back: str, start_ns: int) -> list[dict]:
    """n_traces traces of 4 spans: a root SERVER span in `front`, its CLIENT child calling
    `back`, the SERVER span of `back` under it and an INTERNAL child of that one; exactly one
    span of each trace has the error status (which one varies). Times are whole microseconds
    (Zipkin's unit), all in the minute of `start_ns`."""
    spans = []
    for t in range(n_traces):
        trace = new_id(16)
        root, client, server, db = (new_id(8) for _ in range(4))
        s0 = start_ns + t * 1_000_000  # 1 ms apart
        failing = (server, db, client)[t % 3]
        for span_id, parent, kind, service, name, start, dur in (
                (root, "", "server", front, "GET /checkout", s0, 9_000_000),
                (client, root, "client", front, "POST /charge", s0 + 1_000_000, 6_000_000),
                (server, client, "server", back, "charge", s0 + 2_000_000, 4_000_000),
                (db, server, "internal", back, "db.insert", s0 + 3_000_000, 1_000_000)):
            spans.append({"trace_id": trace, "span_id": span_id, "parent": parent,
                          "kind": kind, "service": service, "name": name,
                          "start_ns": start, "end_ns": start + dur,
                          "error": span_id == failing})
    return spans


def otlp_request(spans: list[dict]) -> bytes:
    """ExportTraceServiceRequest bytes: one ResourceSpans per service."""
    req = trace_service_pb2.ExportTraceServiceRequest()
    by_service: dict[str, list[dict]] = defaultdict(list)
    for s in spans:
        by_service[s["service"]].append(s)
    for service, mine in by_service.items():
        rs = req.resource_spans.add()
        rs.resource.attributes.append(common_pb2.KeyValue(
            key="service.name", value=common_pb2.AnyValue(string_value=service)))
        ss = rs.scope_spans.add()
        ss.scope.name = "e2e-retries"
        for s in mine:
            span = trace_pb2.Span(
                trace_id=bytes.fromhex(s["trace_id"]), span_id=bytes.fromhex(s["span_id"]),
                parent_span_id=bytes.fromhex(s["parent"]) if s["parent"] else b"",
                name=s["name"], kind=KIND_NAME[s["kind"]], start_time_unix_nano=s["start_ns"],
                end_time_unix_nano=s["end_ns"],
                attributes=[common_pb2.KeyValue(key="e2e.retries",
                                                value=common_pb2.AnyValue(bool_value=True))])
            if s["error"]:
                span.status.code = trace_pb2.Status.STATUS_CODE_ERROR
                span.status.message = "card declined"
            ss.spans.append(span)
    return req.SerializeToString()


def zipkin_request(spans: list[dict]) -> bytes:
    """A Zipkin v2 JSON list; an INTERNAL span has no kind (Zipkin's local span)."""
    out = []
    for s in spans:
        z = {"traceId": s["trace_id"], "id": s["span_id"], "name": s["name"],
             "timestamp": s["start_ns"] // 1000,
             "duration": (s["end_ns"] - s["start_ns"]) // 1000,
             "localEndpoint": {"serviceName": s["service"]},
             "tags": {"e2e.retries": "true"}}
        if s["parent"]:
            z["parentId"] = s["parent"]
        if s["kind"] != "internal":
            z["kind"] = s["kind"].upper()
        if s["error"]:
            z["tags"]["error"] = "card declined"
        out.append(z)
    return json.dumps(out).encode()


def encode(protocol: str, spans: list[dict]) -> bytes:
    return zipkin_request(spans) if protocol == "zipkin" else otlp_request(spans)


def send(sh, protocol: str, body: bytes) -> str:
    """Sends `body` once; asserts it was accepted whole. Returns the OTLP partial-success
    message ("" when none; Zipkin has no partial success: always "")."""
    if protocol == "zipkin":
        r = requests.post(sh.zipkin_url, data=body, headers={"Content-Type": "application/json"},
                          timeout=30)
        assert r.status_code == 202, describe_response(r)
        return ""
    if protocol == "otlp_http":
        r = sh.post_traces(body, PROTOBUF)
        assert r.status_code == 200, describe_response(r)
        raw = r.content
    else:
        with grpc.insecure_channel(sh.grpc_target) as channel:
            try:
                raw = channel.unary_unary(EXPORT)(body, timeout=30)
            except grpc.RpcError as e:
                pytest.fail(f"OTLP/gRPC Export failed: {e.code()}: {e.details()}\n"
                            f"{sh.diagnostics()}", pytrace=False)
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(raw)
    assert answer.partial_success.rejected_spans == 0, answer
    return answer.partial_success.error_message


# ---- reading back ----

def metrics_text(sh) -> str:
    r = requests.get(f"{sh.query_url}/metrics", timeout=30)
    assert r.status_code == 200, describe_response(r)
    return r.text


def metric(sh, name_and_labels: str) -> int:
    """The value of the sample named exactly so (name{labels}); fails if there is none."""
    text = metrics_text(sh)
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return int(float(line.split()[-1]))
    raise AssertionError(f"no {name_and_labels} in /metrics:\n{text}")


def receiver_counts(sh, receiver: str) -> Counter:
    """This process's receiver counters for `receiver` (they start at 0 at every start)."""
    return Counter({what: metric(sh, f'spanhouse_receiver_{what}_spans_total'
                                     f'{{receiver="{receiver}"}}')
                    for what in ("received", "accepted", "duplicate")})


def get_json(sh, path: str, params=None) -> dict:
    r = sh.session.get(f"{sh.query_url}{path}", params=params, timeout=30)
    assert r.status_code == 200, describe_response(r)
    return r.json()


def span_views(doc: dict) -> list[tuple]:
    """A Jaeger trace answer as a sorted list of (span id, kind, service, operation), one
    entry per span returned (a span returned twice is there twice)."""
    out = []
    for trace in doc["data"]:
        for s in trace["spans"]:
            kind = next((t["value"] for t in s["tags"] if t["key"] == "span.kind"), "")
            out.append((s["spanID"], kind, trace["processes"][s["processID"]]["serviceName"],
                        s["operationName"]))
    return sorted(out)


def sent_views(spans: list[dict]) -> dict[str, list[tuple]]:
    by_trace: dict[str, list[tuple]] = defaultdict(list)
    for s in spans:
        by_trace[s["trace_id"]].append((s["span_id"], s["kind"], s["service"], s["name"]))
    return {t: sorted(v) for t, v in by_trace.items()}


def check_traces_once(sh, spans: list[dict], when: str) -> None:
    """Every trace sent shows each of its spans exactly once (polled until all are there)."""
    for trace, want in sent_views(spans).items():
        want_ids = {v[0] for v in want}
        doc = sh.wait_for_trace(
            trace, lambda d, w=want_ids: w <= set(trace_span_ids(d)),
            deadline_s=SETTLE_DEADLINE_S, what=f"{when}: did not show all {len(want)} spans")
        assert [t["traceID"] for t in doc["data"]] == [trace], f"{when}: {doc['data']}"
        got = span_views(doc)
        repeated = sorted(v for v, n in Counter(got).items() if n > 1)
        assert not repeated, f"{when}: trace {trace}: spans shown more than once: {repeated}"
        assert got == want, f"{when}: trace {trace}: shown {got}, sent {want}"


def stored_count(sh, service: str) -> int:
    """Rows of the spans table of `service` (count(), the store alone, repeats included)."""
    return get_json(sh, "/api/spans/count",
                    {"resource_attr": "service.name", "value": service})["count"]


def check_recent_spans(sh, want: int, when: str) -> None:
    """The spans held in the recent-traces index (spanhouse_recent_spans) come to `want`
    and stay there."""
    deadline = time.monotonic() + POLL_DEADLINE_S
    while (held := metric(sh, "spanhouse_recent_spans")) < want:
        assert time.monotonic() < deadline, f"{when}: the recent index holds {held} spans, " \
                                            f"want {want}"
        time.sleep(0.1)
    assert held == want, f"{when}: the recent index holds {held} spans, want {want}"


def write_config(path: Path, dependencies_lag_s: int, extra: str = "") -> Path:
    path.write_text("dependencies:\n  interval_s: 1\n"
                    f"  lag_s: {dependencies_lag_s}\n"
                    "writer:\n  max_age_ms: 300\n" + extra)
    return path


# ---- 1: the same request 2 and 5 times, over each protocol, across restarts ----

# The sends and restarts of each case: "send" sends the request once more; "look" checks the
# traces right away (the store's answer, whatever it holds yet, merged with the recent index
# in memory: the spans start 2 minutes back, before the process, so memory never answers
# alone; a process that got retries only holds none of them) and the recent index's count;
# "restart" stops spanhouse (SIGTERM, exit 0) and starts it again on the same data dir.
SCHEDULES = {
    2: ["send", "look", "restart", "send", "look"],
    5: ["send", "send", "look", "restart", "send", "send", "look", "restart", "send", "look"],
}


@pytest.mark.parametrize("sends", sorted(SCHEDULES))
@pytest.mark.parametrize("protocol", ["otlp_http", "otlp_grpc", "zipkin"])
def test_retried_request_is_kept_once(spanhouse_factory, tmp_path, protocol, sends):
    schedule = SCHEDULES[sends]
    assert schedule.count("send") == sends
    receiver = RECEIVER[protocol]
    suffix = new_id(3)
    front, back = f"shop-web-{suffix}", f"shop-pay-{suffix}"
    # Two minutes back, 10 s into a whole minute: every span in one minute that has ended
    # before the dependency job of the last process starts (below), so it computes that
    # minute once, with every span stored.
    now_s = time.time()
    start_ns = (int(now_s - 120) // 60 * 60 + 10) * 1_000_000_000
    spans = make_traces(10, front, back, start_ns)
    n = len(spans)
    body = encode(protocol, spans)

    # The dependency job computes each minute once, from where its table ends. Until the last
    # start it is held back (lag 3600 s: no minute is old enough), so that it cannot compute the
    # spans' minute before every send is stored; the last process computes it (lag 0) from
    # what the store holds then, every send included.
    config = write_config(tmp_path / "retries.yaml", dependencies_lag_s=3600)
    sh = spanhouse_factory(config=config)

    # spanhouse_receiver_*_spans_total start at 0 in every process. Each process's values are
    # read after it answered all its sends and before it is stopped, and summed: exactly the
    # spans of every send (a replay of the durable queue at start counts in none of them).
    totals = Counter()
    sent = 0
    process = 1
    for step in schedule:
        if step == "send":
            message = send(sh, protocol, body)
            sent += 1
            if protocol != "zipkin":
                # The first send is new; every later one, in this process or after a restart,
                # is answered with the retry note and nothing rejected.
                want = "" if sent == 1 else retried_message(n)
                assert message == want, f"send {sent} of {sends}: partial_success message " \
                                        f"{message!r}, want {want!r}"
        elif step == "look":
            check_traces_once(sh, spans, f"after send {sent} of {sends}")
            # The recent index holds the spans this process took once each (the first
            # process: all n; a later one got retries only: none), not once per send.
            check_recent_spans(sh, n if process == 1 else 0, f"after send {sent} of {sends}")
        else:
            totals += receiver_counts(sh, receiver)
            sh.restart()
            process += 1
    totals += receiver_counts(sh, receiver)
    assert metric(sh, "spanhouse_dedup_file_errors_total") == 0
    assert totals["received"] == sends * n, totals
    assert totals["accepted"] == n, f"spans accepted over all processes {totals}, want {n}"
    assert totals["duplicate"] == (sends - 1) * n, \
        f"{receiver}: duplicate spans over all processes {totals['duplicate']}, want " \
        f"({sends} - 1) x {n} = {(sends - 1) * n}"

    # The last restart: SIGTERM writes what is queued (exit 0), so from here on the store holds
    # all it ever will of these sends; the recent index starts empty, so the traces come from
    # the store. The dependency job may compute the spans' minute from now on.
    write_config(config, dependencies_lag_s=0)
    sh.restart()
    check_traces_once(sh, spans, "after the last restart (from the store)")

    # The store: each span once.
    want_stored = Counter(s["service"] for s in spans)
    got_stored = {svc: stored_count(sh, svc) for svc in want_stored}
    assert got_stored == dict(want_stored), f"rows stored per service {got_stored}, sent once " \
                                            f"{dict(want_stored)} ({sends} sends)"

    # RED, per service: by default of the server (and consumer) spans; spanKind=all: of all.
    end_ms = (int(time.time()) // 60 + 1) * 60 * 1000
    params = {"endTs": end_ms, "lookback": 30 * 60 * 1000}
    for kinds, counted in ((None, lambda s: s["kind"] == "server"), ("all", lambda s: True)):
        want = defaultdict(lambda: [0, 0])
        for s in spans:
            if counted(s):
                want[s["service"]][0] += 1
                want[s["service"]][1] += s["error"]
        doc = get_json(sh, "/api/spanhouse/services/summary",
                       {**params, **({"spanKind": kinds} if kinds else {})})
        got = {row["service"]: [row["calls"], row["errors"]] for row in doc["data"]}
        assert got == dict(want), f"RED summary (spanKind={kinds or 'default'}): {got}, " \
                                  f"want the spans sent once: {dict(want)}"

    # Dependency edges: one front -> back call per trace, as if sent once.
    want_edges = [{"parent": front, "child": back,
                   "callCount": len({s["trace_id"] for s in spans})}]
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while True:
        doc = get_json(sh, "/api/dependencies", {"endTs": int(time.time() * 1000) + 60_000,
                                                 "lookback": 3_600_000})
        if doc["data"]:
            break
        assert time.monotonic() < deadline, \
            f"no dependency edges within {SETTLE_DEADLINE_S:.0f}s\n{sh.diagnostics()}"
        time.sleep(0.5)
    assert doc["data"] == want_edges, f"edges {doc['data']}, want {want_edges}"


# ---- 2: Zipkin shared spans ----

def shared_span_request(now_us: int) -> tuple[str, list[dict], list[tuple]]:
    """A Zipkin trace whose RPC is one shared span: the CLIENT half in `web`, the SERVER half
    in `api` with the same span id and parent (shared: true), under a root SERVER span of
    `web`. Returns the trace id, the Zipkin spans and the (span id, kind, service, name)
    expected per span returned."""
    trace, root, rpc = new_id(16), new_id(8), new_id(8)
    zipkin = [
        {"traceId": trace, "id": root, "kind": "SERVER", "name": "get /home",
         "timestamp": now_us, "duration": 8000, "localEndpoint": {"serviceName": "web"}},
        {"traceId": trace, "id": rpc, "parentId": root, "kind": "CLIENT", "name": "get /user",
         "timestamp": now_us + 1000, "duration": 5000, "localEndpoint": {"serviceName": "web"},
         "remoteEndpoint": {"serviceName": "api"}},
        {"traceId": trace, "id": rpc, "parentId": root, "kind": "SERVER", "name": "get /user",
         "timestamp": now_us + 1500, "duration": 4000, "localEndpoint": {"serviceName": "api"},
         "shared": True},
    ]
    want = sorted([(root, "server", "web", "get /home"), (rpc, "client", "web", "get /user"),
                   (rpc, "server", "api", "get /user")])
    return trace, zipkin, want


def send_zipkin_twice(sh, zipkin: list[dict]) -> None:
    body = json.dumps(zipkin).encode()
    send(sh, "zipkin", body)
    send(sh, "zipkin", body)
    counts = receiver_counts(sh, "zipkin")
    assert counts == Counter(received=6, accepted=3, duplicate=3), counts


def test_zipkin_shared_span_both_halves_kept_and_retry_adds_nothing(spanhouse_factory):
    """Checked from the store (after a restart): both halves stored once, shown both."""
    sh = spanhouse_factory()
    trace, zipkin, want = shared_span_request(time.time_ns() // 1000)
    send_zipkin_twice(sh, zipkin)
    sh.restart()  # the recent index starts empty: answered from the store
    doc = sh.wait_for_trace(trace, lambda d: len(d["data"][0]["spans"]) >= len(want),
                            deadline_s=SETTLE_DEADLINE_S, what="did not show both halves")
    assert span_views(doc) == want, f"trace {trace} from the store: {span_views(doc)}, " \
                                    f"want {want}"
    assert {svc: stored_count(sh, svc) for svc in ("web", "api")} == {"web": 2, "api": 1}
    # The retry after the restart: caught too, nothing more stored.
    send(sh, "zipkin", json.dumps(zipkin).encode())
    assert receiver_counts(sh, "zipkin") == Counter(received=3, accepted=0, duplicate=3)
    sh.restart()
    assert {svc: stored_count(sh, svc) for svc in ("web", "api")} == {"web": 2, "api": 1}
    assert span_views(sh.get_trace(trace).json()) == want


# ---- 3: dual write to OpenSearch, then reconcile ----

def os_count(opensearch, pattern: str) -> int:
    """Documents in `pattern`, or -1 while OpenSearch cannot count them yet."""
    from opensearch_server import OpenSearchError
    try:
        return opensearch.count(pattern)
    except OpenSearchError:
        return -1


def test_dual_write_reconcile_after_retries(opensearch, spanhouse_factory, tmp_path):
    prefix = "retries"
    config = write_config(tmp_path / "dual.yaml", dependencies_lag_s=0, extra=(
        "secondary:\n  type: opensearch\n"
        f"opensearch:\n  urls: {opensearch.url}\n  index_prefix: {prefix}\n"
        "  shards: 1\n  replicas: 0\n"))
    sh = spanhouse_factory(config=config)
    spans = make_traces(8, "dual-web", "dual-pay", time.time_ns() // 1000 * 1000 - 5_000_000_000)
    total = len(spans)
    body = otlp_request(spans)
    # 3 sends, a restart between the 2nd and the 3rd.
    totals = Counter()
    assert send(sh, "otlp_http", body) == ""
    assert send(sh, "otlp_http", body) == retried_message(total)
    totals += receiver_counts(sh, "otlp_http")
    sh.restart()
    assert send(sh, "otlp_http", body) == retried_message(total)
    totals += receiver_counts(sh, "otlp_http")
    assert totals == Counter(received=3 * total, accepted=total, duplicate=2 * total), totals

    # Both stores hold every span once.
    deadline = time.monotonic() + OS_DEADLINE_S
    services = Counter(s["service"] for s in spans)
    while True:
        in_os = os_count(opensearch, f"{prefix}-jaeger-span-*")
        in_ch = {svc: stored_count(sh, svc) for svc in services}
        if in_os == total and in_ch == dict(services):
            break
        assert time.monotonic() < deadline, \
            f"not stored once in both: OpenSearch {in_os}, ClickHouse {in_ch}, want {total}"
        time.sleep(0.5)
    check_traces_once(sh, spans, "dual write")

    now = time.time()
    report = tmp_path / "report.json"
    args = ["reconcile", "--from", "opensearch", "--to", "clickhouse", "--server", sh.query_url,
            "--start", str(int(now - 3600)), "--end", str(int(now + 60)), "--bucket", "1h",
            "--samples", str(10 * total), "--seed", "7", "--json", str(report)]
    r = subprocess.run([spanhouse_bin()] + args, capture_output=True, text=True, timeout=300,
                       env=clean_env())
    assert r.returncode == 0, f"reconcile exited with {r.returncode}\n{r.stdout}\n{r.stderr}"
    found = json.loads(report.read_text())
    assert found["agree"], json.dumps(found, indent=1)
    assert found["spans"] == {"from": total, "to": total}, found["spans"]
    assert not found.get("differing_cells"), found["differing_cells"]
    assert not found.get("field_differences"), found["field_differences"]
    assert "the stores agree" in r.stdout, r.stdout
    # Still once in each after the check (nothing came late).
    assert os_count(opensearch, f"{prefix}-jaeger-span-*") == total
    assert {svc: stored_count(sh, svc) for svc in services} == dict(services)


# ---- 2, continued: the shared span right after the sends, from memory ----

def test_zipkin_shared_span_both_halves_shown_right_away(spanhouse_factory):
    """Right after the sends, as in any process up for a while, the trace is answered from the
    recent index in memory alone: it must show both halves of the shared span, as the store's
    answer does."""
    sh = spanhouse_factory()
    # The recent index answers alone for a trace whose root starts more than 10 s (the clock
    # skew it allows) after its horizon, the process's start: wait until that is so for a trace
    # starting now (spanhouse_recent_covered_seconds: seconds since the horizon).
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while metric(sh, "spanhouse_recent_covered_seconds") < 12:
        assert time.monotonic() < deadline, "the recent index's horizon did not move back"
        time.sleep(0.5)
    from_memory = metric(sh, "spanhouse_recent_answered_from_memory_total")
    trace, zipkin, want = shared_span_request(time.time_ns() // 1000)
    send_zipkin_twice(sh, zipkin)

    def look() -> list[tuple]:
        r = sh.get_trace(trace)
        assert r.status_code == 200, describe_response(r)
        return span_views(r.json())

    deadline = time.monotonic() + POLL_DEADLINE_S
    while len(got := look()) < len(want) and time.monotonic() < deadline:
        time.sleep(0.1)
    answered_from_memory = metric(sh, "spanhouse_recent_answered_from_memory_total") - from_memory
    # Both halves are stored by now: the store's answer (after a restart) would have both.
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while {svc: stored_count(sh, svc) for svc in ("web", "api")} != {"web": 2, "api": 1}:
        assert time.monotonic() < deadline, "the 3 spans were not stored"
        time.sleep(0.2)
    got_once_stored = look()
    assert got == want and got_once_stored == want, \
        f"trace {trace} right after the sends: {got} ({answered_from_memory} lookups answered " \
        f"from memory alone), once the store held all 3 spans: {got_once_stored}; want {want}"
