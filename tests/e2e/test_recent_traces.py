"""A trace is readable the moment its request is answered (issue 28, recent traces).

The writer is told to hold its spans for ten minutes (writer.max_age_ms), so nothing reaches the
store during a test: whatever the query API answers comes from the recent-traces index. The spans
come from the real OpenTelemetry SDK (emit_trace.py, one export per span, each answered before the
emitter exits).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from conftest import E2E_DIR, Spanhouse, spanhouse_bin
from test_sampling import config, get, span_keys
from test_tail_sampling import counter

HOLD = """
writer:
  max_age_ms: 600000
  max_rows: 10000000
  insert_rows: 10000000
  threads: {threads}
"""


def emit(sh: Spanhouse) -> dict:
    proc = subprocess.run([sys.executable, str(E2E_DIR / "emit_trace.py"), "--endpoint",
                           sh.traces_url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"emit_trace.py: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout)


def spans_by_id(answer: dict) -> dict[str, dict]:
    """The one trace of a Jaeger answer: span id -> span, its process inlined."""
    (trace,) = answer["data"]
    out = {}
    for span in trace["spans"]:
        span = dict(span)
        span["process"] = trace["processes"][span.pop("processID")]
        assert span["spanID"] not in out, f"span {span['spanID']} answered twice"
        out[span["spanID"]] = span
    return out


def read_now(sh: Spanhouse, trace_id: str) -> dict:
    r = sh.get_trace(trace_id)
    assert r.status_code == 200, f"{r.status_code} {r.text}\n{sh.diagnostics()}"
    return spans_by_id(r.json())


def time_range(sent: dict) -> tuple[int, int]:
    return (min(s["start_ns"] for s in sent["spans"]) - 10**9,
            max(s["end_ns"] for s in sent["spans"]) + 10**9)


def test_a_trace_is_readable_once_answered_and_after_a_crash_and_the_same_once_stored(
        spanhouse_factory, tmp_path):
    sh = spanhouse_factory(config=config(tmp_path, "hold", HOLD.format(threads=2)))
    sent = emit(sh)
    want = {s["span_id"] for s in sent["spans"]}
    trace_id = sent["trace_id"]
    # At once, with nothing stored yet.
    fresh = read_now(sh, trace_id)
    assert set(fresh) == want
    lo, hi = time_range(sent)
    services = sorted({s["service"] for s in sent["spans"]})
    assert all(span_keys(sh, service, lo, hi) == [] for service in services), \
        "the writer stored spans: this test reads nothing from memory"
    assert counter(sh, "spanhouse_recent_lookup_hits_total") >= 1
    # A search finds it too, with every span.
    found = get(sh, "/api/traces", {"service": services[0], "start": lo // 1000,
                                    "end": hi // 1000, "limit": 20})
    assert [t["traceID"] for t in found["data"]] == [trace_id]
    assert {s["spanID"] for s in found["data"][0]["spans"]} == want

    # Killed with the spans still queued: the replay shows them to the index again.
    sh.stop(signal.SIGKILL)
    sh.start(keep_ports=True)
    assert read_now(sh, trace_id) == fresh

    # Stored (a clean stop writes everything), then read from the store alone after a restart:
    # the same answer, field for field.
    sh.restart()
    assert {k[1] for service in services for k in span_keys(sh, service, lo, hi)} == want
    stored = read_now(sh, trace_id)
    assert counter(sh, "spanhouse_recent_lookup_hits_total") == 0
    assert stored == fresh


def test_stored_and_held_spans_are_merged_once(spanhouse_factory, tmp_path):
    # The writer stores within a second; the index holds the spans for minutes: both have them.
    sh = spanhouse_factory(config=config(tmp_path, "quick", "writer:\n  max_age_ms: 200\n"))
    sent = emit(sh)
    want = {s["span_id"] for s in sent["spans"]}
    lo, hi = time_range(sent)
    deadline = time.monotonic() + 60
    while sum(len(span_keys(sh, s, lo, hi)) for s in {x["service"] for x in sent["spans"]}) < 6:
        assert time.monotonic() < deadline, "not stored within 60 s"
        time.sleep(0.2)
    assert set(read_now(sh, sent["trace_id"])) == want  # spans_by_id fails on a repeat
    assert counter(sh, "spanhouse_recent_merged_spans_total") == 0


def test_a_trace_memory_let_go_is_read_back_from_the_durable_queue(spanhouse_factory, tmp_path):
    # 1 MiB of memory for the index: the load after the SDK's trace pushes its batches out to the
    # disk tier (trace ids in memory, the requests kept in the durable queue's files), whence a
    # lookup reads and decodes them again. The writer stores within a second, so the answer can
    # be compared with the store's own once the index is gone.
    sh = spanhouse_factory(config=config(
        tmp_path, "disk", "writer:\n  max_age_ms: 200\nquery:\n  recent_max_bytes: 1MiB\n"))
    sent = emit(sh)
    trace_id = sent["trace_id"]
    want = {s["span_id"] for s in sent["spans"]}
    lo, hi = time_range(sent)
    load = subprocess.run(
        [spanhouse_bin(), "loadgen", "--endpoint", sh.traces_url, "--connections", "1", "--quiet",
         "--json", "--rate", "3000", "--duration", "3"],
        capture_output=True, text=True, timeout=300)
    assert load.returncode == 0, f"loadgen: {load.stdout}\n{load.stderr}"
    assert counter(sh, "spanhouse_recent_kept_batches_total") > 0, sh.diagnostics()
    services = sorted({s["service"] for s in sent["spans"]})
    deadline = time.monotonic() + 60
    while {k[1] for svc in services for k in span_keys(sh, svc, lo, hi)} != want:
        assert time.monotonic() < deadline, "the SDK's trace not stored within 60 s"
        time.sleep(0.2)

    reads = counter(sh, "spanhouse_recent_record_reads_total")
    from_disk = read_now(sh, trace_id)
    assert set(from_disk) == want
    assert counter(sh, "spanhouse_recent_record_reads_total") > reads, \
        "the trace was not read back from the durable queue"
    assert counter(sh, "spanhouse_recent_record_read_errors_total") == 0

    # The same answer, field for field, as the store's alone after a restart (which empties the
    # index and removes the kept files).
    sh.restart()
    assert not list((sh.data_dir / "queue").glob("*.kept"))
    assert read_now(sh, trace_id) == from_disk
    assert counter(sh, "spanhouse_recent_lookup_hits_total") == 0


def copy_reads(sh: Spanhouse) -> dict[str, float]:
    r = sh.session.get(f"{sh.query_url}/metrics", timeout=30)
    assert r.status_code == 200, r.text
    out = {}
    for line in r.text.splitlines():
        if line.startswith("spanhouse_trace_copy_reads_total{"):
            out[line.split('answer="')[1].split('"')[0]] = float(line.split()[-1])
    return out


def test_a_stored_trace_is_read_from_the_trace_copy_as_from_the_spans_table(
        spanhouse_factory, tmp_path):
    # The copy on from the first start, the recent index off: every lookup reads the store.
    copy_on = ("writer:\n  max_age_ms: 200\nstorage:\n  trace_copy_s: 86400\n"
               "query:\n  recent_max_bytes: 0\n")
    sh = spanhouse_factory(config=config(tmp_path, "copy", copy_on))
    sent = emit(sh)
    trace_id = sent["trace_id"]
    want = {s["span_id"] for s in sent["spans"]}
    deadline = time.monotonic() + 60
    while True:
        r = sh.get_trace(trace_id)
        if r.status_code == 200 and set(spans_by_id(r.json())) == want:
            break
        assert time.monotonic() < deadline, f"not stored within 60 s: {r.status_code}"
        time.sleep(0.2)
    before = copy_reads(sh)
    from_copy = read_now(sh, trace_id)
    assert set(from_copy) == want
    after = copy_reads(sh)
    assert after["copy"] == before["copy"] + 1, (before, after)
    assert after["spans"] == before["spans"]
    # The same answer from the spans table, the copy off (its table dropped at start).
    sh.config.write_text("writer:\n  max_age_ms: 200\nquery:\n  recent_max_bytes: 0\n")
    sh.restart()
    assert read_now(sh, trace_id) == from_copy
    assert copy_reads(sh) == {}
    r = sh.session.get(f"{sh.query_url}/metrics", timeout=30)
    assert 'table="trace_copy"' not in r.text
    assert 'table="spans"' in r.text
