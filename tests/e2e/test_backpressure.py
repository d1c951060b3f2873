"""Back-pressure: a slowed sink makes spanhouse answer 429 + Retry-After, the
real OpenTelemetry SDK exporter retries, and once the sink recovers every
span the SDK reports as exported is stored exactly once.

With the durable queue (the default) the memory budget spills to disk and the
429 comes when the durable queue is full; without it, when the memory budget
is spent."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import requests

from conftest import E2E_DIR, clean_env


def metric(sh, name: str, labels: str = "") -> float:
    text = requests.get(f"{sh.query_url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and labels in line and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_slow_sink_gives_429_sdk_retries_nothing_lost_or_doubled(spanhouse_factory, tmp_path):
    cfg = tmp_path / "bp.yaml"
    cfg.write_text(
        "otlp_http:\n  max_body_bytes: 1MiB\n"
        "queue:\n  max_bytes: 1MiB\n"
        "durable:\n  max_bytes: 2MiB\n"
        "writer:\n  max_rows: 1000\n  max_age_ms: 20\n"
        "debug:\n  fault_injection: true\n")
    sh = spanhouse_factory("bp", config=cfg)
    # The memory budget must run out before the log fills. While the first
    # insert stalls, the writer takes two more inserts' worth of spans off
    # the queue (max_age_ms each) and then blocks; the queue fills next. The
    # three inserts' records stay in the log: at max_age_ms 100 a fast flood
    # put enough in them to fill the 2 MiB log before the queue's 1 MiB; at
    # 20 each holds a request or so.

    r = requests.post(f"{sh.query_url}/debug/sink?insert_delay_ms=1500", timeout=10)
    assert r.status_code == 200, r.text

    run_id = uuid.uuid4().hex
    n_spans = 12000
    flood = subprocess.Popen(
        [sys.executable, str(E2E_DIR / "sdk_flood.py"), "--endpoint", sh.traces_url,
         "--spans", str(n_spans), "--run-id", run_id],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        # Wait until spanhouse has refused with 429 at least once, then let the sink recover.
        deadline = time.time() + 90
        while metric(sh, "spanhouse_receiver_rejected_requests_total",
                     'reason="durable_queue_full"') == 0:
            assert flood.poll() is None or time.time() < deadline, "the flood ended without any 429"
            assert time.time() < deadline, "no 429 within 90 s\n" + sh.diagnostics()
            time.sleep(0.2)
        r = requests.post(f"{sh.query_url}/debug/sink?insert_delay_ms=0", timeout=10)
        assert r.status_code == 200, r.text
        out, err = flood.communicate(timeout=300)
    finally:
        if flood.poll() is None:
            flood.kill()
    assert flood.returncode == 0, err[-4000:]
    result = json.loads(out)
    exported = result["exported"]
    assert result["failed"] == 0, f"the SDK gave up on {result['failed']} spans\n{err[-3000:]}"
    assert len(exported) == len(set(exported)) == n_spans + n_spans // 10

    # Every exported span stored, none twice: the count of this run's spans
    # settles at exactly the number exported.
    deadline = time.time() + 60
    count = -1
    while time.time() < deadline:
        count = requests.get(f"{sh.query_url}/api/spans/count",
                             params={"resource_attr": "flood.run_id", "value": run_id},
                             timeout=30).json()["count"]
        if count >= len(exported):
            break
        time.sleep(0.5)
    assert count == len(exported), f"stored {count}, exported {len(exported)}"
    rejected = metric(sh, "spanhouse_receiver_rejected_requests_total",
                      'reason="durable_queue_full"')
    assert rejected > 0
    # The memory budget was spent first: requests waited on disk, none refused for memory.
    assert metric(sh, "spanhouse_durable_queue_spilled_requests_total") > 0, (
        "no request waited on disk\n" + "\n".join(
            line for line in requests.get(f"{sh.query_url}/metrics", timeout=10).text.splitlines()
            if line.startswith(("spanhouse_receiver", "spanhouse_durable", "spanhouse_queue"))))
    assert metric(sh, "spanhouse_receiver_rejected_requests_total", 'reason="memory_limit"') == 0
    assert metric(sh, "spanhouse_sink_rows_lost_total") == 0


def test_429_carries_retry_after(spanhouse_factory, tmp_path):
    """Without the durable queue the memory budget is what refuses."""
    cfg = tmp_path / "full.yaml"
    cfg.write_text("otlp_http:\n  max_body_bytes: 1MiB\nqueue:\n  max_bytes: 1MiB\n"
                   "durable:\n  enabled: false\n"
                   "writer:\n  max_age_ms: 100\n  insert_rows: 1\n"
                   "debug:\n  fault_injection: true\n")
    sh = spanhouse_factory("full", config=cfg)
    # Inserts fail: once one insert is being retried and the next waits, the
    # writer stops draining the queue, and spans pile up there until the
    # 1 MiB budget is spent.
    r = requests.post(f"{sh.query_url}/debug/sink?fail_inserts=true", timeout=10)
    assert r.status_code == 200, r.text
    saw_429 = None
    for i in range(400):
        now = time.time_ns()  # spans without times would be dropped by the filter as too old
        spans = ",".join(
            '{"traceId":"%032x","spanId":"%016x","name":"%s","startTimeUnixNano":"%d",'
            '"endTimeUnixNano":"%d"}' % (i * 1000 + k + 1, i * 1000 + k + 1, "n" * 100, now,
                                         now + 1000)
            for k in range(50))
        body = '{"resourceSpans":[{"scopeSpans":[{"spans":[%s]}]}]}' % spans
        r = requests.post(sh.traces_url, data=body, headers={"Content-Type": "application/json"},
                          timeout=10)
        if r.status_code == 429:
            saw_429 = r
            break
        assert r.status_code == 200, r.text
    assert saw_429 is not None, "the budget never filled"
    assert saw_429.headers.get("Retry-After") == "1"
    assert re.search(r"memory limit", saw_429.json()["message"])
    # The store back: everything accepted is written by the shutdown.
    r = requests.post(f"{sh.query_url}/debug/sink?fail_inserts=false", timeout=10)
    assert r.status_code == 200, r.text
