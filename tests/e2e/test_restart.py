"""SIGTERM under load loses no acknowledged span, across two stop/restart cycles."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter, defaultdict

import requests

from conftest import describe_response, otlp_json_request, otlp_json_span, trace_span_ids

LOAD_BEFORE_SIGTERM_S = 3.0       # let the client run this long (or until MIN_ACKED)...
MIN_ACKED_REQUESTS = 1500         # ...whichever comes first, before SIGTERM
CLIENT_MAX_REQUESTS = 100_000     # hard bounds on the client loop
CLIENT_MAX_SECONDS = 60.0


class LoadClient(threading.Thread):
    """Sends small OTLP/JSON requests (1-5 spans with unique ids) as fast as it can.

    Records the span ids of every request answered 200 (acked) and of every
    request sent at all (attempted). Stops on a connection error, a 503, an
    unexpected status, or its count/time bounds.
    """

    def __init__(self, url: str, trace_ids: list[str], tag: str):
        super().__init__(daemon=True, name=f"load-{tag}")
        self.url = url
        self.trace_ids = trace_ids
        self.tag = tag
        self.acked: dict[str, set[str]] = defaultdict(set)
        self.attempted: dict[str, set[str]] = defaultdict(set)
        self.acked_requests = 0
        self.responses = Counter()
        self.stop_reason = ""
        self.unexpected = ""
        self._halt = threading.Event()

    def halt(self) -> None:
        self._halt.set()

    def run(self) -> None:
        session = requests.Session()
        deadline = time.monotonic() + CLIENT_MAX_SECONDS
        prefix = os.urandom(4).hex()
        counter = 0
        try:
            for i in range(CLIENT_MAX_REQUESTS):
                if self._halt.is_set():
                    self.stop_reason = "halted by the test"
                    return
                if time.monotonic() > deadline:
                    self.stop_reason = "time bound reached"
                    return
                trace_id = self.trace_ids[i % len(self.trace_ids)]
                spans = []
                for _ in range(1 + i % 5):
                    counter += 1
                    spans.append(otlp_json_span(trace_id, f"{prefix}{counter:08x}",
                                                f"{self.tag} req {i}"))
                ids = [s["spanId"] for s in spans]
                self.attempted[trace_id].update(ids)
                try:
                    resp = session.post(self.url, data=otlp_json_request(spans, "restart-load"),
                                        headers={"Content-Type": "application/json"},
                                        timeout=30)
                except requests.RequestException as e:
                    self.stop_reason = f"connection error: {type(e).__name__}"
                    return
                self.responses[resp.status_code] += 1
                if resp.status_code == 200:
                    self.acked[trace_id].update(ids)
                    self.acked_requests += 1
                elif resp.status_code == 503:
                    self.stop_reason = "503"
                    return
                elif resp.status_code == 429:
                    time.sleep(0.05)  # queue full: back off a little, keep going
                else:
                    self.unexpected = describe_response(resp)
                    self.stop_reason = f"unexpected HTTP {resp.status_code}"
                    return
            self.stop_reason = "count bound reached"
        finally:
            session.close()


def run_load_and_sigterm(sh, trace_ids: list[str], tag: str) -> LoadClient:
    client = LoadClient(sh.traces_url, trace_ids, tag)
    client.start()
    t_end = time.monotonic() + LOAD_BEFORE_SIGTERM_S
    while time.monotonic() < t_end and client.acked_requests < MIN_ACKED_REQUESTS \
            and client.is_alive():
        time.sleep(0.02)
    assert client.is_alive(), \
        f"{tag}: the load client stopped before SIGTERM: {client.stop_reason} " \
        f"{client.unexpected}\n{sh.diagnostics()}"
    acked_at_signal = client.acked_requests
    rc = sh.stop(signal.SIGTERM)
    client.join(timeout=60)
    if client.is_alive():
        client.halt()
        client.join(timeout=30)
    assert not client.is_alive(), f"{tag}: load client did not stop"
    assert not client.unexpected, f"{tag}: unexpected answer: {client.unexpected}"
    assert client.stop_reason.startswith("connection error") or client.stop_reason == "503", \
        f"{tag}: the client should have stopped on a refused connection or 503 after " \
        f"SIGTERM, but stopped because: {client.stop_reason}"
    assert rc == 0, f"{tag}: spanhouse exited with {rc} after SIGTERM under load, want 0 " \
                    f"(it acked {client.acked_requests} requests)\n{sh.diagnostics()}"
    assert acked_at_signal > 0, f"{tag}: no request was acked before SIGTERM"
    return client


def check_all_acked_present(sh, clients: list[LoadClient], when: str) -> None:
    acked: dict[str, set[str]] = defaultdict(set)
    attempted: dict[str, set[str]] = defaultdict(set)
    for c in clients:
        for t, ids in c.acked.items():
            acked[t] |= ids
        for t, ids in c.attempted.items():
            attempted[t] |= ids
    assert acked, "nothing acked"
    for trace_id, want in sorted(acked.items()):
        doc = sh.wait_for_trace(
            trace_id, lambda d, want=want: want <= set(trace_span_ids(d)), deadline_s=20,
            what=f"{when}: did not return all {len(want)} acknowledged spans")
        got = trace_span_ids(doc)
        counts = Counter(got)
        dups = sorted(i for i, n in counts.items() if n > 1)
        assert not dups, f"{when}: trace {trace_id}: {len(dups)} span ids returned more than " \
                         f"once, e.g. {dups[:10]}"
        unknown = set(got) - attempted[trace_id]
        assert not unknown, f"{when}: trace {trace_id}: spans never sent: {sorted(unknown)[:10]}"
        assert len(doc["data"]) == 1 and doc["data"][0]["traceID"] == trace_id


def test_sigterm_under_load_keeps_acknowledged_spans(spanhouse):
    sh = spanhouse
    cycle1_traces = [os.urandom(16).hex() for _ in range(6)]
    c1 = run_load_and_sigterm(sh, cycle1_traces, "cycle 1")
    sh.start(keep_ports=True)
    check_all_acked_present(sh, [c1], "after restart 1")

    # Second cycle: new traces, plus more spans into two traces of the first cycle.
    cycle2_traces = [os.urandom(16).hex() for _ in range(4)] + cycle1_traces[:2]
    c2 = run_load_and_sigterm(sh, cycle2_traces, "cycle 2")
    sh.start(keep_ports=True)
    check_all_acked_present(sh, [c1, c2], "after restart 2 (all spans of both cycles)")

    total = sum(len(v) for c in (c1, c2) for v in c.acked.values())
    print(f"acked spans: cycle 1 {sum(len(v) for v in c1.acked.values())} "
          f"({c1.acked_requests} requests, {dict(c1.responses)}, stop: {c1.stop_reason}); "
          f"cycle 2 {sum(len(v) for v in c2.acked.values())} ({c2.acked_requests} requests, "
          f"{dict(c2.responses)}, stop: {c2.stop_reason}); total {total}")
