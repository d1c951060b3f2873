"""The durable queue: acknowledged spans survive SIGKILL and a sink outage, stored once each.

A client sends small OTLP/JSON requests at a steady rate, every span with its own id, and
records which were answered 200 (acknowledged) and which got no clear answer (the
connection broke, or 503: those may or may not be stored). At the end the stored span ids
must hold every acknowledged one, nothing that was refused, and no id twice: counted by the
engine (`GET /debug/spans`: count() and uniqExact(span_id), and the calls red_1m's view
counted) and read back per trace through the query API.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict

import requests

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from conftest import describe_response, otlp_json_request, otlp_json_span, trace_span_ids

KILLS = 5
SETTLE_DEADLINE_S = 60.0


def metric(sh, name: str, labels: str = "") -> float:
    text = requests.get(f"{sh.query_url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if labels in line:
                total += float(line.rsplit(" ", 1)[1])
    return total


class SteadyClient(threading.Thread):
    """Sends 1-4 spans per request, about `rate` requests a second, until halted.

    Keeps going through refused connections and restarts (a killed spanhouse is down
    for a while); never retries a request, so a span is sent once.
    """

    def __init__(self, sh, trace_ids: list[str], rate: float, tag: str):
        super().__init__(daemon=True, name=f"client-{tag}")
        self.sh = sh
        self.trace_ids = trace_ids
        self.period = 1.0 / rate
        self.tag = tag
        self.acked: dict[str, set[str]] = defaultdict(set)
        self.unclear: dict[str, set[str]] = defaultdict(set)  # may or may not be stored
        self.refused: dict[str, set[str]] = defaultdict(set)  # answered 429: must not be stored
        self.responses: Counter = Counter()
        self.first_429_at: float | None = None
        self.unexpected = ""
        self._halt = threading.Event()

    def halt(self) -> None:
        self._halt.set()

    def acked_count(self) -> int:
        return sum(len(v) for v in self.acked.values())

    def run(self) -> None:
        session = requests.Session()
        prefix = os.urandom(3).hex()
        counter = 0
        i = 0
        next_at = time.monotonic()
        while not self._halt.is_set():
            i += 1
            trace_id = self.trace_ids[i % len(self.trace_ids)]
            spans = []
            for _ in range(1 + i % 4):
                counter += 1
                spans.append(otlp_json_span(trace_id, f"{prefix}{counter:010x}", f"{self.tag} {i}"))
            ids = {s["spanId"] for s in spans}
            try:
                resp = session.post(self.sh.traces_url,
                                    data=otlp_json_request(spans, f"durable-{self.tag}"),
                                    headers={"Content-Type": "application/json"}, timeout=20)
                status = resp.status_code
            except requests.RequestException:
                status = 0
                session.close()
                session = requests.Session()
            self.responses[status] += 1
            if status == 200:
                self.acked[trace_id] |= ids
            elif status == 429:
                self.refused[trace_id] |= ids
                if self.first_429_at is None:
                    self.first_429_at = time.monotonic()
            elif status in (0, 503):
                self.unclear[trace_id] |= ids
            else:
                self.unexpected = describe_response(resp)
                self.unclear[trace_id] |= ids
            next_at += self.period
            delay = next_at - time.monotonic()
            if delay > 0:
                self._halt.wait(delay)
            else:
                next_at = time.monotonic()
        session.close()


def debug_spans(sh, database: str = "") -> dict:
    query = f"?database={database}" if database else ""
    r = requests.get(f"{sh.query_url}/debug/spans{query}", timeout=30)
    assert r.status_code == 200, describe_response(r)
    return r.json()


def check_stored_once(sh, clients: list[SteadyClient], what: str) -> dict:
    """Waits until every acknowledged span is stored; asserts none twice and none refused."""
    acked: dict[str, set[str]] = defaultdict(set)
    allowed: dict[str, set[str]] = defaultdict(set)
    refused: dict[str, set[str]] = defaultdict(set)
    for c in clients:
        assert not c.unexpected, f"{what}: unexpected answer: {c.unexpected}"
        for t, ids in c.acked.items():
            acked[t] |= ids
            allowed[t] |= ids
        for t, ids in c.unclear.items():
            allowed[t] |= ids
        for t, ids in c.refused.items():
            refused[t] |= ids
    n_acked = sum(len(v) for v in acked.values())
    assert n_acked > 0, f"{what}: nothing acknowledged"
    stored_total = 0
    for trace_id, want in sorted(acked.items()):
        doc = sh.wait_for_trace(
            trace_id, lambda d, want=want: want <= set(trace_span_ids(d)),
            deadline_s=SETTLE_DEADLINE_S,
            what=f"{what}: not all {len(want)} acknowledged spans of the trace were stored")
        got = trace_span_ids(doc)
        dups = sorted(i for i, n in Counter(got).items() if n > 1)
        assert not dups, f"{what}: trace {trace_id}: {len(dups)} span ids stored twice, " \
                         f"e.g. {dups[:5]}\n{sh.diagnostics()}"
        stray = set(got) - allowed[trace_id]
        assert not stray, f"{what}: trace {trace_id}: stored spans that were refused or " \
                          f"never sent: {sorted(stray)[:5]} (refused: " \
                          f"{len(stray & refused[trace_id])})"
        stored_total += len(got)
    # The engine's own counts: every row a distinct span id, and the red_1m
    # view fed once per stored span (its tables deduplicate replays too).
    # Waited for together: the red_1m sum is a subquery of its own, which may
    # see the parts before or after an insert still landing.
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while True:
        counts = debug_spans(sh)
        if counts["rows"] == counts["unique_span_ids"] == counts["red_calls"] == stored_total \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert counts["rows"] == counts["unique_span_ids"] == stored_total, \
        f"{what}: engine counts {counts}, spans read back {stored_total}"
    assert counts["red_calls"] == counts["rows"], \
        f"{what}: red_1m counted {counts['red_calls']} calls for {counts['rows']} spans"
    return {"acked": n_acked, "stored": stored_total}


def write_config(tmp_path, name: str, extra: str = "", writer: str = "") -> object:
    """`extra`: more sections; `writer`: more lines of the writer section."""
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text("writer:\n  max_age_ms: 150\n  max_rows: 2000\n" + writer +
                   "debug:\n  fault_injection: true\n" + extra)
    return cfg


def test_sigkill_five_times_under_load_stores_every_acked_span_once(spanhouse_factory, tmp_path):
    sh = spanhouse_factory("crash", config=write_config(tmp_path, "crash"))
    traces = [os.urandom(16).hex() for _ in range(12)]
    client = SteadyClient(sh, traces, rate=150, tag="crash")
    client.start()
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    replayed = 0.0
    try:
        for k in range(KILLS):
            # A random moment: inserts happen every ~150 ms, so kills land before,
            # during and after them.
            time.sleep(rng.uniform(0.8, 2.5))
            before = client.acked_count()
            sh.stop(signal.SIGKILL)
            time.sleep(rng.uniform(0.0, 0.5))
            sh.start(keep_ports=True)
            replayed += metric(sh, "spanhouse_durable_queue_replayed_records_total")
            assert client.is_alive(), "the client stopped"
            print(f"kill {k + 1}: {before} spans acknowledged before it")
        time.sleep(1.0)
    finally:
        client.halt()
        client.join(timeout=60)
    result = check_stored_once(sh, [client], f"after {KILLS} SIGKILLs")
    assert replayed > 0, "no restart replayed anything: the kills never caught spans in flight"
    print(f"crash test: {result}, replayed records {replayed}, answers {dict(client.responses)}")


SECOND = "spanhouse_b"
SECOND_SINK = f"chdb:{SECOND}"


def check_second_sink_holds_the_same(sh, primary: dict, what: str) -> None:
    """The second sink's database: every span the primary stored, once each (both sinks are
    fed from the same records of the durable queue), and its red_1m fed once per span."""
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while True:
        counts = debug_spans(sh, SECOND)
        if counts["rows"] == counts["unique_span_ids"] == counts["red_calls"] == primary["stored"] \
                or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert counts["rows"] == counts["unique_span_ids"] == primary["stored"], \
        f"{what}: second sink {counts}, primary stored {primary['stored']}\n{sh.diagnostics()}"
    assert counts["red_calls"] == counts["rows"], f"{what}: second sink's red_1m {counts}"


def test_two_sinks_sigkill_under_load_each_stores_every_acked_span_once(spanhouse_factory,
                                                                         tmp_path):
    """Two sinks (the embedded store and a second database of it), each with its own place in
    the durable queue: after kill -9 three times under load, each holds every acknowledged
    span exactly once."""
    cfg = write_config(tmp_path, "two-sinks", f"secondary:\n  type: chdb\n  database: {SECOND}\n")
    sh = spanhouse_factory("two-sinks", config=cfg)
    traces = [os.urandom(16).hex() for _ in range(8)]
    client = SteadyClient(sh, traces, rate=120, tag="two-sinks")
    client.start()
    rng = random.Random(int.from_bytes(os.urandom(4), "little"))
    try:
        for _ in range(3):
            time.sleep(rng.uniform(0.8, 2.5))
            sh.stop(signal.SIGKILL)
            time.sleep(rng.uniform(0.0, 0.5))
            sh.start(keep_ports=True)
            assert client.is_alive(), "the client stopped"
        time.sleep(1.0)
        sealed = metric(sh, "spanhouse_durable_queue_blocks_sealed_total", f'sink="{SECOND_SINK}"')
    finally:
        client.halt()
        client.join(timeout=60)
    result = check_stored_once(sh, [client], "two sinks, after 3 SIGKILLs")
    check_second_sink_holds_the_same(sh, result, "two sinks, after 3 SIGKILLs")
    assert sealed > 0, "the second sink sealed no block since the last start"
    print(f"two-sink crash test: {result}, answers {dict(client.responses)}")


def test_a_failing_second_sink_holds_back_only_itself_and_catches_up(spanhouse_factory,
                                                                     tmp_path):
    """The second sink's inserts fail for a while (and spanhouse is killed meanwhile): the
    primary keeps storing, nothing is refused (the durable queue has room), the second sink's
    requests wait on disk; once it is back it catches up, and each sink holds every
    acknowledged span once."""
    cfg = write_config(tmp_path, "second-down",
                       f"secondary:\n  type: chdb\n  database: {SECOND}\n"
                       "queue:\n  max_bytes: 2MiB\n  wait_ms: 0\n"
                       "otlp_http:\n  max_body_bytes: 256KiB\n")
    sh = spanhouse_factory("second-down", config=cfg)
    traces = [os.urandom(16).hex() for _ in range(6)]
    client = SteadyClient(sh, traces, rate=120, tag="second-down")
    client.start()

    def fail_second(on: bool) -> None:
        r = requests.post(f"{sh.query_url}/debug/sink?sink={SECOND_SINK}&fail_inserts="
                          f"{'true' if on else 'false'}", timeout=10)
        assert r.status_code == 200, r.text

    try:
        time.sleep(1.0)
        fail_second(True)
        down_at = debug_spans(sh, SECOND)["rows"]
        primary_at = debug_spans(sh)["rows"]
        # The primary goes on storing while the second sink's memory share fills and its
        # requests wait in its backlog on disk.
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
            waiting = metric(sh, "spanhouse_durable_queue_spilled_waiting_requests",
                             f'sink="{SECOND_SINK}"')
            if waiting > 0 and debug_spans(sh)["rows"] > primary_at + 200:
                break
        assert waiting > 0, f"the second sink's requests never waited on disk\n{sh.diagnostics()}"
        assert debug_spans(sh)["rows"] > primary_at + 200, "the primary stopped storing"
        assert debug_spans(sh, SECOND)["rows"] <= down_at + 2000  # at most an insert in flight
        assert metric(sh, "spanhouse_durable_queue_spilled_waiting_requests",
                      'sink="chdb"') == 0, "the healthy sink was held back"
        assert client.responses[429] == 0 and client.responses[503] == 0, dict(client.responses)
        # Killed while the second sink is behind: the restart hands it its backlog.
        sh.stop(signal.SIGKILL)
        sh.start(keep_ports=True)
        time.sleep(2.0)
    finally:
        client.halt()
        client.join(timeout=60)
    result = check_stored_once(sh, [client], "second sink down, killed, back")
    check_second_sink_holds_the_same(sh, result, "second sink down, killed, back")
    assert metric(sh, "spanhouse_sink_rows_lost_total") == 0
    print(f"second-sink outage test: {result}, answers {dict(client.responses)}")


def test_fsync_always_acks_survive_sigkill_stored_once(spanhouse_factory, tmp_path):
    """`durable.fsync: always`: each 200 comes from the durable queue's sync thread after
    the fdatasync that covers its request (the answer deferred, the HTTP I/O thread free);
    what was acknowledged survives SIGKILL and is stored once."""
    sh = spanhouse_factory("always", config=write_config(tmp_path, "always",
                                                         "durable:\n  fsync: always\n"))
    traces = [os.urandom(16).hex() for _ in range(6)]
    client = SteadyClient(sh, traces, rate=100, tag="always")
    client.start()
    fsyncs = 0.0
    try:
        for _ in range(2):
            time.sleep(1.5)
            sh.stop(signal.SIGKILL)
            sh.start(keep_ports=True)
        time.sleep(1.5)
        fsyncs = metric(sh, "spanhouse_durable_queue_fsyncs_total")
    finally:
        client.halt()
        client.join(timeout=60)
    assert fsyncs > 0, "no fsync with durable.fsync: always"
    result = check_stored_once(sh, [client], "fsync always, after 2 SIGKILLs")
    print(f"fsync-always test: {result}, fsyncs since the last start {fsyncs}, "
          f"answers {dict(client.responses)}")


def test_kill_right_after_an_insert_replays_it_without_storing_it_twice(spanhouse_factory,
                                                                          tmp_path):
    """The ambiguous case, forced: the block is stored, the process dies before its records
    leave the queue. The replay inserts the same block with the same token: refused as a
    duplicate by the engine (spans and the views' tables alike). The restart also changes
    writer.threads (2 -> 1): the block is formed again by the shard count it was logged under."""
    cfg = write_config(tmp_path, "ambiguous", writer="  threads: 2\n")
    sh = spanhouse_factory("ambiguous", config=cfg)
    r = requests.post(f"{sh.query_url}/debug/sink?kill_after_insert=true", timeout=10)
    assert r.status_code == 200, r.text
    traces = [os.urandom(16).hex() for _ in range(4)]
    client = SteadyClient(sh, traces, rate=50, tag="ambiguous")
    client.start()
    try:
        deadline = time.monotonic() + 30
        while sh.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sh.proc.poll() is not None, "spanhouse did not kill itself after an insert"
        sh.stop(signal.SIGKILL)  # records the exit
        cfg.write_text(cfg.read_text().replace("  threads: 2\n", "  threads: 1\n"))
        sh.start(keep_ports=True)
        assert metric(sh, "spanhouse_durable_queue_replayed_blocks_total") > 0, sh.diagnostics()
        time.sleep(1.0)
    finally:
        client.halt()
        client.join(timeout=60)
    result = check_stored_once(sh, [client], "after a kill between insert and release")
    print(f"ambiguous-insert test: {result}")


def test_sink_outage_then_recovery_nothing_lost_or_doubled_429_only_when_queue_full(
        spanhouse_factory, tmp_path):
    outage_s = float(os.environ.get("SPANHOUSE_OUTAGE_S", "60"))
    # The memory budget below the durable queue, as with the defaults (512 MiB
    # and 1 GiB), both small: the budget is spent within seconds, then
    # requests wait on disk (spilled), and only a full durable queue refuses.
    cfg = write_config(tmp_path, "outage", "durable:\n  max_bytes: 1MiB\n"
                                           "queue:\n  max_bytes: 1MiB\n  wait_ms: 0\n"
                                           "otlp_http:\n  max_body_bytes: 256KiB\n")
    sh = spanhouse_factory("outage", config=cfg)
    traces = [os.urandom(16).hex() for _ in range(8)]
    client = SteadyClient(sh, traces, rate=100, tag="outage")
    client.start()
    try:
        time.sleep(2.0)
        assert client.responses[429] == 0, "429 before the outage"
        r = requests.post(f"{sh.query_url}/debug/sink?fail_inserts=true", timeout=10)
        assert r.status_code == 200, r.text
        t0 = time.monotonic()
        full_seen = False
        # At least outage_s, and on until the durable queue has filled (a slow,
        # loaded machine sends fewer requests per second).
        while time.monotonic() - t0 < outage_s or (not full_seen and
                                                   time.monotonic() - t0 < 4 * outage_s):
            time.sleep(1.0)
            if client.first_429_at is not None and not full_seen:
                # Refusals come from the full durable queue only, not the memory budget.
                limit = metric(sh, "spanhouse_durable_queue_limit_bytes")
                used = metric(sh, "spanhouse_durable_queue_bytes")
                assert used > limit * 0.8, f"429 with the durable queue at {used} of {limit}"
                full_seen = True
        assert full_seen, f"no 429 in a {4 * outage_s:.0f} s outage with a 1 MiB durable queue: " \
                          f"{dict(client.responses)}"
        # The memory budget was spent long before: those requests waited on disk.
        assert metric(sh, "spanhouse_durable_queue_spilled_requests_total") > 0, sh.diagnostics()
        assert metric(sh, "spanhouse_receiver_rejected_requests_total",
                      'reason="durable_queue_full"') > 0
        assert metric(sh, "spanhouse_receiver_rejected_requests_total",
                      'reason="memory_limit"') == 0
        assert metric(sh, "spanhouse_sink_insert_errors_by_class_total",
                      'class="retryable"') > 0
        r = requests.post(f"{sh.query_url}/debug/sink?fail_inserts=false", timeout=10)
        assert r.status_code == 200, r.text
        # Taken again once the queue drains.
        acked_at_recovery = client.acked_count()
        deadline = time.monotonic() + SETTLE_DEADLINE_S
        while client.acked_count() < acked_at_recovery + 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.acked_count() >= acked_at_recovery + 100, "no recovery after the outage"
    finally:
        client.halt()
        client.join(timeout=60)
    result = check_stored_once(sh, [client], "after a sink outage")
    spilled = metric(sh, "spanhouse_durable_queue_spilled_spans_total")
    assert metric(sh, "spanhouse_durable_queue_spilled_queued_spans_total") == spilled
    assert metric(sh, "spanhouse_durable_queue_spilled_waiting_requests") == 0
    assert metric(sh, "spanhouse_durable_queue_spilled_read_errors_total") == 0
    assert metric(sh, "spanhouse_sink_rows_lost_total") == 0
    assert metric(sh, "spanhouse_sink_dead_letter_rows_total") == 0
    print(f"outage test: {result}, spilled spans {spilled:.0f}, answers {dict(client.responses)}")


def test_replay_drops_and_trims_what_the_filter_did_when_the_request_came(spanhouse_factory,
                                                                          tmp_path):
    """The log keeps the request as it came (protobuf) with the receive time; read back after a
    crash it is filtered again against that time: the span the client was told was rejected
    stays out, the value that was cut is stored cut."""
    sh = spanhouse_factory("refilter", config=write_config(tmp_path, "refilter",
                                                           "filter:\n  max_value_bytes: 16\n"))
    r = requests.post(f"{sh.query_url}/debug/sink?fail_inserts=true", timeout=10)
    assert r.status_code == 200, r.text
    now = time.time_ns()
    trace = os.urandom(16)
    good = Span(trace_id=trace, span_id=os.urandom(8), name="good", start_time_unix_nano=now,
                end_time_unix_nano=now + 1_000_000,
                attributes=[KeyValue(key="query", value=AnyValue(
                    string_value="SELECT * FROM carts WHERE id = 42"))])
    future = Span(trace_id=trace, span_id=os.urandom(8), name="two hours ahead",
                  start_time_unix_nano=now + 2 * 3600 * 10**9,
                  end_time_unix_nano=now + 2 * 3600 * 10**9 + 1_000_000)
    req = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource=Resource(attributes=[KeyValue(key="service.name",
                                               value=AnyValue(string_value="refilter"))]),
        scope_spans=[ScopeSpans(spans=[good, future])])])
    resp = sh.post_traces(req.SerializeToString(), "application/x-protobuf")
    assert resp.status_code == 200, describe_response(resp)
    answer = ExportTraceServiceResponse.FromString(resp.content)
    assert answer.partial_success.rejected_spans == 1, answer
    # Not stored (inserts fail), in the log: killed, then replayed at start.
    sh.stop(signal.SIGKILL)
    sh.start(keep_ports=True)
    assert metric(sh, "spanhouse_durable_queue_replayed_records_total") >= 1, sh.diagnostics()
    doc = sh.wait_for_trace(trace.hex(), lambda d: len(trace_span_ids(d)) >= 1,
                            deadline_s=SETTLE_DEADLINE_S, what="the replayed span")
    spans = doc["data"][0]["spans"]
    assert [s["operationName"] for s in spans] == ["good"], spans
    tags = {t["key"]: t["value"] for t in spans[0]["tags"]}
    assert tags["query"] == "SELECT * FROM ca", tags
    time.sleep(1.0)  # anything else would have been in the same insert
    assert debug_spans(sh)["rows"] == 1


def test_permanent_insert_error_goes_to_the_dead_letter_file(spanhouse_factory, tmp_path):
    sh = spanhouse_factory("deadletter", config=write_config(tmp_path, "deadletter"))
    r = requests.post(f"{sh.query_url}/debug/sink?fail_permanent=true", timeout=10)
    assert r.status_code == 200, r.text
    trace_id = os.urandom(16).hex()
    spans = [otlp_json_span(trace_id, os.urandom(8).hex()) for _ in range(7)]
    resp = requests.post(sh.traces_url, data=otlp_json_request(spans, "dead"),
                         headers={"Content-Type": "application/json"}, timeout=20)
    assert resp.status_code == 200, describe_response(resp)
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while metric(sh, "spanhouse_sink_dead_letter_rows_total") < 7:
        assert time.monotonic() < deadline, "not dead-lettered\n" + sh.diagnostics()
        time.sleep(0.2)
    assert metric(sh, "spanhouse_sink_insert_errors_by_class_total", 'class="permanent"') >= 1
    index = sh.data_dir / "dead-letter" / "index.tsv"
    lines = index.read_text().splitlines()
    assert len(lines) == 1, lines
    fields = lines[0].split("\t")
    assert fields[4] == "7" and "TYPE_MISMATCH" in fields[5], fields
    block = sh.data_dir / "dead-letter" / fields[1]
    assert block.stat().st_size > 0
    # Out of the durable queue: a restart does not try them again.
    requests.post(f"{sh.query_url}/debug/sink?fail_permanent=false", timeout=10)
    sh.restart()
    assert metric(sh, "spanhouse_durable_queue_replayed_spans_total") == 0
    assert debug_spans(sh)["rows"] == 0
