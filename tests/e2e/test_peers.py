"""Several spanhouse nodes that know each other (`peers.nodes`, issue 44): each trace id is
owned by one node (rendezvous hashing), and a node forwards the spans of the traces it does
not own to their owner over OTLP/gRPC, through its durable queue (the `peer:<node>` sinks).

Three nodes, no front (tail sampling and a node killed too, below): the spans of each trace are sent to different nodes directly, span
by span, interleaved with other traces' spans. Every trace must then be found whole on
exactly one node (its owner) and nowhere else, each node must own some, and the nodes must
have forwarded the rest. The same traffic to three nodes that do not know each other leaves
every trace split (test_otelcol_front.py's control); here the nodes themselves join them."""

from __future__ import annotations

import random
import time

import pytest

from conftest import SpanhouseFactory, free_ports
from test_otelcol_front import (SPANS_PER_TRACE, TRACES, make_traces, placement,
                                requests_by_round, whole_on_one_node)
from test_sampling import get, metric, post
from test_tail_sampling import S, SERVICES, keys_of, stored, traces

NAMES = ("node-a", "node-b", "node-c")
DEADLINE_S = 60.0


def metric_sum(sh, name: str) -> int:
    total = 0
    for line in sh.session.get(f"{sh.query_url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += int(float(line.split()[-1]))
    return total


def start_nodes(root, request, extra: str = ""):
    """Three nodes with the same peers list, each naming itself; `extra`: more config."""
    factory = SpanhouseFactory(root)
    request.module._spanhouse_factories = getattr(request.module, "_spanhouse_factories",
                                                  []) + [factory]
    nodes = [factory(name, start=False) for name in NAMES]
    for sh in nodes:
        sh.otlp_port, sh.query_port, sh.grpc_port, sh.zipkin_port = free_ports(4)
    entries = "\n".join(
        f'    - {{name: {sh.name}, otlp: "127.0.0.1:{sh.grpc_port}", '
        f'query: "http://127.0.0.1:{sh.query_port}"}}' for sh in nodes)
    for sh in nodes:
        sh.config = root / f"{sh.name}.yaml"
        sh.config.write_text(f"node: {{id: {sh.name}}}\npeers:\n  nodes:\n{entries}\n{extra}")
    for sh in nodes:
        sh.start(keep_ports=True)
    return factory, nodes


@pytest.fixture(scope="module")
def peers(tmp_path_factory, request):
    factory, nodes = start_nodes(tmp_path_factory.mktemp("peers"), request)
    yield nodes
    factory.teardown()


TAIL_POLICIES = "error; latency 500ms; probability 0"
TAIL_WAIT_MS = 2000


@pytest.fixture(scope="module")
def tail_peers(tmp_path_factory, request):
    factory, nodes = start_nodes(
        tmp_path_factory.mktemp("tail_peers"), request,
        f"sampling:\n  tail:\n    policies: \"{TAIL_POLICIES}\"\n"
        f"    decision_wait_ms: {TAIL_WAIT_MS}\n")
    yield nodes
    factory.teardown()


def test_each_trace_meets_on_its_owner(peers):
    rng = random.Random(4401)
    traces = make_traces(rng)
    forwarded_before = sum(metric_sum(sh, "spanhouse_peer_spans_forwarded_total") for sh in peers)
    send_spread(peers, traces, rng)  # request k to node k % 3: a trace's spans land apart
    held = settle_whole(peers, traces)
    assert all(held), f"a node owns no trace ({held})"
    forwarded = sum(metric_sum(sh, "spanhouse_peer_spans_forwarded_total")
                    for sh in peers) - forwarded_before
    # About two spans in three land on a node that does not own their trace.
    assert TRACES * SPANS_PER_TRACE // 3 < forwarded < TRACES * SPANS_PER_TRACE, forwarded
    for sh in peers:
        assert metric_sum(sh, "spanhouse_peer_in_ring") == len(peers) - 1, sh.name


def test_tail_sampling_decides_each_trace_whole_on_its_owner(tail_peers):
    """Tail sampling with the nodes forwarding to each other: each trace's first two spans go
    to one node, its third (where the errors are) to the next, so no node receives a whole
    trace. Exactly the error and slow traces must be kept, each whole on one node, nothing
    else anywhere; RED (every span counted once, sampled or not) must add up over the nodes
    to what was sent; and each trace is decided once, by its owner."""
    now = time.time_ns()
    corpus = traces(600, now, seed=4402, straddlers=0)
    by_node: list[list[dict]] = [[] for _ in tail_peers]
    for t, trace in enumerate(corpus):
        by_node[t % 3] += trace["spans"][:2]
        by_node[(t + 1) % 3].append(trace["spans"][2])
    for sh, spans in zip(tail_peers, by_node):
        post(sh, spans, per_request=200)
    must = {k for t in corpus if t["kind"] in ("error", "slow") for k in keys_of(t)}
    start_ns, end_ns = now - 3600 * S, now + 60 * S
    deadline = time.monotonic() + 120
    last, since = None, time.monotonic()
    while True:
        on = [stored(sh, start_ns, end_ns) for sh in tail_peers]
        union = set().union(*on)
        if union != last:
            last, since = union, time.monotonic()
        elif must <= union and time.monotonic() - since > 3:
            break
        assert time.monotonic() < deadline, (
            f"{len(must - union)} spans of kept traces not stored\n"
            + "\n".join(sh.diagnostics() for sh in tail_peers))
        time.sleep(0.5)
    assert union == must, (f"{len(union - must)} spans stored that sampling drops, "
                           f"{len(must - union)} kept ones missing")
    for t in corpus:
        if t["kind"] not in ("error", "slow"):
            continue
        holders = [sh.name for sh, keys in zip(tail_peers, on) if keys & keys_of(t)]
        assert len(holders) == 1 and keys_of(t) <= on[[sh.name for sh in tail_peers]
                                                      .index(holders[0])], (t["id"], holders)
    assert all(on), "a node stores no kept trace"
    # Decided once each, on its owner: the nodes' counts add up to the corpus.
    n_error = sum(t["kind"] == "error" for t in corpus)
    n_slow = sum(t["kind"] == "slow" for t in corpus)
    total = lambda name, labels: sum(metric(sh, name, labels) for sh in tail_peers)  # noqa: E731
    assert total("spanhouse_sampling_traces_total", 'policy="error",decision="kept"') == n_error
    assert total("spanhouse_sampling_traces_total",
                 'policy="latency 500ms",decision="kept"') == n_slow
    assert total("spanhouse_sampling_traces_total", 'policy="tail",decision="dropped"') == \
        len(corpus) - n_error - n_slow
    # RED: every span counted once over the nodes, sampled or not.
    end_ms = (now // S // 60 + 1) * 60 * 1000
    window = {"endTs": end_ms, "lookback": 30 * 60 * 1000}
    deadline = time.monotonic() + 60
    while True:
        calls = {s: 0 for s in SERVICES}
        errors = {s: 0 for s in SERVICES}
        for sh in tail_peers:
            for r in get(sh, "/api/spanhouse/services/summary", window)["data"]:
                if r["service"] in calls:
                    calls[r["service"]] += r["calls"]
                    errors[r["service"]] += r["errors"]
        if all(calls[s] == len(corpus) for s in SERVICES) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert calls == {s: len(corpus) for s in SERVICES}, calls
    assert errors == {"web": 0, "api": 0, "store": n_error}, errors


@pytest.fixture(scope="module")
def failing_peers(tmp_path_factory, request):
    factory, nodes = start_nodes(tmp_path_factory.mktemp("failing_peers"), request,
                                 "  down_after_s: 2\n  probe_ms: 200\n")
    yield nodes
    factory.teardown()


def send_spread(nodes, traces, rng) -> None:
    n = 0
    for bodies in requests_by_round(traces, rng):
        for body in bodies:
            r = nodes[n % len(nodes)].post_traces(body)
            n += 1
            assert r.status_code == 200, f"{r.status_code} {r.text}"


def settle_whole(nodes, traces) -> list[int]:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        held, problems = whole_on_one_node(traces, placement(nodes, traces))
        if not problems or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    assert not problems, (f"{len(problems)} of {len(traces)} traces not whole on exactly one "
                          f"node (whole: {held}):\n" + "\n".join(problems[:20]) + "\n"
                          + "\n".join(sh.diagnostics() for sh in nodes))
    return held


def test_a_node_killed_loses_nothing_and_its_traces_move(failing_peers):
    """kill -9 of one node: the others keep taking spans; the spans they had waiting for it
    (and those of its traces that come after) go, once it has been down for
    peers.down_after_s, to the traces' next owners, each trace whole on one node; once it is
    back, what it had stored before is still there and nothing is on two nodes."""
    a, b, c = failing_peers
    rng = random.Random(4403)
    before = make_traces(rng)
    send_spread(failing_peers, before, rng)
    held_before = settle_whole(failing_peers, before)
    assert held_before[2] > 0, held_before
    c.kill()
    during = make_traces(rng)
    send_spread([a, b], during, rng)  # at once: the first requests still name c as up
    held = settle_whole([a, b], during)
    assert all(held), held
    handed = sum(metric_sum(sh, "spanhouse_peer_spans_decided_here_total") for sh in (a, b))
    # The first requests after the kill came within down_after_s: c was still up for them.
    assert handed > 0
    in_ring = [metric_sum(sh, "spanhouse_peer_in_ring") for sh in (a, b)]
    assert in_ring == [1, 1], in_ring  # c is out of both rings
    ready = a.session.get(f"{a.query_url}/readyz", timeout=30)
    assert ready.status_code == 200, ready.text  # a peer down: this node still takes spans
    assert "node-b up" in ready.text and "node-c down" in ready.text, ready.text
    c.start(keep_ports=True)
    deadline = time.monotonic() + DEADLINE_S
    while metric_sum(a, "spanhouse_peer_in_ring") != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    # c's traces from before it died are on c again, nothing of the rest came to it.
    assert settle_whole(failing_peers, before) == held_before
    where = placement(failing_peers, during)
    assert not any(where[t][2] for t in during), "a span of the outage on the node that was down"
