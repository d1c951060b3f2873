"""Several spanhouse nodes behind the OpenTelemetry Collector (issue 44): the contrib
`loadbalancing` exporter with `routing_key: traceID` hands every trace to one node, so each
node holds whole traces, which tail sampling and fresh-trace reads need (README, "Several
nodes behind an OpenTelemetry Collector").

Two independent nodes (each its own data directory, embedded store and ports) and the
collector in front of them (otelcol_server.py). The spans of each trace come in separate
requests, interleaved with the spans of other traces, and every request holds spans of
several traces, as from many services' SDKs at once. Each trace must then be found whole on
exactly one node and not at all on the other, and both nodes must have some. A front that
spreads a trace's spans over the nodes fails that check: the control test feeds the nodes in
turn, span by span, and asserts that the same check sees every trace split.

Tail sampling behind the front (the last test): three independent nodes, each deciding the traces
the collector gives it, keep exactly what one node would, each trace decided once."""

from __future__ import annotations

import json
import random
import time

import pytest
import requests

from conftest import SpanhouseFactory, otlp_json_span
from otelcol_server import Collector
from tail_nodes import (assert_decided_once, assert_each_whole_on_one_node,
                        assert_red_counts_every_span_once, by_round, settle_kept, tail_config)
from test_sampling import export
from test_tail_sampling import traces

TRACES = 200
SPANS_PER_TRACE = 4
SPANS_PER_REQUEST = 10  # each request: one span of each of 10 different traces
# Each span of a trace comes from another service, as across a real call chain.
SERVICES = ("frontend", "checkout", "payment", "ledger")
DELIVERY_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, request):
    """Two spanhouse nodes that know nothing of each other."""
    factory = SpanhouseFactory(tmp_path_factory.mktemp("otelcol_front"))
    request.module._spanhouse_factories = [factory]
    yield factory("node-a"), factory("node-b")
    factory.teardown()


def make_traces(rng: random.Random) -> dict[str, list[dict]]:
    """TRACES traces of SPANS_PER_TRACE spans each (a root and a chain of children), by trace
    id; span i is of SERVICES[i]."""
    now = time.time_ns()
    traces = {}
    for _ in range(TRACES):
        trace_id = f"{rng.getrandbits(128):032x}"
        spans, parent = [], ""
        for i in range(SPANS_PER_TRACE):
            span_id = f"{rng.getrandbits(64) | 1:016x}"
            span = otlp_json_span(trace_id, span_id, name=f"{SERVICES[i]} op", parent=parent,
                                  start_ns=now + i * 1000, dur_ns=1_000_000 - i * 2000)
            span["_service"] = SERVICES[i]
            spans.append(span)
            parent = span_id
        traces[trace_id] = spans
    return traces


def requests_by_round(traces: dict[str, list[dict]], rng: random.Random) -> list[list[bytes]]:
    """OTLP/JSON request bodies, round by round: round i sends span i of every trace, the
    traces shuffled and SPANS_PER_REQUEST to a request (each span in its own service's
    resource), so no request holds two spans of one trace, and a trace's spans are far apart."""
    rounds = []
    for i in range(SPANS_PER_TRACE):
        ids = list(traces)
        rng.shuffle(ids)
        bodies = []
        rounds.append(bodies)
        for k in range(0, len(ids), SPANS_PER_REQUEST):
            by_service: dict[str, list[dict]] = {}
            for trace_id in ids[k:k + SPANS_PER_REQUEST]:
                span = dict(traces[trace_id][i])
                by_service.setdefault(span.pop("_service"), []).append(span)
            bodies.append(json.dumps({"resourceSpans": [{
                "resource": {"attributes": [{"key": "service.name",
                                             "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "e2e"}, "spans": spans}],
            } for service, spans in by_service.items()]}).encode())
    return rounds


def accepted_spans(sh) -> int:
    """Spans a node took over OTLP/gRPC (the collector's exporter) or OTLP/HTTP (this test)."""
    total = 0
    for line in sh.session.get(f"{sh.query_url}/metrics", timeout=30).text.splitlines():
        if line.startswith("spanhouse_receiver_accepted_spans_total{"):
            total += int(float(line.split()[-1]))
    return total


def wait_delivered(nodes, want: int, front=None) -> None:
    """Until the nodes together have accepted `want` spans (each node serves a span it took
    from memory at once, so then every span is readable where it went)."""
    deadline = time.monotonic() + DELIVERY_DEADLINE_S
    while True:
        got = [accepted_spans(sh) for sh in nodes]
        if sum(got) >= want:
            assert sum(got) == want, f"the nodes took {got} spans, {want} sent: some twice"
            return
        if time.monotonic() >= deadline:
            pytest.fail(f"the nodes took {got} spans within {DELIVERY_DEADLINE_S:.0f} s, "
                        f"{want} sent\n" + (f"{front.diagnostics()}\n" if front else "")
                        + "\n".join(sh.diagnostics() for sh in nodes), pytrace=False)
        time.sleep(0.2)


def placement(nodes, traces: dict[str, list[dict]]) -> dict[str, list[set[str]]]:
    """For each trace, the span ids each node itself holds of it (in memory and in its store;
    nodes that know each other answer /api/traces/{id} with the others' spans merged in)."""
    out = {}
    for trace_id in traces:
        per_node = []
        for sh in nodes:
            r = sh.session.get(f"{sh.query_url}/api/spanhouse/peer/traces",
                               params={"scope": "all", "format": "json", "id": trace_id},
                               timeout=30)
            assert r.status_code == 200, f"{sh.name}: trace {trace_id}: {r.status_code} {r.text}"
            ids = [s["spanID"] for t in r.json()["data"] or [] for s in t["spans"]]
            assert len(ids) == len(set(ids)), f"{sh.name}: a span of {trace_id} answered twice"
            per_node.append(set(ids))
        out[trace_id] = per_node
    return out


def whole_on_one_node(traces, where) -> tuple[list[int], list[str]]:
    """How many traces each node holds whole, and what is wrong with the others."""
    held = [0] * len(next(iter(where.values())))
    problems = []
    for trace_id, spans in traces.items():
        want = {s["spanId"] for s in spans}
        having = [i for i, ids in enumerate(where[trace_id]) if ids]
        if len(having) == 1 and where[trace_id][having[0]] == want:
            held[having[0]] += 1
        else:
            problems.append(f"{trace_id}: " + ", ".join(
                f"node {i}: {len(ids)} of {len(want)} spans"
                for i, ids in enumerate(where[trace_id])))
    return held, problems


def test_traceid_routing_puts_each_trace_whole_on_one_node(nodes, otelcol_factory):
    rng = random.Random(44)
    front: Collector = otelcol_factory([sh.grpc_target for sh in nodes])
    traces = make_traces(rng)
    before = sum(accepted_spans(sh) for sh in nodes)
    with requests.Session() as session:
        for bodies in requests_by_round(traces, rng):
            for body in bodies:
                r = front.post_otlp_json(body, session=session)
                assert r.status_code == 200, f"{r.status_code} {r.text}\n{front.diagnostics()}"
    wait_delivered(nodes, before + TRACES * SPANS_PER_TRACE, front)

    held, problems = whole_on_one_node(traces, placement(nodes, traces))
    assert not problems, (f"{len(problems)} of {TRACES} traces not whole on exactly one node "
                          f"(whole: {held}):\n" + "\n".join(problems[:20]))
    assert all(held), f"one node got every trace ({held}): nothing was balanced"


def test_the_check_sees_traces_split_by_a_front_without_affinity(nodes):
    """The control: spans handed to the nodes in turn (a round-robin front) leave every trace
    in halves, and whole_on_one_node says so."""
    rng = random.Random(4444)
    traces = make_traces(rng)
    before = sum(accepted_spans(sh) for sh in nodes)
    for i, bodies in enumerate(requests_by_round(traces, rng)):
        for body in bodies:  # round i to node i % 2: each trace's spans in halves
            r = nodes[i % 2].post_traces(body)
            assert r.status_code == 200, f"{r.status_code} {r.text}"
    wait_delivered(nodes, before + TRACES * SPANS_PER_TRACE)

    held, problems = whole_on_one_node(traces, placement(nodes, traces))
    assert held == [0, 0] and len(problems) == TRACES, \
        f"round-robin left {held} traces whole; want none\n" + "\n".join(problems[:5])


TAIL_POLICIES = "error; latency 1s; probability 0"
SLOW_MS = 1200  # the corpus's slow traces: an api span the latency policy keeps


@pytest.fixture(scope="module")
def tail_nodes(tmp_path_factory, request):
    """Three nodes that know nothing of each other, each with tail sampling."""
    root = tmp_path_factory.mktemp("otelcol_tail")
    factory = SpanhouseFactory(root)
    request.module._spanhouse_factories = (getattr(request.module, "_spanhouse_factories", [])
                                           + [factory])
    config = root / "tail.yaml"
    config.write_text(tail_config(TAIL_POLICIES))
    yield [factory(name, config=config) for name in ("node-a", "node-b", "node-c")]
    factory.teardown()


def test_tail_sampling_behind_the_front_decides_each_trace_once_on_one_node(tail_nodes,
                                                                              otelcol_factory):
    """Tail sampling needs a trace's spans on one node; the front gives it that. Every span of
    a trace comes in a request of its own, among other traces' spans, all through the
    collector. Exactly the error and slow traces must be kept, each whole on exactly one node,
    nothing else anywhere; each trace decided once (the nodes' decisions add up to the corpus,
    policy by policy); RED counting every span once over the nodes, sampled or not."""
    rng = random.Random(4405)
    front: Collector = otelcol_factory([sh.grpc_target for sh in tail_nodes])
    now = time.time_ns()
    corpus = traces(600, now, seed=4405, straddlers=0, slow_ms=SLOW_MS)
    before = sum(accepted_spans(sh) for sh in tail_nodes)
    with requests.Session() as session:
        for spans in by_round(corpus, rng):
            r = front.post_otlp(export(spans), session=session)
            assert r.status_code == 200, f"{r.status_code} {r.text}\n{front.diagnostics()}"
    wait_delivered(tail_nodes, before + sum(len(t["spans"]) for t in corpus), front)
    on = settle_kept(tail_nodes, corpus, now)
    assert_each_whole_on_one_node(tail_nodes, corpus, on)
    assert all(on), "a node stores no kept trace: the front did not balance"
    assert_decided_once(tail_nodes, corpus, "latency 1s")
    assert_red_counts_every_span_once(tail_nodes, corpus, now)
