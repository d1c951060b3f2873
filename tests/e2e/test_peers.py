"""Several spanhouse nodes that know each other (`peers.nodes`, issue 44): each trace id is
owned by one node (rendezvous hashing), and a node forwards the spans of the traces it does
not own to their owner over OTLP/gRPC, through its durable queue (the `peer:<node>` sinks).

Three nodes, no front (tail sampling, a rate held for the system and a node killed too, below): the spans of each trace are sent to different nodes directly, span
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
from tail_nodes import (assert_decided_once, assert_each_whole_on_one_node,
                        assert_red_counts_every_span_once, send_apart, settle_kept, tail_config,
                        window_of)
from test_sampling import metric, post
from test_tail_sampling import keys_of, stored, traces

NAMES = ("node-a", "node-b", "node-c")
DEADLINE_S = 60.0


def metric_sum(sh, name: str) -> int:
    total = 0
    for line in sh.session.get(f"{sh.query_url}/metrics", timeout=30).text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += int(float(line.split()[-1]))
    return total


def start_nodes(root, request, extra: str = "", **kwargs):
    """Three nodes with the same peers list, each naming itself; `extra`: more config (its
    first lines may go on with the peers section); `kwargs`: for each Spanhouse (ca_cert)."""
    factory = SpanhouseFactory(root)
    request.module._spanhouse_factories = getattr(request.module, "_spanhouse_factories",
                                                  []) + [factory]
    nodes = [factory(name, start=False, **kwargs) for name in NAMES]
    for sh in nodes:
        sh.otlp_port, sh.query_port, sh.grpc_port, sh.zipkin_port = free_ports(4)
    entries = "\n".join(
        f'    - {{name: {sh.name}, otlp: "127.0.0.1:{sh.grpc_port}", '
        f'query: "{sh.scheme}://127.0.0.1:{sh.query_port}"}}' for sh in nodes)
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


@pytest.fixture(scope="module")
def tail_peers(tmp_path_factory, request):
    factory, nodes = start_nodes(
        tmp_path_factory.mktemp("tail_peers"), request, tail_config(TAIL_POLICIES))
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
    send_apart(tail_peers, corpus)
    on = settle_kept(tail_peers, corpus, now)
    assert_each_whole_on_one_node(tail_peers, corpus, on)
    assert all(on), "a node stores no kept trace"
    assert_decided_once(tail_peers, corpus, "latency 500ms")
    assert_red_counts_every_span_once(tail_peers, corpus, now)


RATE = 20
TRACES_PER_S = 150
BATCH = 15
SEND_S = 12.0


@pytest.fixture(scope="module")
def rate_peers(tmp_path_factory, request):
    factory, nodes = start_nodes(tmp_path_factory.mktemp("rate_peers"), request,
                                 tail_config(f"rate {RATE}/s"))
    yield nodes
    factory.teardown()


def test_a_rate_holds_for_the_system(rate_peers):
    check_rate_holds(rate_peers)


def check_rate_holds(rate_peers) -> None:
    """`rate 20/s` on three nodes that forward to each other keeps about 20 traces a second
    over all of them, not 20 on each. Each owner keeps 20 / (nodes up) a second of its traces:
    a token bucket (per root service, here one) that starts full, holds at most a second of
    its rate and refills at it, spent once per decision, on the wall clock of the decision.
    Fresh traces come at TRACES_PER_S for SEND_S seconds, each trace's spans spread over the
    nodes, so every node owns far more than 20 a second of them and nodes deciding alone would
    keep 3 x 20 a second. The traces kept over the nodes must be 20 a second of the sending
    time measured here: at most the three full buckets (20) plus 20 a second of a second more
    than that time (a trace is decided decision_wait_ms after its first span reached its owner,
    on a tick of a tenth of that, so the decisions span the sending time give or take a tick
    and the forwarding); at least 20 a second of two seconds less (a bucket drained all along
    holds only a second of refill, so a node that stalls longer on a shared machine, or whose
    first or last traces arrive late, keeps less). Each kept trace is stored whole."""
    for sh in rate_peers:
        assert metric_sum(sh, "spanhouse_peer_in_ring") == len(rate_peers) - 1, sh.name
    now = time.time_ns()
    sent: list[dict] = []
    began = ended = time.monotonic()
    while ended - began < SEND_S:
        batch = traces(BATCH, now, seed=4404 + len(sent), straddlers=0)
        by_node: list[list[dict]] = [[] for _ in rate_peers]
        for t, trace in enumerate(batch):
            for i, span in enumerate(trace["spans"]):
                by_node[(t + i) % len(rate_peers)].append(span)
        for sh, spans in zip(rate_peers, by_node):
            post(sh, spans)
        ended = time.monotonic()
        sent += batch
        time.sleep(max(0.0, began + len(sent) / TRACES_PER_S - time.monotonic()))
    sending_s = ended - began
    assert len(sent) / sending_s > 3 * RATE, \
        f"{len(sent)} traces in {sending_s:.1f} s: too few for every node to exceed the rate"
    label = f'policy="rate {RATE}/s",decision="kept"'
    deadline = time.monotonic() + 120
    while True:
        kept = sum(metric(sh, "spanhouse_sampling_traces_total", label) for sh in rate_peers)
        dropped = sum(metric(sh, "spanhouse_sampling_traces_total",
                             'policy="tail",decision="dropped"') for sh in rate_peers)
        if kept + dropped >= len(sent):
            break
        assert time.monotonic() < deadline, (
            f"{kept + dropped} of {len(sent)} traces decided\n"
            + "\n".join(sh.diagnostics() for sh in rate_peers))
        time.sleep(0.5)
    assert kept + dropped == len(sent), f"{kept} kept, {dropped} dropped of {len(sent)}"
    low, high = RATE * (sending_s - 2), RATE * (sending_s + 1) + RATE
    assert low <= kept <= high, (f"{kept} traces kept over {sending_s:.1f} s of sending, "
                                 f"want {RATE}/s: {low:.0f} to {high:.0f}")
    assert kept < 2 * RATE * sending_s, \
        f"{kept} kept: near {len(rate_peers)} x {RATE}/s, the nodes decided alone"
    start_ns, end_ns = window_of(now)
    deadline = time.monotonic() + 60
    while True:
        got = set().union(*(stored(sh, start_ns, end_ns) for sh in rate_peers))
        whole = [t for t in sent if keys_of(t) <= got]
        if len(whole) == kept or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert len(whole) == kept and got == {k for t in whole for k in keys_of(t)}, \
        f"{len(whole)} traces stored whole, {kept} kept; {len(got)} spans stored"


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
