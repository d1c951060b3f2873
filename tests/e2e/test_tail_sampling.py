"""Tail sampling end to end: every error and every slow trace kept whole, the rest within the
rate limit, a trace whose spans straddle its window kept whole, a restart with windows open,
a memory budget too small for the window, and RED metrics equal to an unsampled run's.

Each trace: web (root) -> api -> store. Its first request carries the root and the api span;
the store span (where the errors are) comes in a second request, or, for the straddlers, after
the trace's window has closed.
"""

from __future__ import annotations

import random
import signal
import time

import pytest

from conftest import Spanhouse
from test_sampling import config, get, hexid, metric, post, span_keys

S = 1_000_000_000
MS = 1_000_000
POLICIES = "error; latency 500ms; rate 2/s"
SERVICES = ("web", "api", "store")


def traces(n: int, now_ns: int, seed: int, straddlers: int, slow_ms: int = 700) -> list[dict]:
    """n traces, 5% with an error on the store span, 5% slow (api `slow_ms`); then `straddlers`
    with an error on the root and as many plain ones, whose store span is sent late."""
    rng = random.Random(seed)
    out = []
    for t in range(n + 2 * straddlers):
        kind = "plain"
        if t >= n:
            kind = "straddle_error" if t < n + straddlers else "straddle_plain"
        elif rng.random() < 0.05:
            kind = "error"
        elif rng.random() < 0.05:
            kind = "slow"
        tid = rng.randbytes(16)
        t0 = now_ns - rng.randrange(60 * S, 120 * S)
        d_api = slow_ms * MS if kind == "slow" else int(rng.lognormvariate(15.5, 0.6))
        web, api = rng.randbytes(8), rng.randbytes(8)
        spans = [
            {"service": "web", "trace_id": tid, "span_id": web, "name": "GET /cart",
             "kind": "server", "start": t0, "end": t0 + d_api + 2 * MS,
             "error": kind == "straddle_error"},
            {"service": "api", "trace_id": tid, "span_id": api, "parent": web,
             "name": "cart.get", "kind": "server", "start": t0 + MS, "end": t0 + MS + d_api},
            {"service": "store", "trace_id": tid, "span_id": rng.randbytes(8), "parent": api,
             "name": "SELECT", "kind": "server", "start": t0 + MS,
             "end": t0 + MS + d_api // 2, "error": kind == "error"},
        ]
        out.append({"kind": kind, "id": hexid(tid), "spans": spans})
    return out


QUANTILE_RANK_ERROR = 0.02


def rank_band(sorted_values: list[float], q: float) -> tuple[float, float]:
    """The values whose rank is within QUANTILE_RANK_ERROR of quantile q (inclusive)."""
    n = len(sorted_values)
    lo = max(0, int((q - QUANTILE_RANK_ERROR) * n))
    hi = min(n - 1, int((q + QUANTILE_RANK_ERROR) * n))
    return sorted_values[lo], sorted_values[hi]


def counter(sh: Spanhouse, name: str) -> float:
    """An unlabelled sample of /metrics."""
    for line in sh.session.get(f"{sh.query_url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def stored(sh: Spanhouse, start_ns: int, end_ns: int) -> set[tuple[str, str]]:
    keys: set[tuple[str, str]] = set()
    for service in SERVICES:
        got = span_keys(sh, service, start_ns, end_ns)
        assert len(got) == len(set(got)), f"{service}: a span stored twice"
        keys |= set(got)
    return keys


def keys_of(trace: dict) -> set[tuple[str, str]]:
    return {(hexid(s["trace_id"]), hexid(s["span_id"])) for s in trace["spans"]}


def settle(sh: Spanhouse, must: set, start_ns: int, end_ns: int,
           deadline_s: float = 120) -> set[tuple[str, str]]:
    """The stored spans once every span in `must` is stored and nothing more came for 2 s."""
    deadline = time.monotonic() + deadline_s
    last, since = None, time.monotonic()
    while True:
        got = stored(sh, start_ns, end_ns)
        if got != last:
            last, since = got, time.monotonic()
        elif must <= got and time.monotonic() - since > 2:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"{len(must - got)} spans of traces that must be kept not stored after "
                        f"{deadline_s:.0f}s\n{sh.diagnostics()}", pytrace=False)
        time.sleep(0.5)


def check_whole(corpus: list[dict], got: set) -> list[dict]:
    """Every trace stored whole or not at all; returns the stored ones."""
    kept = []
    for t in corpus:
        k = keys_of(t)
        have = k & got
        assert not have or have == k, f"trace {t['id']} ({t['kind']}) stored in part: " \
                                      f"{len(have)} of {len(k)} spans"
        if have:
            kept.append(t)
    assert len({k for t in corpus for k in keys_of(t)} | got) == \
        len({k for t in corpus for k in keys_of(t)}), "spans stored that were never sent"
    return kept


def send(sh: Spanhouse, corpus: list[dict], part: str) -> None:
    if part == "first":
        spans = [s for t in corpus for s in t["spans"][:2]]
    elif part == "second":
        spans = [t["spans"][2] for t in corpus if not t["kind"].startswith("straddle")]
    else:
        spans = [t["spans"][2] for t in corpus if t["kind"].startswith("straddle")]
    post(sh, spans, per_request=1000)


def tail_config(tmp_path, name: str, wait_ms: int):
    return config(tmp_path, name, f"sampling:\n  tail:\n    policies: \"{POLICIES}\"\n"
                                  f"    decision_wait_ms: {wait_ms}\n")


def test_tail_sampling_keeps_errors_and_slow_traces_whole_and_the_rest_within_the_rate(
        spanhouse_factory, tmp_path):
    wait_ms = 2000
    sh = spanhouse_factory(name="tail", config=tail_config(tmp_path, "tail", wait_ms))
    off = spanhouse_factory(name="off")  # the same spans, all kept
    now = time.time_ns()
    corpus = traces(3000, now, seed=28, straddlers=30)
    began = time.monotonic()
    send(sh, corpus, "first")
    send(sh, corpus, "second")
    time.sleep(wait_ms / 1000 + 1.5)  # the straddlers' windows have closed
    send(sh, corpus, "late")
    for part in ("first", "second", "late"):
        send(off, corpus, part)
    must = {k for t in corpus if t["kind"] in ("error", "slow", "straddle_error")
            for k in keys_of(t)}
    start_ns, end_ns = now - 3600 * S, now + 60 * S
    got = settle(sh, must, start_ns, end_ns)
    elapsed = time.monotonic() - began
    kept = check_whole(corpus, got)
    by_rate = [t for t in kept if t["kind"] in ("plain", "straddle_plain")]
    # A token bucket of 2/s with a burst of 2, over every second decisions were made in.
    assert 1 <= len(by_rate) <= 2 * elapsed + 2, (len(by_rate), elapsed)
    plain = sum(t["kind"] in ("plain", "straddle_plain") for t in corpus)
    assert len(by_rate) < plain / 10

    # Each kept trace's root names the policy that kept it.
    want_policy = {"error": "error", "straddle_error": "error", "slow": "latency 500ms",
                   "plain": "rate 2/s", "straddle_plain": "rate 2/s"}
    for kind in want_policy:
        sample = next((t for t in kept if t["kind"] == kind), None)
        if sample is None:
            assert kind.startswith("straddle_plain") or kind == "plain"
            continue
        doc = sh.get_trace(sample["id"]).json()
        spans = doc["data"][0]["spans"]
        assert len(spans) == 3
        root = next(s for s in spans if not s["references"])
        tags = {t["key"]: t["value"] for t in root["tags"]}
        assert tags.get("sampling.policy") == want_policy[kind], (kind, tags)

    # The counters: traces by the policy that kept them; spans kept and dropped.
    n_error = sum(t["kind"] in ("error", "straddle_error") for t in corpus)
    n_slow = sum(t["kind"] == "slow" for t in corpus)
    assert metric(sh, "spanhouse_sampling_traces_total",
                  'policy="error",decision="kept"') == n_error
    assert metric(sh, "spanhouse_sampling_traces_total",
                  'policy="latency 500ms",decision="kept"') == n_slow
    assert metric(sh, "spanhouse_sampling_traces_total",
                  'policy="rate 2/s",decision="kept"') == len(by_rate)
    assert metric(sh, "spanhouse_sampling_traces_total",
                  'policy="tail",decision="dropped"') == len(corpus) - len(kept)
    assert metric(sh, "spanhouse_sampling_spans_total", 'policy="tail",decision="kept"') == \
        3 * len(kept)
    assert counter(sh, "spanhouse_sampling_tail_late_spans_total") == 60
    # The late spans came in one request, handed on without waiting for a window.
    assert counter(sh, "spanhouse_sampling_tail_late_requests_total") == 1
    info = get(sh, "/api/spanhouse/sampling")["data"]
    assert info["tail"]["policies"] == POLICIES
    assert info["tail"]["kept"]["error"] == n_error
    assert info["keptShare"] == pytest.approx(len(kept) / len(corpus))

    # RED counts every span, stored or not: calls and errors per service are what was sent.
    end_ms = (now // S // 60 + 1) * 60 * 1000
    window = {"endTs": end_ms, "lookback": 30 * 60 * 1000}
    rows = {r["service"]: r for r in get(sh, "/api/spanhouse/services/summary", window)["data"]}
    store_errors = sum(t["kind"] == "error" for t in corpus)
    web_errors = sum(t["kind"] == "straddle_error" for t in corpus)
    assert {s: (rows[s]["calls"], rows[s]["errors"]) for s in SERVICES} == {
        "web": (len(corpus), web_errors), "api": (len(corpus), 0),
        "store": (len(corpus), store_errors)}
    # Latency percentiles equal the unsampled run's (t-digest states merged in another order).
    deadline = time.monotonic() + 60
    while True:
        unsampled = {r["service"]: r
                     for r in get(off, "/api/spanhouse/services/summary", window)["data"]}
        if all(unsampled.get(s, {}).get("calls") == len(corpus) for s in SERVICES):
            break
        assert time.monotonic() < deadline, unsampled
        time.sleep(0.5)
    # A t-digest's error is in rank, not in value: both runs' quantiles must lie within
    # QUANTILE_RANK_ERROR of the quantile's rank among the durations sent (where durations are
    # sparse, a 3% relative bound on values failed for one merge order against another).
    for service in SERVICES:
        assert rows[service]["errors"] == unsampled[service]["errors"]
        durations = sorted((s["end"] - s["start"]) / 1e6 for t in corpus for s in t["spans"]
                           if s["service"] == service)
        for q, name in ((0.5, "p50_ms"), (0.95, "p95_ms"), (0.99, "p99_ms")):
            lo, hi = rank_band(durations, q)
            for who, got in (("sampled", rows[service][name]), ("unsampled",
                                                                unsampled[service][name])):
                assert lo <= got <= hi, (service, name, who, got, (lo, hi),
                                         rows[service][name], unsampled[service][name])
    sh.stop_ok()
    off.stop_ok()


def test_tail_sampling_decides_open_traces_with_all_their_spans_after_a_crash(
        spanhouse_factory, tmp_path):
    """Killed while every window is open: the restarted process reads its queue, decides each
    trace with all the spans it had, and the late spans follow those decisions."""
    sh = spanhouse_factory(name="crash", config=tail_config(tmp_path, "crash", 20_000))
    now = time.time_ns()
    corpus = traces(1000, now, seed=29, straddlers=20)
    send(sh, corpus, "first")
    send(sh, corpus, "second")
    sh.stop(signal.SIGKILL)  # answered = in the durable queue; nothing decided yet
    sh.start(keep_ports=True)
    send(sh, corpus, "late")
    must = {k for t in corpus if t["kind"] in ("error", "slow", "straddle_error")
            for k in keys_of(t)}
    got = settle(sh, must, now - 3600 * S, now + 60 * S)
    kept = check_whole(corpus, got)
    assert sum(t["kind"] in ("plain", "straddle_plain") for t in kept) <= 2 + 2 * 120
    assert counter(sh, "spanhouse_sampling_tail_late_spans_total") == 40
    sh.stop_ok()


def test_tail_sampling_spills_what_the_memory_budget_cannot_hold_and_loses_nothing(
        spanhouse_factory, tmp_path):
    """A 1 MiB budget holds little of the window: requests wait on disk instead, their traces
    are decided when they are read back, every trace is still stored whole or not at all, and
    every span is counted."""
    cfg = config(tmp_path, "spill", f"sampling:\n  tail:\n    policies: \"{POLICIES}\"\n"
                                    "    decision_wait_ms: 2000\n"
                                    "otlp_http:\n  max_body_bytes: 512KiB\n"
                                    "queue:\n  max_bytes: 1MiB\n  wait_ms: 0\n")
    sh = spanhouse_factory(name="spill", config=cfg)
    now = time.time_ns()
    corpus = traces(4000, now, seed=30, straddlers=0)
    spans = [s for t in corpus for s in t["spans"]]
    random.Random(30).shuffle(spans)  # a trace's spans in different requests, any order
    post(sh, spans, per_request=300)
    end_ms = (now // S // 60 + 1) * 60 * 1000
    window = {"endTs": end_ms, "lookback": 30 * 60 * 1000}
    deadline = time.monotonic() + 120
    while True:
        rows = {r["service"]: r for r in
                get(sh, "/api/spanhouse/services/summary", window)["data"]}
        if all(rows.get(s, {}).get("calls") == len(corpus) for s in SERVICES):
            break
        assert time.monotonic() < deadline, f"{rows}\n{sh.diagnostics()}"
        time.sleep(0.5)
    assert rows["store"]["errors"] == sum(t["kind"] == "error" for t in corpus)
    spilled = counter(sh, "spanhouse_sampling_tail_spilled_requests_total") + metric(
        sh, "spanhouse_durable_queue_spilled_requests_total", 'sink="chdb"')
    assert spilled > 0, "nothing was spilled: the test does not test what it says"
    assert counter(sh, "spanhouse_sampling_tail_decided_at_once_total") > 0
    got = stored(sh, now - 3600 * S, now + 60 * S)
    kept = check_whole(corpus, got)
    assert kept, "nothing kept"
    sh.stop_ok()
