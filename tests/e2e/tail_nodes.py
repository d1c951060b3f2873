"""Tail sampling over several spanhouse nodes: how the tests send a corpus (test_tail_sampling's
`traces`: web -> api -> store, the errors on the store span) so that no request holds a whole
trace, and what they check once the nodes have decided: exactly the error and slow traces
stored, each whole, nothing else; each trace decided once over the nodes; RED counting every
span once, sampled or not. Used by test_peers.py (nodes that forward to each other),
test_otelcol_front.py (independent nodes behind the collector) and test_peers_clickhouse.py
(nodes that forward to each other and share one ClickHouse database)."""

from __future__ import annotations

import random
import time

from test_sampling import get, metric, post
from test_tail_sampling import S, SERVICES, keys_of, stored

TAIL_WAIT_MS = 2000
KEPT_KINDS = ("error", "slow")
SETTLE_DEADLINE_S = 120
RED_DEADLINE_S = 60


def tail_config(policies: str, wait_ms: int = TAIL_WAIT_MS) -> str:
    return f"sampling:\n  tail:\n    policies: \"{policies}\"\n    decision_wait_ms: {wait_ms}\n"


def send_apart(nodes, corpus: list[dict]) -> None:
    """Trace t's first two spans to node t % n, its third (where the errors are) to the next
    one: no node receives a whole trace."""
    by_node: list[list[dict]] = [[] for _ in nodes]
    for t, trace in enumerate(corpus):
        by_node[t % len(nodes)] += trace["spans"][:2]
        by_node[(t + 1) % len(nodes)].append(trace["spans"][2])
    for sh, spans in zip(nodes, by_node):
        post(sh, spans, per_request=200)


def by_round(corpus: list[dict], rng: random.Random, per_request: int = 50) -> list[list[dict]]:
    """The spans of the requests, round by round: round i holds span i of every trace, the
    traces shuffled, `per_request` to a request, so each span of a trace is in a request of
    its own among other traces' spans."""
    requests = []
    for i in range(len(SERVICES)):
        spans = [trace["spans"][i] for trace in corpus]
        rng.shuffle(spans)
        requests += [spans[k:k + per_request] for k in range(0, len(spans), per_request)]
    return requests


def kept_keys(corpus: list[dict]) -> set[tuple[str, str]]:
    return {k for t in corpus if t["kind"] in KEPT_KINDS for k in keys_of(t)}


def window_of(now_ns: int) -> tuple[int, int]:
    """The span-time range the corpus of `traces(n, now_ns, ...)` lies in."""
    return now_ns - 3600 * S, now_ns + 60 * S


def settle_kept(nodes, corpus: list[dict], now_ns: int,
                deadline_s: float = SETTLE_DEADLINE_S) -> list[set[tuple[str, str]]]:
    """Each node's stored spans of the corpus, once every span of the error and slow traces is
    stored on some node and nothing more came for 3 s; asserts that the nodes store those and
    nothing else (and no node a span twice)."""
    must = kept_keys(corpus)
    start_ns, end_ns = window_of(now_ns)
    deadline = time.monotonic() + deadline_s
    last, since = None, time.monotonic()
    while True:
        on = [stored(sh, start_ns, end_ns) for sh in nodes]
        union = set().union(*on)
        if union != last:
            last, since = union, time.monotonic()
        elif must <= union and time.monotonic() - since > 3:
            break
        assert time.monotonic() < deadline, (
            f"{len(must - union)} spans of kept traces not stored\n"
            + "\n".join(sh.diagnostics() for sh in nodes))
        time.sleep(0.5)
    assert union == must, (f"{len(union - must)} spans stored that sampling drops, "
                           f"{len(must - union)} kept ones missing")
    return on


def assert_each_whole_on_one_node(nodes, corpus: list[dict], on: list[set]) -> None:
    """Every kept trace is stored whole on exactly one node and on no other."""
    for t in corpus:
        if t["kind"] not in KEPT_KINDS:
            continue
        holders = [i for i, keys in enumerate(on) if keys & keys_of(t)]
        assert len(holders) == 1 and keys_of(t) <= on[holders[0]], \
            (t["id"], [nodes[i].name for i in holders])


def assert_decided_once(nodes, corpus: list[dict], latency_policy: str) -> None:
    """The nodes' spanhouse_sampling_traces_total add up to the corpus, policy by policy: each
    trace was decided once, on one node."""
    n_error = sum(t["kind"] == "error" for t in corpus)
    n_slow = sum(t["kind"] == "slow" for t in corpus)
    total = lambda name, labels: sum(metric(sh, name, labels) for sh in nodes)  # noqa: E731
    assert total("spanhouse_sampling_traces_total", 'policy="error",decision="kept"') == n_error
    assert total("spanhouse_sampling_traces_total",
                 f'policy="{latency_policy}",decision="kept"') == n_slow
    assert total("spanhouse_sampling_traces_total", 'policy="tail",decision="dropped"') == \
        len(corpus) - n_error - n_slow


def red_over(nodes, corpus: list[dict], now_ns: int,
             deadline_s: float = RED_DEADLINE_S) -> tuple[dict, dict]:
    """Calls and errors per service of /api/spanhouse/services/summary, added up over `nodes`,
    once every service has as many calls as the corpus has traces (or at the deadline)."""
    end_ms = (now_ns // S // 60 + 1) * 60 * 1000
    window = {"endTs": end_ms, "lookback": 30 * 60 * 1000}
    deadline = time.monotonic() + deadline_s
    while True:
        calls = {s: 0 for s in SERVICES}
        errors = {s: 0 for s in SERVICES}
        for sh in nodes:
            for r in get(sh, "/api/spanhouse/services/summary", window)["data"]:
                if r["service"] in calls:
                    calls[r["service"]] += r["calls"]
                    errors[r["service"]] += r["errors"]
        if all(calls[s] == len(corpus) for s in SERVICES) or time.monotonic() > deadline:
            return calls, errors
        time.sleep(0.5)


def assert_red_counts_every_span_once(nodes, corpus: list[dict], now_ns: int) -> None:
    """RED over `nodes`: every span counted once, sampled or not; the errors are the error
    traces' store spans."""
    calls, errors = red_over(nodes, corpus, now_ns)
    assert calls == {s: len(corpus) for s in SERVICES}, calls
    assert errors == {"web": 0, "api": 0,
                      "store": sum(t["kind"] == "error" for t in corpus)}, errors
