"""Any node of a `peers` list answers any trace (issue 44, part 3): a trace's spans meet on its
owner, and a lookup or search on any other node asks the others for what they hold and merges
it, each span once. Here each node keeps its own embedded store, so a trace is held by its
owner alone (checked through /api/spanhouse/peer/traces, what one node alone holds), and read
whole from every node: fresh, before any writer stored it, and stored.

A node down: the answer comes from the others, names it in X-Spanhouse-Peers-Missing, and its
traces are missing from the others' answers (they are on its disk, not theirs)."""

from __future__ import annotations

import random
import time

import pytest

from test_otelcol_front import (SPANS_PER_TRACE, make_traces, placement, requests_by_round,
                                whole_on_one_node)
from test_peers import metric_sum, send_spread, start_nodes

DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def nodes(tmp_path_factory, request):
    """peers.down_after_s as by default: a node slow to answer a probe on a busy machine is
    not taken out, which would move its traces."""
    factory, started = start_nodes(tmp_path_factory.mktemp("peer_reads"), request)
    yield started
    factory.teardown()


@pytest.fixture(scope="module")
def failing_nodes(tmp_path_factory, request):
    """A node killed is taken out after 2 s."""
    factory, started = start_nodes(tmp_path_factory.mktemp("peer_reads_failing"), request,
                                   "  down_after_s: 2\n  probe_ms: 200\n")
    yield started
    factory.teardown()


def own_spans(sh, trace_id: str) -> set[str]:
    """The span ids `sh` alone holds of the trace (its memory and its store)."""
    return placement([sh], {trace_id: []})[trace_id][0]


def answered(sh, trace_id: str) -> tuple[list[str], str]:
    """The span ids `sh` answers for the trace (with repeats), and who it says is missing."""
    r = sh.get_trace(trace_id)
    if r.status_code == 404:
        return [], r.headers.get("X-Spanhouse-Peers-Missing", "")
    assert r.status_code == 200, f"{sh.name}: {r.status_code} {r.text}"
    ids = [s["spanID"] for t in r.json()["data"] for s in t["spans"]]
    return ids, r.headers.get("X-Spanhouse-Peers-Missing", "")


def wait_whole_everywhere(nodes, traces) -> float:
    """Until every node answers every trace whole, each span once; the seconds it took."""
    t0 = time.monotonic()
    pending = {(sh.name, t) for sh in nodes for t in traces}
    by_name = {sh.name: sh for sh in nodes}
    last = {}
    while pending:
        for name, trace_id in sorted(pending):
            ids, missing = answered(by_name[name], trace_id)
            assert len(ids) == len(set(ids)), f"{name}: a span of {trace_id} answered twice"
            want = {s["spanId"] for s in traces[trace_id]}
            last[(name, trace_id)] = (len(ids), missing)
            if set(ids) == want and not missing:
                pending.discard((name, trace_id))
        if pending and time.monotonic() - t0 > DEADLINE_S:
            sample = sorted(pending)[:10]
            pytest.fail(f"{len(pending)} (node, trace) pairs not whole within {DEADLINE_S:.0f} s, "
                        f"e.g. " + "; ".join(f"{n} {t}: {last[(n, t)]}" for n, t in sample)
                        + "\n" + "\n".join(sh.diagnostics() for sh in nodes), pytrace=False)
    return time.monotonic() - t0


def test_every_node_answers_every_trace_whole_and_it_lies_on_one(nodes):
    rng = random.Random(4410)
    traces = make_traces(rng)
    send_spread(nodes, traces, rng)
    took = wait_whole_everywhere(nodes, traces)
    print(f"whole from every node {took * 1000:.0f} ms after the last request was answered")
    # The reads merge: the spans are on one node, each trace's owner.
    held = [0] * len(nodes)
    for trace_id, spans in traces.items():
        own = [own_spans(sh, trace_id) for sh in nodes]
        holders = [i for i, ids in enumerate(own) if ids]
        assert len(holders) == 1 and own[holders[0]] == {s["spanId"] for s in spans}, \
            (trace_id, [len(ids) for ids in own])
        held[holders[0]] += 1
    assert all(held), f"a node owns no trace: {held}"


def test_a_fresh_trace_is_whole_from_every_node(nodes):
    """One trace at a time, its spans sent to the nodes in turn, then read from every node
    until each answers it whole. How long that took after the last span's request was
    answered is printed (benchmarks measure; a test waits)."""
    rng = random.Random(4413)
    took = []
    for _ in range(20):
        traces = make_traces(rng)
        trace_id = next(iter(traces))
        spans = traces[trace_id]
        for i, span in enumerate(spans):
            body = next(iter(requests_by_round({trace_id: [dict(s) for s in spans]}, rng)[i]))
            r = nodes[i % len(nodes)].post_traces(body)
            assert r.status_code == 200, r.text
        t0 = time.monotonic()
        pending = set(range(len(nodes)))
        while pending:
            for i in sorted(pending):
                ids, missing = answered(nodes[i], trace_id)
                assert len(ids) == len(set(ids)), f"{nodes[i].name}: a span answered twice"
                if set(ids) == {s["spanId"] for s in spans} and not missing:
                    pending.discard(i)
            assert time.monotonic() - t0 < DEADLINE_S, (trace_id, pending)
        took.append(time.monotonic() - t0)
    took.sort()
    print(f"a fresh trace whole from every node after {took[len(took) // 2] * 1000:.0f} ms "
          f"(median of {len(took)}), at most {took[-1] * 1000:.0f} ms")


def test_a_search_on_any_node_finds_the_traces_of_all(nodes):
    rng = random.Random(4411)
    service = f"search-{rng.getrandbits(32):08x}"
    traces = make_traces(rng)
    for spans in traces.values():
        spans[0]["_service"] = service  # each trace's root: a service of this test alone
    send_spread(nodes, traces, rng)
    wait_whole_everywhere(nodes, traces)
    for sh in nodes:
        r = sh.session.get(f"{sh.query_url}/api/traces",
                           params={"service": service, "lookback": "1h", "limit": 1000},
                           timeout=30)
        assert r.status_code == 200, r.text
        found = {t["traceID"].rjust(32, "0") for t in r.json()["data"]}
        assert found == set(traces), f"{sh.name}: {len(found)} of {len(traces)} traces found"
        assert "X-Spanhouse-Peers-Missing" not in r.headers
        for t in r.json()["data"]:
            assert len(t["spans"]) == SPANS_PER_TRACE, (sh.name, t["traceID"], len(t["spans"]))


def test_a_node_down_is_named_and_the_others_answer(failing_nodes):
    nodes = failing_nodes
    a, b, c = nodes
    rng = random.Random(4412)
    traces = make_traces(rng)
    send_spread(nodes, traces, rng)
    wait_whole_everywhere(nodes, traces)
    on_c = {t for t in traces if own_spans(c, t)}
    assert on_c, "node-c owns none of the traces"
    c.kill()
    try:
        for trace_id in list(traces)[:40]:
            ids, missing = answered(a, trace_id)
            assert "node-c" in missing, (trace_id, missing)
            if trace_id in on_c:
                assert not ids, f"{trace_id}: c's trace answered without c"
            else:
                assert len(ids) == SPANS_PER_TRACE, (trace_id, len(ids))
        # Once the health checks have it down, it is not asked at all.
        deadline = time.monotonic() + DEADLINE_S
        while "node-c down" not in answered(a, next(iter(traces)))[1]:
            assert time.monotonic() < deadline, answered(a, next(iter(traces)))
            time.sleep(0.2)
    finally:
        c.start(keep_ports=True)
    wait_whole_everywhere(nodes, traces)


INGEST_TOKEN = "peers-ingest-token-0123456789"
QUERY_TOKEN = "peers-query-token-0123456789"


@pytest.fixture(scope="module")
def tls_nodes(tmp_path_factory, request):
    """Every listener on TLS with its own token: the nodes forward to each other over TLS with
    the ingest token and read each other over HTTPS with the query token, checking the
    certificate against peers.tls_ca_file."""
    from test_auth_tls import make_cert

    root = tmp_path_factory.mktemp("peer_reads_tls")
    cert, key = make_cert(root)
    factory, started = start_nodes(
        root, request,
        f"  tls_ca_file: {cert}\n"
        f"otlp_http:\n  tls_cert: {cert}\n  tls_key: {key}\n"
        f"query:\n  tls_cert: {cert}\n  tls_key: {key}\n"
        f"auth:\n  ingest_tokens: \"{INGEST_TOKEN}\"\n  query_tokens: \"{QUERY_TOKEN}\"\n",
        ca_cert=cert)
    for sh in started:
        sh.session.headers["Authorization"] = f"Bearer {QUERY_TOKEN}"
    yield started
    factory.teardown()


def test_nodes_on_tls_with_tokens_forward_and_read_each_other(tls_nodes):
    rng = random.Random(4415)
    traces = make_traces(rng)
    n = 0
    for bodies in requests_by_round(traces, rng):
        for body in bodies:
            sh = tls_nodes[n % len(tls_nodes)]
            n += 1
            r = sh.session.post(sh.traces_url, data=body, timeout=30,
                                headers={"Content-Type": "application/json",
                                         "Authorization": f"Bearer {INGEST_TOKEN}"})
            assert r.status_code == 200, f"{r.status_code} {r.text}"
    wait_whole_everywhere(tls_nodes, traces)
    held, problems = whole_on_one_node(traces, placement(tls_nodes, traces))
    assert not problems and all(held), (held, problems[:5])
    forwarded = sum(metric_sum(sh, "spanhouse_peer_spans_forwarded_total") for sh in tls_nodes)
    assert forwarded > 0
