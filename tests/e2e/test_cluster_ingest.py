"""spanhouse on a real ClickHouse cluster: 2 shards x 2 replicas of Debian's clickhouse-server
(18.16) and ZooKeeper. Spans are written straight to the shard that owns their trace (each
shard's local, replicated tables), read back through the Distributed tables, and nothing is
lost or stored twice when a replica is killed mid-load or a whole shard is stopped and comes
back."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest

from clickhouse_cluster import ClickHouseCluster
from conftest import (SpanhouseFactory, free_ports, otlp_json_request, otlp_json_span,
                      spanhouse_bin)

CLUSTER = "spanhouse"
DB = "traces"


@pytest.fixture
def cluster(tmp_path):
    c = ClickHouseCluster(tmp_path / "cluster", shards=2, replicas=2, name=CLUSTER)
    yield c
    c.stop()


def start_spanhouse(tmp_path, request, cluster: ClickHouseCluster, run_jobs: bool = True,
                    factory: SpanhouseFactory = None, name: str = "spanhouse", lag_s: int = 0,
                    fault_injection: bool = False):
    shards = "\n".join(
        "    - [" + ", ".join(cluster.server(s, r).url.rstrip("/")
                              for r in range(cluster.replicas)) + "]"
        for s in range(cluster.shards))
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"""storage:
  engine: clickhouse
clickhouse:
  cluster: {CLUSTER}
  database: {DB}
  timeout_s: 10
  run_jobs: {"true" if run_jobs else "false"}
  shards:
{shards}
writer:
  max_age_ms: 500
dependencies:
  interval_s: 1
  lag_s: {lag_s}
debug:
  fault_injection: {"true" if fault_injection else "false"}
""")
    if factory is None:
        factory = SpanhouseFactory(tmp_path)
        request.node._spanhouse_factories = [factory]
    return factory, factory(name, config=config)


def loadgen(sh, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [spanhouse_bin(), "loadgen", "--endpoint", sh.traces_url, "--connections", "2",
         "--quiet", "--json", "--payloads", "0", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def accepted(proc: subprocess.Popen, timeout: float = 300) -> int:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"loadgen failed:\n{out}\n{err}"
    return json.loads(out)["spans_accepted"]


def q(server, sql: str) -> str:
    return server.query(sql).strip()


def local_count(server) -> tuple[int, int]:
    rows, ids = q(server, f"SELECT count(), uniqExact(trace_id, span_id) FROM {DB}.spans").split()
    return int(rows), int(ids)


def wait_stored(cluster, sh, want: int, deadline_s: float = 120) -> None:
    """Until every replica of every shard holds its shard's spans and they sum to `want`."""
    def done() -> bool:
        per_shard = []
        for s in range(cluster.shards):
            counts = {local_count(cluster.server(s, r))[0] for r in range(cluster.replicas)}
            if len(counts) != 1:
                return False  # replication still catching up
            per_shard.append(counts.pop())
        return sum(per_shard) == want
    cluster.wait_for(f"{want} spans stored on the cluster", done, deadline_s=deadline_s)


def check_exactly_once(cluster, want: int) -> None:
    """Every span once, each trace on the one shard sipHash64(trace_id) % shards names."""
    total = 0
    traces: list[set] = []
    for s in range(cluster.shards):
        for r in range(cluster.replicas):
            rows, ids = local_count(cluster.server(s, r))
            assert rows == ids, f"shard {s + 1} replica {r + 1}: {rows} rows, {ids} distinct spans"
        server = cluster.server(s, 0)
        wrong = q(server, f"SELECT count() FROM {DB}.spans WHERE sipHash64(trace_id) % "
                          f"{cluster.shards} != {s}")
        assert wrong == "0", f"shard {s + 1} holds {wrong} spans of another shard's traces"
        traces.append(set(q(server, f"SELECT DISTINCT lower(hex(trace_id)) FROM {DB}.spans")
                          .split()))
        total += local_count(server)[0]
    assert all(traces), "a shard got no traces"
    assert not traces[0] & traces[1], "a trace on both shards"
    assert total == want, f"{total} spans stored, {want} accepted"


def test_traces_go_to_their_shard_and_read_back_whole(tmp_path, request, cluster):
    factory, sh = start_spanhouse(tmp_path, request, cluster)
    # --verify counts the run's spans through the query API (a resource attribute's spans:
    # a GLOBAL subquery over the Distributed tables).
    n = accepted(loadgen(sh, "--spans", "20000", "--rate", "10000", "--verify",
                         "--query-endpoint", sh.query_url))
    wait_stored(cluster, sh, n)
    check_exactly_once(cluster, n)
    # Through the Distributed tables: whole traces, from both shards, by id.
    for s in range(cluster.shards):
        server = cluster.server(s, 0)
        rows = q(server, f"SELECT lower(hex(trace_id)), count() FROM {DB}.spans GROUP BY trace_id "
                         f"ORDER BY trace_id LIMIT 5").splitlines()
        for line in rows:
            trace_id, count = line.split("\t")
            doc = sh.get_trace(trace_id).json()
            got = sum(len(t["spans"]) for t in doc["data"])
            assert got == int(count), f"trace {trace_id}: {got} spans read, {count} stored"
    # Services, searches and dependencies read every shard.
    services = sh.session.get(f"{sh.query_url}/api/services", timeout=30).json()["data"]
    assert "frontend" in services and "checkout" in services, services
    found = sh.session.get(f"{sh.query_url}/api/traces",
                           params={"service": "checkout", "limit": 200}, timeout=30).json()["data"]
    shards_seen = {int(q(cluster.server(0, 0), f"SELECT sipHash64(unhex('{t['traceID']}')) % 2"))
                   for t in found}
    assert shards_seen == {0, 1}, "a search returned one shard's traces only"
    factory.teardown()


def test_a_killed_replica_and_a_stopped_shard_lose_nothing(tmp_path, request, cluster):
    factory, sh = start_spanhouse(tmp_path, request, cluster)
    load = loadgen(sh, "--rate", "3000", "--duration", "90")
    time.sleep(5)
    # SIGKILL the replica each shard's writes go to first: they move to the other one.
    cluster.kill(0, 0)
    time.sleep(10)
    cluster.start(0, 0)
    # The whole second shard down: the first keeps ingesting, the second's spans wait in the
    # durable queue and arrive once it is back.
    cluster.stop_shard(1)
    before = local_count(cluster.server(0, 1))[0]
    cluster.wait_for("shard 1 ingesting while shard 2 is down",
                     lambda: local_count(cluster.server(0, 1))[0] > before, deadline_s=30)
    time.sleep(60)
    cluster.start_shard(1)
    n = accepted(load)
    wait_stored(cluster, sh, n, deadline_s=180)
    check_exactly_once(cluster, n)
    factory.teardown()


def test_two_spanhouse_nodes_write_one_cluster(tmp_path, request, cluster):
    """Each trace's spans sent half to one spanhouse, half to the other: both store into the
    same cluster and either reads every trace back whole. Only the node with
    clickhouse.run_jobs makes the schema and computes the dependencies, so edges count once."""
    # The dependency job takes a minute 10 s after it ended: every span sent in it is stored
    # by then, however slow the machine.
    factory, a = start_spanhouse(tmp_path, request, cluster, lag_s=10)
    _, b = start_spanhouse(tmp_path, request, cluster, run_jobs=False, factory=factory, name="b",
                           lag_s=10)
    start = time.time_ns()
    traces = {}
    for t in range(40):
        trace_id = os.urandom(16).hex()
        root = os.urandom(8).hex()
        spans = [otlp_json_span(trace_id, root, "GET /checkout", start_ns=start + t * 1000)]
        spans += [otlp_json_span(trace_id, os.urandom(8).hex(), f"step {i}", parent=root,
                                 start_ns=start + t * 1000 + i) for i in range(5)]
        traces[trace_id] = spans
    for trace_id, spans in traces.items():
        for sh, part, service in ((a, spans[:3], "front"), (b, spans[3:], "back")):
            r = sh.post_traces(otlp_json_request(part, service=service))
            assert r.status_code == 200, r.text
    for trace_id in traces:
        for sh in (a, b):
            sh.wait_for_trace(trace_id, lambda d: sum(len(x["spans"]) for x in d["data"]) == 6,
                              what="did not show all 6 spans")
    check_exactly_once(cluster, 6 * len(traces))
    # front's root calls back's steps (3 of 5 steps per trace are on back): one job's edges.
    def edges():
        r = a.session.get(f"{a.query_url}/api/dependencies",
                          params={"endTs": int(time.time() * 1000), "lookback": 3_600_000},
                          timeout=30)
        return {(d["parent"], d["child"]): d["callCount"] for d in r.json()["data"] or []}
    cluster.wait_for("the dependency edges", lambda: ("front", "back") in edges(), deadline_s=150)
    time.sleep(3)  # a second job, were there one, would have added its edges by now
    assert edges()[("front", "back")] == 3 * len(traces), edges()
    assert ("waiting for the schema" in b.stderr_text()
            or re.search(r"schema \d+ found", b.stderr_text())), b.stderr_text()
    factory.teardown()


def test_an_older_schema_on_a_cluster_stops_the_start_untouched(tmp_path, cluster):
    """Upgrading a cluster's schema is not supported yet: spanhouse says so and changes
    nothing, rather than copying tables replica by replica."""
    server = cluster.server(1, 1)
    server.query(f"CREATE DATABASE {DB}")
    server.query(f"CREATE TABLE {DB}.schema_version (version UInt32, applied_at DateTime) "
                 f"ENGINE = MergeTree ORDER BY version")
    server.query(f"INSERT INTO {DB}.schema_version VALUES (8, now())")
    shards = ";".join(",".join(cluster.server(s, r).url.rstrip("/")
                               for r in range(cluster.replicas)) for s in range(cluster.shards))
    proc = subprocess.run(
        [spanhouse_bin(), "serve", "--data-dir", str(tmp_path / "data"),
         "--config", str(_config(tmp_path, shards)),
         *[arg for flag, port in zip(("--otlp-http-listen", "--query-listen",
                                      "--otlp-grpc-listen", "--zipkin-listen"), free_ports(4))
           for arg in (flag, f"127.0.0.1:{port}")]],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "upgrading a cluster's schema is not supported yet" in proc.stderr + proc.stdout, \
        proc.stderr[-3000:]
    assert q(server, f"SELECT groupArray(version) FROM {DB}.schema_version") == "[8]"
    assert q(server, f"SELECT count() FROM system.tables WHERE database = '{DB}'") == "1"


def _config(tmp_path, shards: str):
    path = tmp_path / "old-schema.yaml"
    path.write_text(f"storage:\n  engine: clickhouse\nclickhouse:\n  cluster: {CLUSTER}\n"
                    f"  database: {DB}\n  shards: \"{shards}\"\n")
    return path


def test_a_crash_between_insert_and_release_stores_the_block_once(tmp_path, request, cluster):
    """The ambiguous case on a cluster, forced: a shard's insert is stored, spanhouse dies
    before its records leave the durable queue. The next start sends the same block again,
    the same bytes, and the replicated tables keep it once (18.16 has no deduplication
    tokens): spans and the views' tables alike."""
    factory, sh = start_spanhouse(tmp_path, request, cluster, fault_injection=True)
    r = sh.session.post(f"{sh.query_url}/debug/sink",
                        params={"kill_after_insert": "true", "sink": "clickhouse-shard1"},
                        timeout=10)
    assert r.status_code == 200, r.text
    # One request: it is answered before the writer's first insert (max_age_ms later), so
    # the kill that follows that insert never cuts a request short (60 requests on a loaded
    # machine could outlast it).
    start = time.time_ns()
    spans = []
    for t in range(60):
        trace_id = os.urandom(16).hex()
        root = os.urandom(8).hex()
        spans.append(otlp_json_span(trace_id, root, "GET /cart", start_ns=start + t))
        spans += [otlp_json_span(trace_id, os.urandom(8).hex(), f"db {i}", parent=root,
                                 start_ns=start + t + i) for i in range(3)]
    r = sh.post_traces(otlp_json_request(spans, service="cart"))
    assert r.status_code == 200, r.text
    sent = len(spans)
    deadline = time.monotonic() + 60
    while sh.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sh.proc.poll() is not None, "spanhouse did not kill itself after shard 1's insert"
    sh.stop(signal.SIGKILL)  # records the exit
    sh.start(keep_ports=True)
    replayed = sh.session.get(f"{sh.query_url}/metrics", timeout=10).text
    blocks = sum(float(line.rsplit(" ", 1)[1]) for line in replayed.splitlines()
                 if line.startswith("spanhouse_durable_queue_replayed_blocks_total"))
    assert blocks > 0, "the restart replayed no sealed block: the insert was not ambiguous"
    wait_stored(cluster, sh, sent)
    time.sleep(2)  # a second copy, were there one, would be in by now
    check_exactly_once(cluster, sent)
    for s in range(cluster.shards):
        spans, calls = q(cluster.server(s, 0), f"SELECT (SELECT count() FROM {DB}.spans), "
                                               f"(SELECT sumMerge(calls) FROM {DB}.red_1m)").split()
        assert spans == calls, f"shard {s + 1}: {spans} spans, red_1m counted {calls}"
    factory.teardown()
