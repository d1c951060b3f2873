#!/usr/bin/env python3
"""1, 2 and 3 spanhouse nodes, flat out, on a ClickHouse 18.16 server and on a 2-shard cluster.

Issue 44, part 6: the figures docs/SCALING.md's capacity model is built from. Each
configuration (a store, a number of nodes) runs on loopback on this machine:

  * the store: `server`, one clickhouse-server (Debian's 18.16), every node on one database;
    or `cluster`, 2 shards x 1 replica of it and a ZooKeeper (tests/e2e/clickhouse_cluster.py),
    every node writing to both shards. Each configuration gets a database of its own, dropped
    once it has been measured.
  * the nodes: 1 (no `peers` section), or 2 and 3 that list each other in `peers.nodes`, so a
    node forwards the spans of the traces it does not own to their owner (OTLP/gRPC, through
    its durable queue).
  * the load: one `spanhouse loadgen` per node (--connections spread over them, each with its
    own seed), flat out (or --rate spans/s in all) for --duration seconds, over OTLP/HTTP.
    loadgen sends whole traces per request, so behind this plain spread a trace lands on a
    node that does not own it (N-1)/N of the time and is forwarded; a node sends the spans
    of one request for one other node as one Export unless a backlog batches them, so an
    Export carries about --spans-per-request / N spans.

Measured per configuration:
  * accepted spans/s (loadgens' sum) and stored spans/s: the accepted spans over the time
    until ClickHouse held as many (count() of the spans tables, polled every 0.5 s);
    then, once merges settled, every accepted span stored once (count() == accepted ==
    uniqExact(trace_id, span_id)).
  * CPU-seconds per million accepted spans (user+system from /proc), per component:
    spanhouse (every serve process, from the load's start until everything was stored);
    ClickHouse (its server processes, the same window); ClickHouse's merges after it (from
    then until system.merges is empty and the servers' CPU is back near idle for 3 s, at
    most --settle-max seconds); loadgen (shown, not counted).
  * forwarding: spans forwarded (spanhouse_peer_spans_forwarded_total, all nodes) as a share
    of accepted, and the spanhouse CPU it adds: the N-node CPU per span minus the 1-node
    figure of the same round, per accepted and per forwarded span.
  * disk: bytes written per accepted span (/proc/<pid>/io write_bytes) by the serve processes
    (the durable queue, forwarded spans once per node they pass through, and the writer's
    spooled blocks), the queue's own share (spanhouse_durable_queue_appended_bytes_total),
    and by ClickHouse (inserts; merges after the run apart).
  * backpressure: requests answered 429/503 (loadgen retried them; those it gave up on were
    never accepted), refused with the durable queue full, spans that waited on disk for the
    store, and the peers' export failures by class.
  * queries (--queries N, after the merges): a small mix through node 1's query API (search
    by service, trace by id, RED calls, services summary), one at a time; CPU-seconds of the
    ClickHouse servers and every node per query, and the p50 latency.
  * each node's peak RSS, the machine's load average at the start and end.

Then the ratios of 2 and 3 nodes to 1 node, per store and round, side by side, and one JSON
line with everything. On a small machine the nodes share its cores: throughput does not grow
with nodes here; the CPU per span is what carries over. Configurations run one after the
other, the node counts in turns (1,2,3 then 3,2,1 with --rounds 2), so that drift of the
machine falls on all of them alike.

Every process started here (ClickHouse, ZooKeeper, nodes, loadgens) is stopped at the end,
also on Ctrl-C, SIGTERM or a failure; the work directory is removed unless --keep.

Usage: bench/nodes.py [--bin build/spanhouse] [--stores server,cluster] [--nodes 1,2,3]
                      [--duration 40] [--rounds 1] [--rate 0] [--spans-per-request 500]
                      [--connections 6] [--corpus fresh]
                      [--queries 40] [--settle-max 240] [--verify-timeout 300] [--keep]
Needs clickhouse-server and ZooKeeper (scripts/setup.sh --tests) and the tests' Python
modules (.venv/bin/python).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from ingest_e2e import cpu_seconds, status_kib  # noqa: E402

PEER_METRICS = ("spanhouse_peer_spans_forwarded_total", "spanhouse_peer_export_failures_total",
                "spanhouse_peer_spans_decided_here_total", "spanhouse_peer_spans_rejected_total",
                "spanhouse_peer_dead_letter_files_total")
QUEUE_METRICS = ("spanhouse_durable_queue_appended_bytes_total",
                 "spanhouse_durable_queue_rejected_full_total",
                 "spanhouse_durable_queue_spilled_spans_total")
NODE_METRICS = PEER_METRICS + QUEUE_METRICS + ("spanhouse_peer_exports_total",)


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"signal {signum}")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def write_bytes(pid: int, field: str = "write_bytes") -> int:
    """Bytes the process sent (or dirtied) for storage; cancelled_write_bytes: those of pages
    dropped before they were written (a file removed or truncated first)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def metrics(query_url: str, names: tuple[str, ...]) -> dict[str, float]:
    """The sum of every sample of each named metric (key: the name), and the sums by each
    label's value (key: name|label=value)."""
    with urllib.request.urlopen(query_url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    out = {n: 0.0 for n in names}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in names:
            value = float(line.rsplit(" ", 1)[1])
            out[name] += value
            for label, v in re.findall(r'(\w+)="([^"]*)"', line.split("}", 1)[0]):
                key = f"{name}|{label}={v}"
                out[key] = out.get(key, 0.0) + value
    return out


def by_label(diff: dict[str, float], name: str, label: str) -> dict[str, float]:
    prefix = f"{name}|{label}="
    return {k[len(prefix):]: v for k, v in diff.items() if k.startswith(prefix) and v}


_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGKILL if this process dies, so nothing is left behind even
    when the bench itself is killed (a thread's children would die with the thread: every
    process here is started from the main thread)."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Store:
    """One ClickHouse server (`server`) or a 2-shard cluster (`cluster`), started here."""

    def __init__(self, kind: str, work: Path):
        from clickhouse_cluster import ClickHouseCluster
        from clickhouse_server import ClickHouseServer, server_missing
        why = server_missing()
        if why:
            raise SystemExit(why)
        self.kind = kind
        self.cluster = None
        if kind == "server":
            self.servers = [ClickHouseServer(work, "ch-server")]
        else:
            self.cluster = ClickHouseCluster(work / "ch-cluster", shards=2, replicas=1,
                                             name="bench")
            self.servers = self.cluster.all_servers()
        self.version = self.servers[0].version()

    def config(self, database: str) -> str:
        shards = "".join(f"    - [{s.url.rstrip('/')}]\n" for s in self.servers)
        return ("storage:\n  engine: clickhouse\nclickhouse:\n"
                f"  database: {database}\n  timeout_s: 60\n"
                + ("  cluster: bench\n" if self.cluster else "") + f"  shards:\n{shards}")

    def pids(self) -> list[int]:
        return [s.proc.pid for s in self.servers]

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids())

    def written(self) -> int:
        return sum(write_bytes(p) for p in self.pids())

    def count(self, database: str) -> int:
        """Spans stored, over every shard's local table (0 while the table is missing)."""
        total = 0
        for s in self.servers:
            try:
                total += int(s.query(f"SELECT count() FROM {database}.spans").strip() or 0)
            except Exception:  # noqa: BLE001 - not created yet, or a server busy
                return -1
        return total

    def distinct(self, database: str) -> int:
        # A trace lives on one shard: the shards' distinct spans add up.
        return sum(int(s.query(f"SELECT uniqExact(trace_id, span_id) FROM {database}.spans",
                               timeout=300).strip()) for s in self.servers)

    def merges(self) -> int:
        return sum(int(s.query("SELECT count() FROM system.merges").strip())
                   for s in self.servers)

    def drop(self, database: str) -> None:
        for s in self.servers:
            for db in (database, database + "_cluster"):
                try:
                    s.query(f"DROP DATABASE IF EXISTS {db}", timeout=300)
                except Exception as e:  # noqa: BLE001
                    print(f"could not drop {db} on {s.name}: {e}", file=sys.stderr)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        else:
            for s in self.servers:
                s.stop()


class Node:
    """One `spanhouse serve` (started by start(), from the main thread)."""

    def __init__(self, binary: str, work: Path, name: str):
        from conftest import free_ports
        self.binary = binary
        self.name = name
        self.work = work / name
        self.work.mkdir(parents=True, exist_ok=True)
        self.http, self.query, self.grpc, self.zipkin = free_ports(4)
        self.traces_url = f"http://127.0.0.1:{self.http}/v1/traces"
        self.query_url = f"http://127.0.0.1:{self.query}"
        self.proc: subprocess.Popen | None = None
        self.log = None

    def peer_entry(self) -> str:
        return (f'    - {{name: {self.name}, otlp: "127.0.0.1:{self.grpc}", '
                f'query: "{self.query_url}"}}\n')

    def start(self, config: str) -> None:
        cfg = self.work / "config.yaml"
        cfg.write_text(config)
        self.log = open(self.work / "serve.log", "w")
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", str(cfg), "--data-dir", str(self.work / "data"),
             "--otlp-http-listen", f"127.0.0.1:{self.http}",
             "--query-listen", f"127.0.0.1:{self.query}",
             "--otlp-grpc-listen", f"127.0.0.1:{self.grpc}",
             "--zipkin-listen", f"127.0.0.1:{self.zipkin}", "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=die_with_parent)

    def log_tail(self) -> str:
        try:
            return (self.work / "serve.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def wait_ready(self, deadline_s: float) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode} at start:\n"
                                 f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.query_url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"{self.name} not ready (/readyz) in {deadline_s:.0f} s:\n"
                         f"{self.log_tail()}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = 120) -> float:
        """SIGTERM (it writes what it queued), SIGKILL after timeout_s; the seconds it took."""
        t = time.monotonic()
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                print(f"{self.name} did not stop in {timeout_s:.0f} s after SIGTERM: killed",
                      file=sys.stderr)
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self.log:
            self.log.close()
        return time.monotonic() - t


def stop_nodes(nodes: list[Node], timeout_s: float) -> dict[str, float]:
    """SIGTERM to every node at once, then waits for each; seconds until each had stopped."""
    t = time.monotonic()
    for nd in nodes:
        if nd.alive():
            nd.proc.send_signal(signal.SIGTERM)
    took = {}
    for nd in nodes:
        nd.stop(max(1.0, timeout_s - (time.monotonic() - t)))
        took[nd.name] = round(time.monotonic() - t, 1)
    return took


def wait_until(what: str, check, deadline_s: float, interval_s: float = 0.5) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > deadline_s:
            raise SystemExit(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(interval_s)
    return time.monotonic() - start


def run_loadgens(args, nodes: list[Node], work: Path) -> tuple[list[dict], float]:
    """One loadgen per node, all at once; their reports and their CPU-seconds (wait4)."""
    per = max(1, args.connections // len(nodes))
    procs = []
    try:
        for i, node in enumerate(nodes):
            out = open(work / f"loadgen-{node.name}.json", "w")
            err = open(work / f"loadgen-{node.name}.log", "w")
            procs.append((subprocess.Popen(
                [args.bin, "loadgen", "--endpoint", node.traces_url, "--duration",
                 str(args.duration), "--connections", str(per), "--rate",
                 str(args.rate / len(nodes)), "--spans-per-request", str(args.spans_per_request),
                 "--corpus",
                 args.corpus, "--seed", str(i + 1), "--json", "--quiet"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                preexec_fn=die_with_parent), out, err))
        reports, cpu = [], 0.0
        for proc, out, err in procs:
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            cpu += ru.ru_utime + ru.ru_stime
            out.close()
            err.close()
        for (proc, _, _), node in zip(procs, nodes):
            text = (work / f"loadgen-{node.name}.json").read_text()
            report = next((json.loads(line) for line in text.splitlines()
                           if line.strip().startswith("{")), None)
            if report is None or proc.returncode != 0:
                raise SystemExit(f"loadgen against {node.name} exited {proc.returncode}, "
                                 f"report: {text[-1000:]}\n"
                                 + (work / f"loadgen-{node.name}.log").read_text()[-2000:])
            reports.append(report)
        return reports, cpu
    finally:
        for proc, out, err in procs:
            if proc.returncode is None and proc.poll() is None:
                proc.kill()
                proc.wait()
            out.close()
            err.close()


def query_mix(args, store: Store, nodes: list[Node]) -> dict:
    """--queries queries, one at a time, through the first node: search, trace by id, RED
    calls, services summary in turns. CPU of the servers and every node per query."""
    if args.queries <= 0:
        return {}
    base = nodes[0].query_url
    kinds = {
        "search": "/api/traces?service=frontend&lookback=1h&limit=20",
        "trace": None,
        "calls": "/api/metrics/calls?service=checkout&lookback=3600000&step=60000",
        "summary": "/api/spanhouse/services/summary?lookback=3600000",
    }
    ids: list[str] = []

    def get(path: str) -> bytes:
        with urllib.request.urlopen(base + path, timeout=120) as r:
            return r.read()

    # The ids to look up, from one search (not timed).
    try:
        found = json.loads(get("/api/traces?service=frontend&lookback=1h&limit=200"))
        ids = [t["traceID"] for t in found.get("data") or []]
    except (OSError, ValueError) as e:
        print(f"query mix: the search for trace ids failed: {e}", file=sys.stderr)
    timings: dict[str, list[float]] = {k: [] for k in kinds}
    ch0, sh0 = store.cpu(), sum(cpu_seconds(n.proc.pid) for n in nodes)
    errors = 0
    for i in range(args.queries):
        kind = list(kinds)[i % len(kinds)]
        path = kinds[kind] or (f"/api/traces/{ids[i % len(ids)]}" if ids else None)
        if path is None:
            continue
        t = time.perf_counter()
        try:
            get(path)
            timings[kind].append((time.perf_counter() - t) * 1000)
        except (OSError, urllib.error.HTTPError) as e:
            errors += 1
            print(f"query {path}: {e}", file=sys.stderr)
    n = sum(len(v) for v in timings.values())
    ch = store.cpu() - ch0
    sh = sum(cpu_seconds(nd.proc.pid) for nd in nodes) - sh0
    p50 = {k: round(sorted(v)[len(v) // 2], 1) if v else float("nan")
           for k, v in timings.items()}
    return {"queries": n, "errors": errors, "ids": len(ids),
            "clickhouse_cpu_ms_per_query": ch / n * 1000 if n else float("nan"),
            "spanhouse_cpu_ms_per_query": sh / n * 1000 if n else float("nan"),
            "p50_ms": p50}


def start_nodes(args, store: Store, database: str, n: int, work: Path) -> list[Node]:
    """n nodes on free ports, ready, each seeing the others in its ring. Ports are found free
    and then released, so another process may take one first on a busy machine: the start is
    tried again on new ports (3 times at most)."""
    for attempt in range(1, 4):
        nodes = [Node(args.bin, work / f"try{attempt}", f"node-{i + 1}") for i in range(n)]
        peers = ("peers:\n  nodes:\n" + "".join(nd.peer_entry() for nd in nodes)) if n > 1 else ""
        try:
            for nd in nodes:
                nd.start(store.config(database) + f"node: {{id: {nd.name}}}\n" + peers)
            for nd in nodes:
                nd.wait_ready(180)
        except SystemExit as e:
            stop_nodes(nodes, 30)
            if "Address already in use" in str(e) and attempt < 3:
                print(f"a port was taken meanwhile, starting again on new ports: {e}",
                      file=sys.stderr)
                continue
            raise
        except BaseException:
            stop_nodes(nodes, 30)
            raise
        break
    if n > 1:
        try:
            wait_until("every node sees the others in its ring", lambda: all(
                metrics(nd.query_url, ("spanhouse_peer_in_ring",))["spanhouse_peer_in_ring"]
                == n - 1 for nd in nodes), 60)
        except BaseException:
            stop_nodes(nodes, 30)
            raise
    return nodes


def run_config(args, store: Store, n: int, rnd: int, work: Path) -> dict:
    database = f"nodes_{store.kind}_{n}_r{rnd}"
    work = work / f"{store.kind}-{n}-r{rnd}"
    work.mkdir(parents=True)
    load_start = load_average()
    print(f"--- {store.kind}, {n} node(s), round {rnd}: load average {load_start}",
          file=sys.stderr)
    nodes: list[Node] = []
    result = None
    try:
        nodes = start_nodes(args, store, database, n, work)
        # Idle: what the nodes and the servers take doing nothing, 3 s.
        ch_i, sh_i, t_i = store.cpu(), sum(cpu_seconds(nd.proc.pid) for nd in nodes), \
            time.monotonic()
        time.sleep(3)
        idle_s = time.monotonic() - t_i
        ch_idle = (store.cpu() - ch_i) / idle_s
        sh_idle = (sum(cpu_seconds(nd.proc.pid) for nd in nodes) - sh_i) / idle_s
        before = [metrics(nd.query_url, NODE_METRICS) for nd in nodes]
        sh0 = {nd.name: cpu_seconds(nd.proc.pid) for nd in nodes}
        io0 = {nd.name: write_bytes(nd.proc.pid) for nd in nodes}
        cancel0 = {nd.name: write_bytes(nd.proc.pid, "cancelled_write_bytes") for nd in nodes}
        ch0, chio0 = store.cpu(), store.written()
        t0 = time.monotonic()
        reports, loadgen_cpu = run_loadgens(args, nodes, work)
        t_load = time.monotonic()
        accepted = sum(r["spans_accepted"] for r in reports)
        if accepted == 0:
            raise SystemExit(f"{store.kind}, {n} nodes: no span accepted")
        stored = -1
        while True:
            stored = store.count(database)
            if stored >= accepted or time.monotonic() - t_load > args.verify_timeout:
                break
            dead = [nd.name for nd in nodes if not nd.alive()]
            if dead:
                raise SystemExit(f"node(s) {dead} died during the run:\n"
                                 + "\n".join(nd.log_tail() for nd in nodes if not nd.alive()))
            time.sleep(0.5)
        t_stored = time.monotonic()
        sh_cpu = {nd.name: cpu_seconds(nd.proc.pid) - sh0[nd.name] for nd in nodes}
        sh_io = sum(write_bytes(nd.proc.pid) - io0[nd.name] for nd in nodes)
        sh_cancel = sum(write_bytes(nd.proc.pid, "cancelled_write_bytes") - cancel0[nd.name]
                        for nd in nodes)
        ch_cpu, ch_io = store.cpu() - ch0, store.written() - chio0
        after = [metrics(nd.query_url, NODE_METRICS) for nd in nodes]
        peer = {m: sum(a.get(m, 0.0) - b.get(m, 0.0) for a, b in zip(after, before))
                for m in set().union(*after)}
        rss = {nd.name: status_kib(nd.proc.pid, "VmHWM") // 1024 for nd in nodes}
        # The merges after the run: until none is running and the servers' CPU has been near
        # idle for 3 s in a row (1 s samples), at most --settle-max s.
        quiet_needed, quiet, last = 3, 0, store.cpu()
        limit = ch_idle + 0.05 * len(store.servers)
        settled = False
        while time.monotonic() - t_stored < args.settle_max:
            time.sleep(1)
            now = store.cpu()
            quiet = quiet + 1 if (now - last) <= limit and store.merges() == 0 else 0
            last = now
            if quiet >= quiet_needed:
                settled = True
                break
        t_settled = time.monotonic()
        merge_cpu, merge_io = store.cpu() - ch0 - ch_cpu, store.written() - chio0 - ch_io
        # The settle's own quiet seconds are idle, not merges.
        merge_cpu = max(0.0, merge_cpu - (quiet_needed if settled else 0) * ch_idle)
        queries = query_mix(args, store, nodes)
        final = store.count(database)
        distinct = store.distinct(database)
        load_end = load_average()
        elapsed = max(r["elapsed_s"] for r in reports)
        stored_wait = t_stored - t_load
        per_m = 1e6 / accepted
        result = {
            "store": store.kind, "nodes": n, "round": rnd, "database": database,
            "accepted": accepted, "accepted_per_s": sum(r["spans_per_s"] for r in reports),
            "stored_per_s": accepted / (elapsed + stored_wait) if final >= accepted else 0.0,
            "stored_wait_s": stored_wait, "load_s": elapsed,
            "stored": final, "distinct": distinct,
            "ok": final == accepted and distinct == final,
            "rejected_requests": sum(r.get("rejected_requests", 0) for r in reports),
            "throttled": sum(r.get("throttled", 0) for r in reports),
            "spanhouse_cpu_s_per_m": sum(sh_cpu.values()) * per_m,
            "spanhouse_cpu_s_by_node": {k: round(v, 2) for k, v in sh_cpu.items()},
            "clickhouse_cpu_s_per_m": ch_cpu * per_m,
            "merge_cpu_s_per_m": merge_cpu * per_m, "merge_settle_s": t_settled - t_stored,
            "merges_settled": settled,
            "loadgen_cpu_s_per_m": loadgen_cpu * per_m,
            "forwarded": peer["spanhouse_peer_spans_forwarded_total"],
            "forwarded_share": peer["spanhouse_peer_spans_forwarded_total"] / accepted,
            "spans_per_export": (peer["spanhouse_peer_spans_forwarded_total"]
                                 / peer["spanhouse_peer_exports_total"]
                                 if peer.get("spanhouse_peer_exports_total") else float("nan")),
            "peer_problems": {m: v for m, v in peer.items()
                              if m in PEER_METRICS[1:] and v},
            "export_failures_by_class": by_label(peer, "spanhouse_peer_export_failures_total",
                                                 "class"),
            "queue_full_rejections": peer["spanhouse_durable_queue_rejected_full_total"],
            # Spans that waited on disk for the store's sink (each peer sink counts its own).
            "spilled_spans": sum(v for k, v in by_label(
                peer, "spanhouse_durable_queue_spilled_spans_total", "sink").items()
                if not k.startswith("peer:")),
            # Durable queue records (what the queue appended), the rest of serve's writes is
            # mostly the writer's spooled blocks.
            "queue_appended_bytes_per_span":
                peer["spanhouse_durable_queue_appended_bytes_total"] / accepted,
            "serve_disk_bytes_per_span": sh_io / accepted,
            "serve_cancelled_bytes_per_span": sh_cancel / accepted,
            "clickhouse_bytes_per_span": ch_io / accepted,
            "merge_bytes_per_span": merge_io / accepted,
            "idle_spanhouse_cpu_per_s": sh_idle, "idle_clickhouse_cpu_per_s": ch_idle,
            "peak_rss_mib": rss, "queries": queries,
            "load_average": [load_start, load_end],
        }
        return result
    except BaseException:
        print(f"stopping the nodes of {store.kind}, {n} nodes (at most 30 s)...",
              file=sys.stderr)
        stop_nodes(nodes, 30)
        raise
    finally:
        took = stop_nodes(nodes, 120)
        if result is not None:
            result["stop_s"] = took
        if not args.keep:
            store.drop(database)
            shutil.rmtree(work, ignore_errors=True)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}x" if b and a == a and b == b else "n/a"


def print_results(args, results: list[dict], versions: dict) -> None:
    print(f"\nloadgen --corpus {args.corpus} (fresh ids and times per request), "
          + (f"{args.rate:.0f} spans/s in all, " if args.rate else "flat out, ")
          + f"{args.spans_per_request} spans per request, {args.duration} s per configuration, "
          f"{args.connections} connections spread over the loadgens (one per node); machine: "
          f"{os.cpu_count()} CPUs; ClickHouse "
          + ", ".join(f"{k} {v}" for k, v in versions.items()))
    print("CPU-s per million accepted spans: sh = every serve process, CH = the ClickHouse "
          "servers during the run, merge = after it; fwd = spans forwarded / accepted; disk "
          "= bytes written per span (sh: every serve process, /proc io; queue: the durable "
          "queue's records; CH: the servers during the run); q: CPU-ms per query of the mix; "
          "lg: loadgen, not counted\n")
    head = (f"{'store':<8}{'N':>2}{'rd':>3} {'accepted/s':>10} {'stored/s':>9} {'ok':>3} "
            f"{'sh':>6} {'CH':>6} {'merge':>6} {'settle':>6} {'lg':>6} {'fwd':>6} "
            f"{'sh disk':>8} {'queue':>6} {'CH disk':>8} {'q CH ms':>8} {'q sh ms':>8}  load")
    print(head)
    for r in results:
        q = r["queries"] or {}
        print(f"{r['store']:<8}{r['nodes']:>2}{r['round']:>3} {r['accepted_per_s']:>10.0f} "
              f"{r['stored_per_s']:>9.0f} {'yes' if r['ok'] else 'NO':>3} "
              f"{r['spanhouse_cpu_s_per_m']:>6.2f} {r['clickhouse_cpu_s_per_m']:>6.2f} "
              f"{r['merge_cpu_s_per_m']:>6.2f} {r['merge_settle_s']:>5.0f}s "
              f"{r['loadgen_cpu_s_per_m']:>6.2f} {r['forwarded_share']:>6.1%} "
              f"{r['serve_disk_bytes_per_span']:>8.0f} "
              f"{r['queue_appended_bytes_per_span']:>6.0f} "
              f"{r['clickhouse_bytes_per_span']:>8.0f} "
              f"{q.get('clickhouse_cpu_ms_per_query', float('nan')):>8.1f} "
              f"{q.get('spanhouse_cpu_ms_per_query', float('nan')):>8.1f}  "
              f"{r['load_average'][0]} -> {r['load_average'][1]}")
    problems = [r for r in results if not r["ok"] or r["peer_problems"]
                or not r["merges_settled"]]
    for r in problems:
        print(f"  ! {r['store']} {r['nodes']} nodes round {r['round']}: accepted "
              f"{r['accepted']}, stored {r['stored']}, distinct {r['distinct']}, peer counters "
              f"{r['peer_problems']} (export failures by class "
              f"{r['export_failures_by_class']}), merges settled {r['merges_settled']}")
    for r in results:
        slow = {k: v for k, v in r.get("stop_s", {}).items() if v > 20}
        if slow:
            print(f"  ! {r['store']} {r['nodes']} nodes round {r['round']}: slow to stop after "
                  f"SIGTERM (s): {slow}")
    for r in results:
        if r["queue_full_rejections"] or r["spilled_spans"] or r["throttled"]:
            print(f"  backpressure, {r['store']} {r['nodes']} nodes round {r['round']}: "
                  f"{r['throttled']:.0f} requests answered 429/503 (retried; "
                  f"{r['rejected_requests']} given up after loadgen's retries, not accepted), "
                  f"{r['queue_full_rejections']:.0f} refused with the durable queue full, "
                  f"{r['spilled_spans']:.0f} spans waited on disk for the store")
    print("\nN nodes / 1 node, the same store and round:")
    for r in results:
        one = next((x for x in results if x["store"] == r["store"] and x["round"] == r["round"]
                    and x["nodes"] == 1), None)
        if one is None or r["nodes"] == 1:
            continue
        added = r["spanhouse_cpu_s_per_m"] - one["spanhouse_cpu_s_per_m"]
        per_fwd = added * r["accepted"] / r["forwarded"] if r["forwarded"] else float("nan")
        print(f"  {r['store']:<8}{r['nodes']} / 1, round {r['round']}: stored/s "
              f"{ratio(r['stored_per_s'], one['stored_per_s'])}, spanhouse CPU/span "
              f"{ratio(r['spanhouse_cpu_s_per_m'], one['spanhouse_cpu_s_per_m'])} "
              f"(+{added:.2f} CPU-s/M accepted, {per_fwd:.2f} CPU-s/M forwarded spans, "
              f"{r['forwarded_share']:.1%} forwarded, {r['spans_per_export']:.0f} spans per "
              f"Export), ClickHouse CPU/span "
              f"{ratio(r['clickhouse_cpu_s_per_m'], one['clickhouse_cpu_s_per_m'])}, merges "
              f"{ratio(r['merge_cpu_s_per_m'], one['merge_cpu_s_per_m'])}, serve disk/span "
              f"{ratio(r['serve_disk_bytes_per_span'], one['serve_disk_bytes_per_span'])} "
              f"(queue records "
              f"{ratio(r['queue_appended_bytes_per_span'], one['queue_appended_bytes_per_span'])})")
    print(json.dumps({"args": vars(args), "clickhouse": versions, "results": results}))


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Every figure is per configuration; compare within one run (the machine's "
               "speed drifts). Rows: --stores x --nodes x --rounds.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--bin", default=str(ROOT / "build" / "spanhouse"),
                   help="the spanhouse binary (serve and loadgen)")
    p.add_argument("--stores", default="server,cluster",
                   help="comma-separated: server (one ClickHouse 18.16 server), cluster (2 "
                        "shards x 1 replica and ZooKeeper)")
    p.add_argument("--nodes", default="1,2,3",
                   help="comma-separated node counts; the N/1 ratios need 1 among them")
    p.add_argument("--duration", type=int, default=40, help="seconds of load per configuration")
    p.add_argument("--rounds", type=int, default=1,
                   help="times each configuration runs; node counts in turns (1,2,3 then "
                        "3,2,1)")
    p.add_argument("--rate", type=float, default=0,
                   help="spans/s offered in all, split evenly over the loadgens; 0: flat out "
                        "(as fast as the nodes take them)")
    p.add_argument("--spans-per-request", type=int, default=500,
                   help="loadgen's spans per request (whole traces); a node forwards about "
                        "this / N spans of each request to each other node")
    p.add_argument("--connections", type=int, default=6,
                   help="loadgen connections in all, spread over one loadgen per node")
    p.add_argument("--corpus", default="fresh", choices=("fresh", "replay"),
                   help="loadgen's corpus (fresh: the values real traffic rarely repeats are "
                        "new in every request)")
    p.add_argument("--queries", type=int, default=40,
                   help="queries of the mix after each configuration's merges (0: none)")
    p.add_argument("--settle-max", type=float, default=240,
                   help="seconds to wait at most for ClickHouse's merges after the load")
    p.add_argument("--verify-timeout", type=float, default=300,
                   help="seconds to wait at most, after the load, for every accepted span to "
                        "be stored")
    p.add_argument("--keep", action="store_true",
                   help="keep the work directory and the databases (printed at the end)")
    args = p.parse_args()
    stores = args.stores.split(",")
    if not stores or set(stores) - {"server", "cluster"}:
        p.error(f"--stores: server and/or cluster, not {args.stores!r}")
    try:
        counts = sorted({int(x) for x in args.nodes.split(",")})
    except ValueError:
        p.error(f"--nodes: comma-separated numbers, not {args.nodes!r}")
    if not counts or counts[0] < 1 or counts[-1] > 9:
        p.error("--nodes: node counts from 1 to 9")
    if (args.duration < 5 or args.rounds < 1 or args.connections < 1 or args.rate < 0
            or args.spans_per_request < 1):
        p.error("--duration >= 5, --rounds >= 1, --connections >= 1, --rate >= 0, "
                "--spans-per-request >= 1")
    if args.connections < counts[-1]:
        p.error(f"--connections {args.connections}: at least one per node ({counts[-1]})")
    if not (os.path.isfile(args.bin) and os.access(args.bin, os.X_OK)):
        p.error(f"--bin {args.bin}: no such executable (build it, or name one)")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    work = Path(tempfile.mkdtemp(prefix="spanhouse-bench-nodes-"))
    started: dict[str, Store] = {}
    results: list[dict] = []
    code = 1
    try:
        for kind in stores:
            print(f"starting the ClickHouse {kind}...", file=sys.stderr)
            started[kind] = Store(kind, work)
        for rnd in range(1, args.rounds + 1):
            order = counts if rnd % 2 else counts[::-1]
            for kind in stores:
                for n in order:
                    results.append(run_config(args, started[kind], n, rnd, work))
        code = 0 if all(r["ok"] for r in results) else 1
    except (KeyboardInterrupt, Interrupted) as e:
        print(f"\ninterrupted ({e or 'Ctrl-C'}): stopping everything", file=sys.stderr)
        code = 130
    except (SystemExit, RuntimeError, OSError) as e:
        print(f"\nfailed: {type(e).__name__}: {e}\nstopping everything", file=sys.stderr)
        code = 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the stops finish
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        versions = {k: s.version for k, s in started.items()}
        for s in started.values():
            s.stop()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if results:
        print_results(args, results, versions)
    return code


if __name__ == "__main__":
    sys.exit(main())
