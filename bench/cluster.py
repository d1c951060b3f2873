#!/usr/bin/env python3
"""spanhouse on a ClickHouse server or cluster against the embedded engine, on this machine.

Two comparisons, each run side by side (both spanhouse processes at once, each fed by its own
`spanhouse loadgen --payloads 0`, fresh traces for every request, at --rate spans/s), because
these machines drift by 15% from one minute to the next:
  1. embedded chDB  vs  one clickhouse-server (Debian's 18.16) over HTTP
  2. one server (1 shard)  vs  a cluster of 2 shards (1 replica each, Distributed reads)
  3. one server, insert bodies uncompressed  vs  gzip (clickhouse.compression)
For each: accepted and stored spans/s (stored: every accepted span queryable, loadgen
--verify), spanhouse's own CPU-seconds per million spans (user+system of the serve process;
the embedded run's includes chDB, the remote runs' does not), the ClickHouse servers' CPU per
million spans, and bytes on the wire per span to ClickHouse (spanhouse_sink_bytes_sent_total).
Then the ratios of each pair. Loopback only; every process is stopped at the end.

Usage: bench/cluster.py [--bin build/spanhouse] [--rate 20000] [--duration 60]
                        [--connections 2] [--pairs 1,2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from clickhouse_cluster import ClickHouseCluster  # noqa: E402
from clickhouse_server import ClickHouseServer  # noqa: E402
from ingest_e2e import cpu_seconds, free_port, stored_per_s, wait_ready  # noqa: E402


def metric(query_url: str, name: str) -> float:
    with urllib.request.urlopen(f"{query_url}/metrics", timeout=30) as r:
        total = 0.0
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total


class Serve:
    """One spanhouse serve on its own data dir; `store` is YAML for the storage it uses."""

    def __init__(self, binary: str, work: Path, label: str, store: str):
        self.label = label
        self.work = work / label
        self.work.mkdir(parents=True)
        cfg = self.work / "config.yaml"
        cfg.write_text(store)
        otlp, query, grpc, zipkin = free_port(), free_port(), free_port(), free_port()
        self.traces_url = f"http://127.0.0.1:{otlp}/v1/traces"
        self.query_url = f"http://127.0.0.1:{query}"
        self.log = open(self.work / "serve.log", "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--config", str(cfg), "--data-dir", str(self.work / "data"),
             "--otlp-http-listen", f"127.0.0.1:{otlp}", "--query-listen", f"127.0.0.1:{query}",
             "--otlp-grpc-listen", f"127.0.0.1:{grpc}", "--zipkin-listen", f"127.0.0.1:{zipkin}",
             "--log-level", "warn"], stdout=self.log, stderr=self.log)
        wait_ready(self.query_url, self.proc, deadline_s=120)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def server_pids(servers) -> list[int]:
    return [s.proc.pid for s in servers]


def run_pair(args, work: Path, pair: list[tuple[str, str, list]]) -> list[dict]:
    """Starts each (label, store YAML, ClickHouse servers) serve, loads them at once, measures."""
    serves = [Serve(args.bin, work, label, store) for label, store, _ in pair]
    try:
        cpu0 = [cpu_seconds(s.proc.pid) for s in serves]
        ch0 = [sum(cpu_seconds(p) for p in server_pids(servers)) for _, _, servers in pair]
        bytes0 = [metric(s.query_url, "spanhouse_sink_bytes_sent_total") for s in serves]

        def load(s: Serve) -> dict:
            cmd = [args.bin, "loadgen", "--endpoint", s.traces_url, "--query-endpoint",
                   s.query_url, "--duration", str(args.duration), "--connections",
                   str(args.connections), "--rate", str(args.rate), "--payloads", "0",
                   "--verify", "--verify-timeout", "300", "--json", "--quiet"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            for line in out.stdout.splitlines():
                if line.strip().startswith("{"):
                    report = json.loads(line)
                    report["exit"] = out.returncode
                    return report
            raise SystemExit(f"loadgen printed no report:\n{out.stdout}\n{out.stderr}")

        with concurrent.futures.ThreadPoolExecutor(len(serves)) as pool:
            reports = list(pool.map(load, serves))
        results = []
        for i, (s, report) in enumerate(zip(serves, reports)):
            accepted = report["spans_accepted"]
            cpu = cpu_seconds(s.proc.pid) - cpu0[i]
            ch = sum(cpu_seconds(p) for p in server_pids(pair[i][2])) - ch0[i]
            sent = metric(s.query_url, "spanhouse_sink_bytes_sent_total") - bytes0[i]
            results.append({
                "run": s.label, "accepted": accepted,
                "accepted_per_s": report["spans_per_s"], "stored_per_s": stored_per_s(report),
                "verified": report["exit"] == 0,
                "spanhouse_cpu_s_per_m": cpu / accepted * 1e6 if accepted else float("nan"),
                "clickhouse_cpu_s_per_m": ch / accepted * 1e6 if accepted and pair[i][2]
                else float("nan"),
                "wire_bytes_per_span": sent / accepted if accepted else float("nan"),
            })
        return results
    finally:
        for s in serves:
            s.stop()


def remote_store(cluster_name: str, shards: list[list[str]], database: str) -> str:
    lines = "".join("    - [" + ", ".join(u.rstrip("/") for u in shard) + "]\n"
                    for shard in shards)
    return (f"storage:\n  engine: clickhouse\nclickhouse:\n  database: {database}\n"
            + (f"  cluster: {cluster_name}\n" if len(shards) > 1 else "")
            + f"  shards:\n{lines}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=str(ROOT / "build" / "spanhouse"))
    p.add_argument("--rate", type=int, default=20000, help="spans/s per spanhouse")
    p.add_argument("--duration", type=int, default=60)
    p.add_argument("--connections", type=int, default=2)
    p.add_argument("--pairs", default="1,2,3",
                   help="1: embedded vs server; 2: 1 vs 2 shards; 3: uncompressed vs gzip")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spanhouse-bench-cluster-"))
    rows = []
    single = ClickHouseServer(work, "single")
    cluster = None
    try:
        if "1" in args.pairs.split(","):
            rows.append(run_pair(args, work / "pair1", [
                ("embedded", "writer:\n  threads: 1\n", []),
                ("server", remote_store("", [[single.url]], "bench1"), [single])]))
        if "2" in args.pairs.split(","):
            cluster = ClickHouseCluster(work / "cluster", shards=2, replicas=1, name="bench")
            rows.append(run_pair(args, work / "pair2", [
                ("1 shard", remote_store("", [[single.url]], "bench2"), [single]),
                ("2 shards", remote_store("bench", [[cluster.server(0, 0).url],
                                                    [cluster.server(1, 0).url]], "bench"),
                 cluster.all_servers())]))
        if "3" in args.pairs.split(","):
            rows.append(run_pair(args, work / "pair3", [
                # One server for both: its CPU is not told apart (nan).
                ("none", remote_store("", [[single.url]], "bench3"), []),
                ("gzip", remote_store("", [[single.url]], "bench4")
                 + "  compression: gzip\n", [])]))
    finally:
        single.stop()
        if cluster is not None:
            cluster.stop()
    print(f"\nfresh loadgen traces (--payloads 0), {args.rate} spans/s offered to each for "
          f"{args.duration} s, side by side; machine: {os.cpu_count()} CPUs")
    print(f"{'run':<10} {'accepted/s':>11} {'stored/s':>10} {'ok':>3} {'sh CPU-s/M':>11} "
          f"{'CH CPU-s/M':>11} {'wire B/span':>12}")
    for pair in rows:
        for r in pair:
            print(f"{r['run']:<10} {r['accepted_per_s']:>11.0f} {r['stored_per_s']:>10.0f} "
                  f"{'yes' if r['verified'] else 'NO':>3} {r['spanhouse_cpu_s_per_m']:>11.2f} "
                  f"{r['clickhouse_cpu_s_per_m']:>11.2f} {r['wire_bytes_per_span']:>12.1f}")
        a, b = pair
        print(f"  {b['run']} / {a['run']}: spanhouse CPU per span "
              f"{b['spanhouse_cpu_s_per_m'] / a['spanhouse_cpu_s_per_m']:.3f}x, stored/s "
              f"{b['stored_per_s'] / a['stored_per_s']:.3f}x")
    print(json.dumps(rows))
    return 0 if all(r["verified"] for pair in rows for r in pair) else 1


if __name__ == "__main__":
    sys.exit(main())
