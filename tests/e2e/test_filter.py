"""The filter of unreasonable data and the request limits, end to end.

For every reason a span is dropped or trimmed, and every limit on a request:
a real spanhouse answers with the right status and message (OTLP
partial_success for spans dropped by the filter, in JSON and protobuf), the
right counter of /metrics moves by the right amount, the spans that were
fine are stored, and what was trimmed is stored trimmed.

One spanhouse with small limits serves the module (`small`); the time checks
run with their defaults there. /metrics is read with prometheus_client's
parser, which refuses anything that is not valid exposition text.
"""

from __future__ import annotations

import gzip
import os
import time

import pytest
import requests
import zstandard
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client.parser import text_string_to_metric_families

from conftest import SpanhouseFactory, describe_response, otlp_json_request, otlp_json_span, \
    trace_span_ids

S = 1_000_000_000
HOUR = 3600 * S
DAY = 24 * HOUR

SMALL_LIMITS = {
    "otlp_http": {"max_body_bytes": "4KiB", "max_spans_per_request": 5},
    "filter": {"max_attributes": 4, "max_events": 2, "max_links": 1, "max_value_bytes": 16,
               "max_key_bytes": 16, "max_span_names_per_service": 3},
}


def write_yaml(path, settings: dict) -> None:
    lines = []
    for section, keys in settings.items():
        lines.append(f"{section}:")
        lines += [f"  {k}: {v}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def small(tmp_path_factory, request):
    workdir = tmp_path_factory.mktemp("filter")
    cfg = workdir / "small-limits.yaml"
    write_yaml(cfg, SMALL_LIMITS)
    factory = SpanhouseFactory(workdir)
    request.module._spanhouse_factories = [factory]
    sh = factory(name="small-limits", config=cfg)
    yield sh
    factory.teardown()


# ---- /metrics ----

def scrape(sh) -> dict:
    """{(sample name, frozenset of labels): value} of every sample; fails on invalid text."""
    r = requests.get(f"{sh.query_url}/metrics", timeout=30)
    assert r.status_code == 200, describe_response(r)
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"sample {key} appears twice"
            out[key] = s.value
    return out


def metric(samples: dict, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"no sample {name}{labels}; have " + \
        ", ".join(sorted(f"{n}{dict(l)}" for n, l in samples if n == name))
    return samples[key]


def filter_rejected(samples, reason):
    return metric(samples, "spanhouse_filter_rejected_spans_total", reason=reason)


def filter_trimmed(samples, reason):
    return metric(samples, "spanhouse_filter_trimmed_total", reason=reason)


def rejected_requests(samples, reason):
    return metric(samples, "spanhouse_receiver_rejected_requests_total", receiver="otlp_http",
                  reason=reason)


# ---- requests ----

def new_ids(n: int) -> tuple[str, list[str]]:
    return os.urandom(16).hex(), [os.urandom(8).hex() for _ in range(n)]


def partial_success(resp: requests.Response) -> tuple[int, str]:
    assert resp.status_code == 200, describe_response(resp)
    ps = resp.json().get("partialSuccess", {})
    return int(ps.get("rejectedSpans", "0")), ps.get("errorMessage", "")


def stored_spans(sh, trace_id: str, n: int) -> list[dict]:
    doc = sh.wait_for_trace(trace_id, lambda d: len(trace_span_ids(d)) >= n,
                            what=f"did not get its {n} spans")
    return doc["data"][0]["spans"]


def tags_of(span: dict) -> dict:
    return {t["key"]: t["value"] for t in span.get("tags", [])}


# Each case spoils one span of three with the same trace id; the other two must be stored.
def future(span):
    start = time.time_ns() + 2 * HOUR
    span["startTimeUnixNano"], span["endTimeUnixNano"] = str(start), str(start + S)


def too_old(span):
    start = time.time_ns() - 8 * DAY  # the retention is 7 days
    span["startTimeUnixNano"], span["endTimeUnixNano"] = str(start), str(start + S)


def negative(span):
    span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1)


def absurd(span):
    span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + 25 * HOUR)


def zero_span_id(span):
    span["spanId"] = "0" * 16


REJECT_CASES = [
    ("future_start", future, "start time more than 3600 s ahead"),
    ("too_old", too_old, "start time older than the retention of 604800 s"),
    ("negative_duration", negative, "end time before start time"),
    ("absurd_duration", absurd, "duration over 86400 s"),
    ("zero_span_id", zero_span_id, "all-zero span id"),
]


@pytest.mark.parametrize("reason,spoil,why", REJECT_CASES, ids=[c[0] for c in REJECT_CASES])
def test_unreasonable_span_is_rejected_in_partial_success(small, reason, spoil, why):
    before = scrape(small)
    trace_id, ids = new_ids(3)
    spans = [otlp_json_span(trace_id, sid, f"op {i}") for i, sid in enumerate(ids)]
    spoil(spans[1])
    resp = small.post_traces(otlp_json_request(spans, "filter-reject"))
    rejected, message = partial_success(resp)
    assert rejected == 1, describe_response(resp)
    assert f"rejected 1 span: 1 {reason} ({why})" in message, message

    after = scrape(small)
    assert filter_rejected(after, reason) - filter_rejected(before, reason) == 1
    received = "spanhouse_receiver_received_spans_total"
    accepted = "spanhouse_receiver_accepted_spans_total"
    assert metric(after, received, receiver="otlp_http") - \
        metric(before, received, receiver="otlp_http") == 3
    assert metric(after, accepted, receiver="otlp_http") - \
        metric(before, accepted, receiver="otlp_http") == 2

    # The two good spans are stored, the bad one is not (not even later).
    stored = stored_spans(small, trace_id, 2)
    assert sorted(s["spanID"] for s in stored) == sorted([ids[0], ids[2]])


def test_zero_trace_id_in_protobuf_is_reported_in_protobuf(small):
    before = scrape(small)
    now = time.time_ns()
    good_trace = os.urandom(16)
    spans = [Span(trace_id=bytes(16), span_id=os.urandom(8), name="zero trace",
                  start_time_unix_nano=now, end_time_unix_nano=now + S)]
    spans += [Span(trace_id=good_trace, span_id=os.urandom(8), name=f"good {i}",
                   start_time_unix_nano=now, end_time_unix_nano=now + S) for i in range(2)]
    spans.append(Span(trace_id=good_trace, span_id=os.urandom(8), name="also old",
                      start_time_unix_nano=1, end_time_unix_nano=2))
    req = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name",
                                               value=AnyValue(string_value="filter-proto"))]),
        scope_spans=[ScopeSpans(spans=spans)])])
    resp = small.post_traces(req.SerializeToString(), "application/x-protobuf")
    assert resp.status_code == 200, describe_response(resp)
    assert resp.headers["Content-Type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse.FromString(resp.content)
    assert answer.HasField("partial_success"), answer
    assert answer.partial_success.rejected_spans == 2
    msg = answer.partial_success.error_message
    assert "rejected 2 spans: 1 zero_trace_id (all-zero trace id), 1 too_old" in msg, msg
    after = scrape(small)
    assert filter_rejected(after, "zero_trace_id") - filter_rejected(before, "zero_trace_id") == 1
    assert filter_rejected(after, "too_old") - filter_rejected(before, "too_old") == 1
    stored = stored_spans(small, good_trace.hex(), 2)
    assert sorted(s["operationName"] for s in stored) == ["good 0", "good 1"]


def test_every_span_rejected_is_still_200(small):
    trace_id, ids = new_ids(2)
    spans = [otlp_json_span(trace_id, sid, start_ns=time.time_ns() + DAY) for sid in ids]
    rejected, message = partial_success(small.post_traces(otlp_json_request(spans)))
    assert rejected == 2 and "2 future_start" in message, message


# ---- trims: the span is kept, cut to the limits ----

def kv(key: str, value: str) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def test_extra_attributes_events_and_links_are_dropped(small):
    before = scrape(small)
    trace_id, (sid,) = new_ids(1)
    span = otlp_json_span(trace_id, sid, "crowded",
                          attributes=[kv(f"a{i}", "v") for i in range(10)])
    t = int(span["startTimeUnixNano"])
    span["events"] = [{"timeUnixNano": str(t + i), "name": f"e{i}"} for i in range(5)]
    span["links"] = [{"traceId": os.urandom(16).hex(), "spanId": os.urandom(8).hex()}
                     for _ in range(3)]
    rejected, message = partial_success(small.post_traces(otlp_json_request([span],
                                                                            "filter-lists")))
    # Trimmed, not rejected: a warning only.
    assert rejected == 0, message
    assert message.startswith("trimmed: "), message
    for part in ("6 attributes (over 4 per span, event or link; dropped)",
                 "3 events (over 2 per span; dropped)", "2 links (over 1 per span; dropped)"):
        assert part in message, message
    after = scrape(small)
    for reason, n in (("attributes", 6), ("events", 3), ("links", 2)):
        assert filter_trimmed(after, reason) - filter_trimmed(before, reason) == n, reason

    (stored,) = stored_spans(small, trace_id, 1)
    tags = tags_of(stored)
    assert [k for k in tags if k.startswith("a")] == ["a0", "a1", "a2", "a3"], tags
    assert tags["otel.dropped_attributes_count"] == 6, tags
    assert tags["otel.dropped_events_count"] == 3, tags
    assert tags["otel.dropped_links_count"] == 2, tags
    assert [log["fields"][0]["value"] for log in stored["logs"]] == ["e0", "e1"], stored["logs"]


def test_long_values_and_keys_are_cut(small):
    before = scrape(small)
    trace_id, (sid,) = new_ids(1)
    span = otlp_json_span(trace_id, sid, "verbose", attributes=[
        kv("query", "SELECT * FROM carts WHERE id = 42"),
        kv("short", "ok"),
        kv("a.rather.long.key.name", "x"),  # 22 bytes; service.name has 12
        kv("accent", "abcdefghijklmn\u00e9\u00e9"),  # 18 bytes; the first é ends at byte 16
    ])
    rejected, message = partial_success(small.post_traces(otlp_json_request([span],
                                                                            "filter-strings")))
    assert rejected == 0
    assert "2 value_length (attribute values over 16 bytes; cut)" in message, message
    assert "1 key_length (attribute keys over 16 bytes; cut)" in message, message
    after = scrape(small)
    assert filter_trimmed(after, "value_length") - filter_trimmed(before, "value_length") == 2
    assert filter_trimmed(after, "key_length") - filter_trimmed(before, "key_length") == 1
    (stored,) = stored_spans(small, trace_id, 1)
    tags = tags_of(stored)
    assert tags["query"] == "SELECT * FROM ca", tags
    assert tags["short"] == "ok"
    assert tags["a.rather.long.ke"] == "x", tags
    assert tags["accent"] == "abcdefghijklmn\u00e9", tags


def test_span_names_past_the_cap_become_other(small):
    before = scrape(small)
    trace_id, ids = new_ids(5)
    names = ["GET /a", "GET /b", "GET /c", "GET /order/1", "GET /order/2"]
    spans = [otlp_json_span(trace_id, sid, name) for sid, name in zip(ids, names)]
    rejected, message = partial_success(small.post_traces(otlp_json_request(spans, "names")))
    assert rejected == 0
    assert "2 span_name (names past 3 distinct per service; renamed '(other)')" in message, \
        message
    assert filter_trimmed(scrape(small), "span_name") - filter_trimmed(before, "span_name") == 2
    stored = stored_spans(small, trace_id, 5)
    by_id = {s["spanID"]: s["operationName"] for s in stored}
    assert [by_id[i] for i in ids] == ["GET /a", "GET /b", "GET /c", "(other)", "(other)"]

    # The first three stay known; another service has a cap of its own.
    trace2, ids2 = new_ids(2)
    spans = [otlp_json_span(trace2, ids2[0], "GET /a")]
    r1 = small.post_traces(otlp_json_request(spans, "names"))
    r2 = small.post_traces(otlp_json_request([otlp_json_span(trace2, ids2[1], "GET /order/1")],
                                             "other-service"))
    assert partial_success(r1) == (0, "") and partial_success(r2) == (0, "")


# ---- request limits ----

def test_too_many_spans_is_413(small):
    before = scrape(small)
    trace_id, ids = new_ids(6)
    body = otlp_json_request([otlp_json_span(trace_id, sid) for sid in ids])
    resp = small.post_traces(body)
    assert resp.status_code == 413, describe_response(resp)
    assert resp.json()["code"] == 3
    assert "request has 6 spans, over the limit of 5 per request" in resp.json()["message"]
    assert rejected_requests(scrape(small), "too_many_spans") - \
        rejected_requests(before, "too_many_spans") == 1
    assert small.get_trace(trace_id).status_code == 404
    # At the limit it is fine.
    resp = small.post_traces(otlp_json_request([otlp_json_span(trace_id, sid) for sid in ids[:5]]))
    assert partial_success(resp) == (0, "")


def padded_request(size: int) -> bytes:
    trace_id, (sid,) = new_ids(1)
    body = otlp_json_request([otlp_json_span(trace_id, sid)])
    return body + b" " * (size - len(body))


@pytest.mark.parametrize("encoding", ["identity", "gzip", "zstd"])
def test_body_over_the_limit_after_decompression_is_413(small, encoding):
    before = scrape(small)
    body = padded_request(4096 + 1)  # max_body_bytes 4KiB
    at_limit = padded_request(4096)
    compress = {"identity": lambda b: b, "gzip": gzip.compress,
                "zstd": zstandard.ZstdCompressor().compress}[encoding]
    resp = small.post_traces(compress(body), encoding=encoding)
    assert resp.status_code == 413, describe_response(resp)
    assert "4096 bytes" in resp.text, describe_response(resp)
    assert rejected_requests(scrape(small), "too_large") - rejected_requests(before, "too_large") \
        == 1
    resp = small.post_traces(compress(at_limit), encoding=encoding)
    assert resp.status_code == 200, describe_response(resp)


def big_window_zstd(data: bytes) -> bytes:
    """A zstd frame whose header asks for a 128 MiB window (streamed: no content size)."""
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=27, enable_ldm=True)
    cobj = zstandard.ZstdCompressor(compression_params=params).compressobj()
    frame = cobj.compress(data) + cobj.flush()
    assert zstandard.get_frame_parameters(frame).window_size == 1 << 27
    return frame


def test_zstd_window_over_the_cap_is_413(small):
    before = scrape(small)
    payload = padded_request(1000)
    frame = big_window_zstd(payload)
    # The frame is valid: a decoder that allows the window reads it back.
    assert zstandard.ZstdDecompressor(max_window_size=1 << 27).decompressobj() \
        .decompress(frame) == payload
    resp = small.post_traces(frame, encoding="zstd")
    assert resp.status_code == 413, describe_response(resp)
    assert "zstd frame needs a window over 8 MiB" in resp.json()["message"]
    assert rejected_requests(scrape(small), "too_large") - rejected_requests(before, "too_large") \
        == 1


# ---- /metrics as a whole ----

def test_metrics_are_valid_exposition_text_with_a_real_histogram(small):
    # The module's spans are readable from memory at once; their insert comes within seconds.
    deadline = time.monotonic() + 60
    while True:
        r = requests.get(f"{small.query_url}/metrics", timeout=30)
        families = {f.name: f for f in text_string_to_metric_families(r.text)}
        inserts = [s.value for s in families["spanhouse_sink_insert_seconds"].samples
                   if s.name.endswith("_count")]
        if inserts and inserts[0] > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for name in ("spanhouse_receiver_requests", "spanhouse_receiver_received_spans",
                 "spanhouse_receiver_accepted_spans", "spanhouse_receiver_rejected_requests",
                 "spanhouse_filter_rejected_spans", "spanhouse_filter_trimmed",
                 "spanhouse_sink_rows_written", "spanhouse_sink_insert_errors"):
        assert families[name].type == "counter", name
        assert families[name].documentation, f"{name} has no HELP"
    for name in ("spanhouse_queue_bytes", "spanhouse_memory_reserved_bytes",
                 "spanhouse_storage_parts"):
        assert families[name].type == "gauge", name
    hist = families["spanhouse_sink_insert_seconds"]
    assert hist.type == "histogram"
    buckets = [s for s in hist.samples if s.name.endswith("_bucket")]
    les = [s.labels["le"] for s in buckets]
    assert les[-1] == "+Inf" and len(les) > 5, les
    values = [s.value for s in buckets]
    assert values == sorted(values), "buckets must be cumulative"
    count = [s.value for s in hist.samples if s.name.endswith("_count")]
    assert count == [values[-1]]
    # Inserts happened in this module: the histogram has seen them.
    assert values[-1] > 0
    parts = [s for s in families["spanhouse_storage_parts"].samples
             if s.labels.get("table") == "spans"]
    assert parts and parts[0].value > 0, parts
    # The engine's own write counters: every stored span was an inserted row.
    events = {s.labels["event"]: s.value for s in families["spanhouse_engine_events"].samples}
    assert families["spanhouse_engine_events"].type == "counter"
    stored = [s.value for s in families["spanhouse_storage_rows"].samples
              if s.labels.get("table") == "spans"]
    assert stored and events.get("InsertedRows", 0) >= sum(stored) > 0, (events, stored)


def test_counters_move_as_spans_flow(small):
    before = scrape(small)
    trace_id, ids = new_ids(4)
    resp = small.post_traces(otlp_json_request([otlp_json_span(trace_id, s) for s in ids]))
    assert partial_success(resp) == (0, "")
    stored_spans(small, trace_id, 4)
    deadline = time.monotonic() + 20
    while True:
        after = scrape(small)
        written = metric(after, "spanhouse_sink_rows_written_total", sink="chdb") - \
            metric(before, "spanhouse_sink_rows_written_total", sink="chdb")
        if written >= 4 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert written >= 4
    assert metric(after, "spanhouse_receiver_requests_total", receiver="otlp_http") - \
        metric(before, "spanhouse_receiver_requests_total", receiver="otlp_http") >= 1
    assert metric(after, "spanhouse_receiver_accepted_spans_total", receiver="otlp_http") - \
        metric(before, "spanhouse_receiver_accepted_spans_total", receiver="otlp_http") == 4


# ---- defaults let real traffic through untouched ----

def test_loadgen_corpus_passes_the_default_filter_untouched(spanhouse):
    import subprocess
    from conftest import spanhouse_bin
    lg = subprocess.run(
        [spanhouse_bin(), "loadgen", "--endpoint", spanhouse.traces_url, "--spans", "20000",
         "--verify", "--query-endpoint", spanhouse.query_url, "--quiet", "--json"],
        capture_output=True, text=True, timeout=300)
    assert lg.returncode == 0, f"loadgen failed:\n{lg.stdout}\n{lg.stderr}"
    samples = scrape(spanhouse)
    for (name, labels), value in samples.items():
        if name.startswith("spanhouse_filter_"):
            assert value == 0, f"{name}{dict(labels)} = {value}: the default filter touched " \
                               f"the loadgen corpus"
    received = metric(samples, "spanhouse_receiver_received_spans_total", receiver="otlp_http")
    accepted = metric(samples, "spanhouse_receiver_accepted_spans_total", receiver="otlp_http")
    assert received == accepted >= 20000
