#!/usr/bin/env python3
"""End-to-end ingest benchmark: `spanhouse serve` + `spanhouse loadgen` on this machine.

Runs, side by side in one invocation (these machines are noisy, so compare
within a run):
  1. chdb: OTLP/HTTP (or OTLP/gRPC: --protocol) -> pipeline -> embedded
     ClickHouse, loadgen --verify
  2. chdb+query: the same, with a full-scan aggregation over the spans table
     (the query API's span count by a span attribute) every 10 s, to see
     how much ingest keeps while chDB also answers queries
  3. null: the same pipeline with writer.sink = null (receive, decode, filter,
     durable queue; the null sink encodes nothing and stores nothing), to show
     where the CPU goes
  4. dual: dual-write against ClickHouse alone, side by side: two serves at
     the same time, each fed by its own loadgen at --rate (required), one with
     secondary.type: opensearch (Jaeger documents to an OpenSearch node, index
     prefix bench-e2e-<pid>, 1 shard, 0 replicas), one without; prints the
     CPU-seconds per million spans of each and their ratio, OpenSearch's own
     CPU (its JVM's utime+stime from /proc, from the load's start until the
     sink caught up) per million spans, and how long after the load the
     OpenSearch sink caught up: spanhouse_sink_lag_milliseconds{sink=
     "opensearch"} back at 0, nothing pending, every accepted span written
     (serve's CPU of the dual run is counted until then). The node is
     started from tests/opensearch's launcher (tests/e2e/opensearch_server.py:
     needs java, the built launcher and `requests`, e.g. .venv/bin/python),
     or is --opensearch-url's (its CPU then with --opensearch-pid only); the
     bench's indices are deleted at the end.
  5. sampling: head sampling at 10% (sampling.head.probability 0.1) against
     sampling off, side by side: two serves at the same time, each fed by
     its own loadgen at --rate (required); prints the CPU-seconds per million
     accepted spans of each and their ratio, and the share of traces kept.
  6. tail: tail sampling (TAIL_POLICIES, decisions 10 s after a trace's
     first span) against sampling off, side by side like sampling; both
     loadgens mark 1% of traces as errors and 1% as slow (600 ms). Prints
     the CPU ratio, the share kept, and the tail window's memory: the most
     open traces seen (every 5 s), the budget they were counted at, and the
     held spans.
  7. recent: the recent-traces index (query.recent_max_bytes) on against
     off, side by side like sampling: the CPU ratio and peak RSS. With
     --recent-off disk, the index's disk tier on against off
     (query.recent_disk_bytes 0), the memory tier on in both.
  7b. copy: the trace copy (storage.trace_copy_s: 86400) on against off,
     side by side like sampling: the CPU ratio and peak RSS.
  8. catchup: an OpenSearch outage during dual-write, --bin against --side-by-side BIN at
     --rate each (own loadgens, own index prefixes): the node stopped (SIGSTOP) for the
     whole load and resumed after it; prints serve's CPU from the load's end until its
     OpenSearch sink caught up (reading its backlog back from the durable queue), per
     accepted span, and the ratio of the two builds.
and prints per run: accepted spans/s, stored spans/s (accepted spans over
the time until all of them were queryable), spanhouse CPU-seconds per million
spans (user+system of the server process, chDB included), peak RSS, the RSS
series every 5 s, 429s, and stored == accepted.

Usage: bench/ingest_e2e.py [--bin build/spanhouse] [--loadgen BIN] [--duration 60]
                           [--connections 4] [--writer-threads 1] [--rate 0] [--corpus replay|fresh]
                           [--protocol http|grpc|http,grpc]
                           [--runs chdb,chdb+query,null] [--writer KEY=VALUE ...]
                           [--durable KEY=VALUE ...] [--set SECTION.KEY=VALUE ...]
                           [--keep DIR] [--side-by-side BIN ... --rate N]
                           [--runs dual --rate N [--opensearch-url URL [--opensearch-pid PID]]]
                           [--runs sampling --rate N] [--runs tail --rate N] [--runs recent --rate N]
                           [--runs catchup --rate N --side-by-side BIN]
With --side-by-side, --bin and each BIN serve at the same time, each fed by
its own loadgen at --rate spans/s: the fairest comparison of two builds on a
machine whose speed drifts by 15% from one minute to the next.
Only loopback addresses are used; every process is stopped at the end.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def stored_per_s(report: dict) -> float:
    """Accepted spans over the time until all were queryable (0 without --verify)."""
    v = report.get("verify")
    if not v:
        return 0.0
    return report["spans_accepted"] / (report["elapsed_s"] + v.get("seconds", 0))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def wait_ready(url: str, proc: subprocess.Popen, deadline_s: float = 60) -> None:
    end = time.time() + deadline_s
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"spanhouse exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("spanhouse did not become ready (/readyz)")


def query_loop(query_url: str, stop: threading.Event, timings: list, errors: list) -> None:
    """Every 10 s, a full scan: count spans with the span attribute app.channel = android
    (every span's attribute arrays are read)."""
    url = query_url + "/api/spans/count?attr=app.channel&value=android"
    while not stop.wait(10):
        t = time.time()
        try:
            with urllib.request.urlopen(url, timeout=120) as r:
                r.read()
            timings.append(time.time() - t)
        except OSError as e:
            errors.append(str(e))


def metrics(query_url: str, names: tuple[str, ...], labels: str = "") -> dict[str, float]:
    """The sum of each named metric's samples whose labels contain `labels`."""
    with urllib.request.urlopen(query_url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {n: 0.0 for n in names}
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in out and labels in line:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


TAIL_GAUGES = ("spanhouse_sampling_tail_open_traces", "spanhouse_sampling_tail_decided_traces",
               "spanhouse_sampling_tail_memory_bytes", "spanhouse_sampling_tail_held_spans")
TAIL_POLICIES = "error; latency 500ms; rate 50/s"
# Both sides of a tail run send the same share of error and slow traces.
MARKED_TRACES = ["--error-traces", "0.01", "--slow-traces", "0.01", "--slow-ms", "600"]
SINK_LAG = "spanhouse_sink_lag_milliseconds"
SINK_PENDING = "spanhouse_sink_pending_rows"
SINK_WRITTEN = "spanhouse_sink_rows_written_total"


class OpenSearchNode:
    """The OpenSearch node of the dual run: --opensearch-url's, or one started from
    tests/opensearch's launcher (tests/e2e/opensearch_server.py), stopped at the end."""

    def __init__(self, args):
        self.server = None
        self.url = args.opensearch_url.rstrip("/")
        self.pid = args.opensearch_pid
        self.prefix = f"bench-e2e-{os.getpid()}"
        if not self.url:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
            from opensearch_server import OpenSearch  # noqa: E402 (needs `requests`)
            self.root = tempfile.mkdtemp(prefix="spanhouse-bench-opensearch-")
            print("starting OpenSearch (tests/opensearch's launcher)...", file=sys.stderr)
            self.server = OpenSearch(Path(self.root))
            self.url, self.pid = self.server.url, self.server.pid
        with urllib.request.urlopen(self.url + "/", timeout=10) as r:
            self.version = json.loads(r.read())["version"]["number"]

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid) if self.pid else float("nan")

    def delete_indices(self) -> None:
        for path in (f"/{self.prefix}-jaeger-*", f"/_template/{self.prefix}-jaeger-span",
                     f"/_template/{self.prefix}-jaeger-service"):
            req = urllib.request.Request(self.url + path, method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except OSError as e:
                print(f"could not delete {path}: {e}", file=sys.stderr)

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            self.delete_indices()


def run(args, sink: str, with_query: bool = False, protocol: str = "http",
        server_bin: str | None = None, label: str = "", alone: bool = True,
        opensearch: OpenSearchNode | None = None, watch_sinks: bool = False,
        window: threading.Event | None = None, extra: dict | None = None,
        loadgen_args: list[str] | None = None,
        load_done: threading.Barrier | None = None) -> dict:
    """One serve fed by one loadgen. With `opensearch`, serve dual-writes to it and the run
    lasts until its OpenSearch sink has caught up. With `watch_sinks` (or `opensearch`),
    /metrics is read every 0.5 s (both sides of the dual run, so that both pay for it).
    `window`: the dual run sets it when it ends; the other side waits for it before reading
    its CPU, so that both count the CPU of the same wall time (merges included).
    `load_done`: waited on once the load has ended (the catch-up run resumes OpenSearch
    when every side got there); serve's CPU then is the catch-up's start."""
    server_bin = server_bin or args.bin
    work = tempfile.mkdtemp(prefix=f"spanhouse-bench-{sink}-")
    otlp, query, grpc, zipkin = free_port(), free_port(), free_port(), free_port()
    cfg = os.path.join(work, "config.yaml")
    sections: dict[str, dict[str, str]] = {
        "writer": {"sink": sink, "threads": str(args.writer_threads)}}
    if opensearch is not None:
        sections["secondary"] = {"type": "opensearch"}
        sections["opensearch"] = {"urls": opensearch.url, "index_prefix": opensearch.prefix,
                                  "shards": "1", "replicas": "0"}
    for section, keys in (extra or {}).items():
        sections.setdefault(section, {}).update(keys)
    settings = ([f"writer.{kv}" for kv in args.writer] + [f"durable.{kv}" for kv in args.durable]
                + args.set)
    for kv in settings:
        dotted, _, value = kv.partition("=")
        section, _, key = dotted.partition(".")
        sections.setdefault(section, {})[key] = value
    with open(cfg, "w") as f:
        for section, keys in sections.items():
            f.write(f"{section}:\n" + "".join(f"  {k}: {v}\n" for k, v in keys.items()))
    log = open(os.path.join(work, "serve.log"), "w")
    serve = subprocess.Popen(
        [server_bin, "serve", "--config", cfg, "--data-dir", os.path.join(work, "data"),
         "--otlp-http-listen", f"127.0.0.1:{otlp}", "--query-listen", f"127.0.0.1:{query}",
         "--otlp-grpc-listen", f"127.0.0.1:{grpc}", "--zipkin-listen", f"127.0.0.1:{zipkin}",
         "--log-level", "warn"], stdout=log, stderr=log)
    try:
        wait_ready(f"http://127.0.0.1:{query}", serve)
        rss_series: list[int] = []
        tail_series: list[dict[str, float]] = []
        tailed = "tail.policies" in (extra or {}).get("sampling", {})
        stop = threading.Event()

        def sample():
            while not stop.wait(5):
                rss_series.append(status_kib(serve.pid, "VmRSS") // 1024)
                if tailed:
                    try:
                        tail_series.append(metrics(f"http://127.0.0.1:{query}", TAIL_GAUGES))
                    except OSError:
                        pass

        sampler = threading.Thread(target=sample, daemon=True)
        # The OpenSearch sink's state every 0.5 s: (time, lag ms, pending rows, rows written).
        sink_samples: list[tuple[float, float, float, float]] = []
        watch_stop = threading.Event()

        def watch():
            while not watch_stop.wait(0.5):
                try:
                    m = metrics(f"http://127.0.0.1:{query}",
                                (SINK_LAG, SINK_PENDING, SINK_WRITTEN), 'sink="opensearch"')
                except OSError:
                    continue
                sink_samples.append((time.time(), m[SINK_LAG], m[SINK_PENDING],
                                     m[SINK_WRITTEN]))

        watcher = threading.Thread(target=watch, daemon=True)
        query_timings: list[float] = []
        query_errors: list[str] = []
        querier = threading.Thread(target=query_loop, daemon=True, args=(
            f"http://127.0.0.1:{query}", stop, query_timings, query_errors))
        cpu0 = cpu_seconds(serve.pid)
        os_cpu0 = opensearch.cpu_seconds() if opensearch else 0.0
        t0 = time.time()
        sampler.start()
        if watch_sinks or opensearch is not None:
            watcher.start()
        if with_query:
            querier.start()
        endpoint = (f"127.0.0.1:{grpc}" if protocol == "grpc"
                    else f"http://127.0.0.1:{otlp}/v1/traces")
        cmd = [args.loadgen or args.bin, "loadgen", "--protocol", protocol, "--endpoint", endpoint,
               "--query-endpoint", f"http://127.0.0.1:{query}",
               "--duration", str(args.duration), "--connections", str(args.connections),
               "--rate", str(args.rate), "--corpus", args.corpus, "--json"] + (loadgen_args or [])
        if sink == "chdb" and "sampling" not in (extra or {}):
            cmd.append("--verify")  # a sampled run stores fewer spans than it accepts
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        lg = subprocess.run(cmd, capture_output=True, text=True)
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        loadgen_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
        stop.set()
        report = {}
        for line in lg.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                report = json.loads(line)
        if not report:
            raise SystemExit(f"loadgen printed no JSON report (exit {lg.returncode}):\n"
                             f"{lg.stdout[-2000:]}\n{lg.stderr[-2000:]}")
        accepted = report.get("spans_accepted", 0)
        cpu_load_end = cpu_seconds(serve.pid)
        queue_bytes = sum(f.stat().st_size for f in Path(work, "data", "queue").rglob("*")
                          if f.is_file())
        if load_done is not None:
            load_done.wait()
        # The load ended when loadgen stopped sending (its --verify waits after that).
        load_end = t0 + report.get("elapsed_s", time.time() - t0)
        caught_up_s = float("nan")
        if opensearch is not None:
            # Until the OpenSearch sink holds nothing, has nothing queued and has written
            # every accepted span (409s of replays count as written).
            deadline = time.time() + args.opensearch_catch_up_s
            while time.time() < deadline:
                done = [x for x in sink_samples
                        if x[0] >= load_end and x[1] == 0 and x[2] == 0 and x[3] >= accepted]
                if done:
                    caught_up_s = max(0.0, done[0][0] - load_end)
                    break
                time.sleep(0.25)
        watch_stop.set()
        if window is not None:
            if opensearch is not None:
                window.set()
            else:
                window.wait(timeout=args.opensearch_catch_up_s + 600)
        cpu1 = cpu_seconds(serve.pid)
        kept_share = float("nan")
        if extra and "sampling" in extra:
            with urllib.request.urlopen(f"http://127.0.0.1:{query}/api/spanhouse/sampling",
                                        timeout=30) as resp:
                kept_share = json.load(resp)["data"]["keptShare"] or float("nan")
        os_cpu1 = opensearch.cpu_seconds() if opensearch else 0.0
        wall = time.time() - t0
        return {
            "sink": sink + ("+query" if with_query else "") + ("/grpc" if protocol == "grpc" else "")
                    + label,
            "query_seconds": [round(x, 2) for x in query_timings],
            "query_errors": query_errors,
            "loadgen_exit": lg.returncode,
            "report": report,
            "cpu_s": cpu1 - cpu0,
            "wall_s": wall,
            "cpu_s_per_m": (cpu1 - cpu0) / accepted * 1e6 if accepted else float("nan"),
            # Children's CPU is counted per process only when one run goes at a time.
            "loadgen_cpu_s_per_m": (loadgen_cpu / accepted * 1e6 if accepted and alone
                                    else float("nan")),
            "peak_rss_mib": status_kib(serve.pid, "VmHWM") // 1024,
            "sampling_kept_share": kept_share,
            "rss_series_mib": rss_series,
            "tail_series": tail_series,
            "opensearch": None if opensearch is None else {
                "caught_up_s": caught_up_s,
                # serve's CPU from the load's end until the OpenSearch sink caught up
                "catch_up_cpu_s": cpu1 - cpu_load_end,
                "queue_bytes_at_load_end": queue_bytes,
                "max_lag_s": max((x[1] for x in sink_samples), default=0) / 1000,
                "written": sink_samples[-1][3] if sink_samples else 0,
                "cpu_s": os_cpu1 - os_cpu0,
                "cpu_s_per_m": ((os_cpu1 - os_cpu0) / accepted * 1e6 if accepted
                                else float("nan")),
                "wall_s": wall,
            },
        }
    finally:
        if window is not None and opensearch is not None:
            window.set()  # also when this side failed
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=120)
            except subprocess.TimeoutExpired:
                serve.kill()
        log.close()
        if args.keep:
            kept = os.path.join(args.keep, os.path.basename(work))
            shutil.move(work, kept)
            print(f"kept {kept}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def run_dual(args, protocol: str) -> list[dict]:
    """Dual-write and ClickHouse alone, at the same time, each with its own loadgen."""
    node = OpenSearchNode(args)
    try:
        # The node's CPU while nothing is sent to it, to read its figure against.
        idle0, t = node.cpu_seconds(), time.time()
        time.sleep(5)
        idle = (node.cpu_seconds() - idle0) / (time.time() - t)
        window = threading.Event()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            dual = pool.submit(run, args, "chdb", False, protocol, None, "+opensearch", False,
                               node, True, window)
            alone = pool.submit(run, args, "chdb", False, protocol, None, " alone", False,
                                None, True, window)
            pair = [dual.result(), alone.result()]
        pair[0]["opensearch"].update(url=node.url, version=node.version, idle_cpu_per_s=idle,
                                     started=node.server is not None)
        return pair
    finally:
        node.close()


def run_catchup(args, protocol: str) -> list[dict]:
    """An OpenSearch outage during dual-write, two builds side by side (--bin and the
    --side-by-side BIN), each with its own loadgen and index prefix: the node is stopped
    (SIGSTOP) for the whole load, so each OpenSearch sink falls behind and reads its
    backlog back from the durable queue once the node is resumed (SIGCONT) after both
    loads; serve's CPU from the load's end until its sink caught up, per accepted span."""
    if not args.side_by_side:
        raise SystemExit("--runs catchup needs --side-by-side BIN (the build to compare)")
    node = OpenSearchNode(args)
    if not node.pid:
        raise SystemExit("--runs catchup needs the node's pid (started here, or --opensearch-pid)")
    resumed = threading.Barrier(3)
    try:
        os.kill(node.pid, signal.SIGSTOP)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(run, args, "chdb", False, protocol, b, f" {tag}", False, node,
                                True, None,
                                {"opensearch": {"index_prefix": f"{node.prefix}-{tag}"}}, None,
                                resumed)
                    for b, tag in ((args.bin, "a"), (args.side_by_side[0], "b"))]
            resumed.wait()
            os.kill(node.pid, signal.SIGCONT)
            pair = [r.result() for r in runs]
        return pair
    finally:
        os.kill(node.pid, signal.SIGCONT)
        node.prefix += "-*"  # both sides' indices and templates
        node.close()


def print_catchup(pair: list[dict]) -> None:
    a, b = pair
    per_m = [x["opensearch"]["catch_up_cpu_s"] / x["report"]["spans_accepted"] * 1e6
             for x in pair]
    print(f"\nOpenSearch outage for the whole load, then resumed, two builds side by side "
          f"({a['report'].get('spans_per_s', 0):.0f} vs {b['report'].get('spans_per_s', 0):.0f} "
          f"spans/s accepted):")
    for x, m in zip(pair, per_m):
        o = x["opensearch"]
        caught = ("not within the wait" if o["caught_up_s"] != o["caught_up_s"]
                  else f"{o['caught_up_s']:.1f} s")
        print(f"  {x['sink']}: catch-up {caught} after the load, serve CPU meanwhile "
              f"{o['catch_up_cpu_s']:.1f} s = {m:.2f} CPU-s/M spans; whole run "
              f"{x['cpu_s_per_m']:.2f} CPU-s/M; durable queue at the load's end "
              f"{o['queue_bytes_at_load_end'] / x['report']['spans_accepted']:.0f} bytes/span")
    print(f"  catch-up CPU per span, b / a: {per_m[1] / per_m[0]:.3f}")


def run_sampling(args, protocol: str) -> list[dict]:
    """Head sampling at 10% and sampling off, at the same time, each with its own loadgen."""
    head = {"sampling": {"head.probability": "0.1"}}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sampled = pool.submit(run, args, "chdb", False, protocol, None, " head 10%", False,
                              None, False, None, head)
        off = pool.submit(run, args, "chdb", False, protocol, None, " off", False)
        pair = [sampled.result(), off.result()]
    return pair


def run_tail(args, protocol: str) -> list[dict]:
    """Tail sampling and sampling off, at the same time, each with its own loadgen."""
    tail = {"sampling": {"tail.policies": f'"{TAIL_POLICIES}"', "tail.decision_wait_ms": "10000"}}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        sampled = pool.submit(run, args, "chdb", False, protocol, None, " tail", False,
                              None, False, None, tail, MARKED_TRACES)
        off = pool.submit(run, args, "chdb", False, protocol, None, " off", False,
                          None, False, None, None, MARKED_TRACES)
        pair = [sampled.result(), off.result()]
    return pair


def run_recent(args, protocol: str) -> list[dict]:
    """The recent-traces index (or its disk tier) on, the default, and off, at the same time,
    one binary."""
    off = ({"query": {"recent_disk_bytes": "0"}} if args.recent_off == "disk"
           else {"query": {"recent_max_bytes": "0"}})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        on = {"query": {"recent_disk_bytes": args.recent_disk_bytes}} \
            if args.recent_disk_bytes else None
        on_run = pool.submit(run, args, "chdb", False, protocol, None, " recent on", False,
                             None, False, None, on)
        off_run = pool.submit(run, args, "chdb", False, protocol, None, " recent off", False,
                              None, False, None, off)
        pair = [on_run.result(), off_run.result()]
    pair[0]["recent_off"] = args.recent_off
    return pair


def run_copy(args, protocol: str) -> list[dict]:
    """The trace copy (storage.trace_copy_s) on and off, the default, at the same time, one
    binary."""
    on = {"storage": {"trace_copy_s": "86400"}}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        on_run = pool.submit(run, args, "chdb", False, protocol, None, " copy on", False,
                             None, False, None, on)
        off_run = pool.submit(run, args, "chdb", False, protocol, None, " copy off", False)
        return [on_run.result(), off_run.result()]


def print_copy(pair: list[dict]) -> None:
    on, off = pair
    print(f"\ntrace copy on vs off, side by side ({on['report'].get('spans_per_s', 0):.0f}"
          f" vs {off['report'].get('spans_per_s', 0):.0f} spans/s): CPU-s per million accepted "
          f"spans: on {on['cpu_s_per_m']:.2f}, off {off['cpu_s_per_m']:.2f}, ratio on / off "
          f"{on['cpu_s_per_m'] / off['cpu_s_per_m']:.3f}; peak RSS {on['peak_rss_mib']} vs "
          f"{off['peak_rss_mib']} MiB")


def print_recent(pair: list[dict]) -> None:
    on, off = pair
    what = "recent-traces index's disk tier" if on.get("recent_off") == "disk" else \
        "recent-traces index"
    print(f"\n{what} on vs off, side by side ({on['report'].get('spans_per_s', 0):.0f}"
          f" vs {off['report'].get('spans_per_s', 0):.0f} spans/s): CPU-s per million accepted "
          f"spans: on {on['cpu_s_per_m']:.2f}, off {off['cpu_s_per_m']:.2f}, ratio on / off "
          f"{on['cpu_s_per_m'] / off['cpu_s_per_m']:.3f}; peak RSS {on['peak_rss_mib']} vs "
          f"{off['peak_rss_mib']} MiB")


def print_tail(pair: list[dict]) -> None:
    sampled, off = pair
    kept = sampled.get("sampling_kept_share", float("nan"))
    series = sampled.get("tail_series") or [{}]
    peak = max(series, key=lambda m: m.get("spanhouse_sampling_tail_open_traces", 0))
    open_traces = peak.get("spanhouse_sampling_tail_open_traces", 0)
    known = open_traces + peak.get("spanhouse_sampling_tail_decided_traces", 0)
    counted = peak.get("spanhouse_sampling_tail_memory_bytes", 0)
    print(f"\ntail sampling ({TAIL_POLICIES}; 10 s window) vs sampling off, side by side, each at "
          f"its own loadgen's rate ({sampled['report'].get('spans_per_s', 0):.0f} vs "
          f"{off['report'].get('spans_per_s', 0):.0f} spans/s, 1% error and 1% slow traces): "
          f"CPU-s per million accepted spans: tail {sampled['cpu_s_per_m']:.2f}, off "
          f"{off['cpu_s_per_m']:.2f}, ratio tail / off "
          f"{sampled['cpu_s_per_m'] / off['cpu_s_per_m']:.3f}; traces kept {kept:.1%}; peak RSS "
          f"tail {sampled['peak_rss_mib']} MiB vs off {off['peak_rss_mib']} MiB; at the most "
          f"open traces seen: {open_traces:.0f} open, {known:.0f} known, counted "
          f"{counted / max(known, 1) * 1000 / 1024:.0f} KiB per 1k traces, "
          f"{peak.get('spanhouse_sampling_tail_held_spans', 0):.0f} spans held")


def print_sampling(pair: list[dict]) -> None:
    sampled, off = pair
    kept = sampled.get("sampling_kept_share", float("nan"))
    print(f"\nhead sampling at 10% vs sampling off, side by side, each at its own loadgen's rate "
          f"({sampled['report'].get('spans_per_s', 0):.0f} vs "
          f"{off['report'].get('spans_per_s', 0):.0f} spans/s): CPU-s per million accepted "
          f"spans: sampled {sampled['cpu_s_per_m']:.2f}, off {off['cpu_s_per_m']:.2f}, ratio "
          f"sampled / off {sampled['cpu_s_per_m'] / off['cpu_s_per_m']:.3f}; traces kept "
          f"{kept:.1%}")


def print_dual(pair: list[dict]) -> None:
    dual, alone = pair
    o = dual["opensearch"]
    accepted = dual["report"].get("spans_accepted", 0)
    print(f"\ndual-write vs ClickHouse alone, side by side, each at its own loadgen's rate "
          f"({dual['report'].get('spans_per_s', 0):.0f} vs "
          f"{alone['report'].get('spans_per_s', 0):.0f} spans/s accepted); OpenSearch "
          f"{o['version']} at {o['url']}"
          f"{' (started from tests/opensearch)' if o['started'] else ''}:")
    print(f"  serve CPU-s/M spans (both from the load's start until the OpenSearch sink caught "
          f"up): dual-write {dual['cpu_s_per_m']:.2f}, ClickHouse alone "
          f"{alone['cpu_s_per_m']:.2f}: "
          f"ratio dual / alone {dual['cpu_s_per_m'] / alone['cpu_s_per_m']:.3f}")
    print(f"  OpenSearch's own CPU: {o['cpu_s_per_m']:.2f} CPU-s/M spans ({o['cpu_s']:.1f} CPU-s "
          f"over {o['wall_s']:.0f} s; idle it uses {o['idle_cpu_per_s']:.3f} CPU-s/s)")
    caught = ("not within the wait" if o["caught_up_s"] != o["caught_up_s"]
              else f"{o['caught_up_s']:.1f} s")
    print(f"  OpenSearch sink: lag back to 0 (nothing pending, {o['written']:.0f} of {accepted} "
          f"accepted spans written) {caught} after the load; the most lag seen "
          f"{o['max_lag_s']:.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                  "spanhouse"))
    ap.add_argument("--loadgen", default=None, metavar="BIN",
                    help="the spanhouse binary whose loadgen sends (default: --bin), e.g. to "
                         "measure an older server with this loadgen")
    ap.add_argument("--duration", type=int, default=60)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--writer-threads", type=int, default=1)
    ap.add_argument("--rate", type=int, default=0, help="spans/s, 0 = flat out")
    ap.add_argument("--corpus", default="replay", choices=["replay", "fresh"],
                    help="loadgen's corpus (fresh: the values real traffic rarely repeats are "
                         "new in every request)")
    ap.add_argument("--writer", action="append", default=[], metavar="KEY=VALUE",
                    help="extra writer setting for every run, e.g. max_rows=400000 (repeatable)")
    ap.add_argument("--durable", action="append", default=[], metavar="KEY=VALUE",
                    help="durable queue setting for every run, e.g. enabled=false (repeatable)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="any configuration key for every run, e.g. "
                         "storage.zstd_min_part_bytes=0 (repeatable)")
    ap.add_argument("--keep", default="", metavar="DIR",
                    help="move each run's work directory (config, serve.log, data) into DIR "
                    "instead of removing it, to inspect its store")
    ap.add_argument("--side-by-side", action="append", default=[], metavar="BIN",
                    help="also run this server binary (repeatable) at the same time as --bin, "
                    "each with its own loadgen at --rate (required): both see the same machine "
                    "for the whole run, so their CPU per span compares even when the machine's "
                    "speed drifts between runs; rows are marked #0 (--bin), #1, ...")
    ap.add_argument("--runs", default="chdb,chdb+query,null",
                    help="comma-separated subset of chdb, chdb+query, null, sampling (head "
                         "sampling at 10%% against off, side by side), tail (tail sampling "
                         "against off, side by side), recent (the recent-traces index on against off, "
                         "side by side), copy (the trace copy on against off, side by side), dual (dual-write to "
                         "OpenSearch and ClickHouse alone, side by side: needs --rate)")
    ap.add_argument("--recent-off", default="memory", choices=("memory", "disk"),
                    help="recent: what the second server turns off, the whole index (memory) "
                         "or its disk tier (disk)")
    ap.add_argument("--recent-disk-bytes", default="", metavar="SIZE",
                    help="recent: the first server's query.recent_disk_bytes (default: the "
                         "default, 2GiB)")
    ap.add_argument("--opensearch-url", default="", metavar="URL",
                    help="dual: the OpenSearch node to dual-write to (default: start one from "
                         "tests/opensearch's launcher)")
    ap.add_argument("--opensearch-pid", type=int, default=0, metavar="PID",
                    help="dual with --opensearch-url: the node's process, for its CPU")
    ap.add_argument("--opensearch-catch-up-s", type=float, default=900,
                    help="dual: how long to wait after the load for the OpenSearch sink to "
                         "catch up")
    ap.add_argument("--protocol", default="http",
                    help="http (OTLP/HTTP), grpc (OTLP/gRPC) or both, comma-separated: each run "
                         "once per protocol, side by side (rows chdb and chdb/grpc)")
    args = ap.parse_args()

    wanted = args.runs.split(",")
    unknown = set(wanted) - {"chdb", "chdb+query", "null", "dual", "sampling", "tail", "recent",
                             "copy", "catchup"}
    if unknown:
        ap.error(f"unknown run(s): {', '.join(sorted(unknown))}")
    protocols = args.protocol.split(",")
    if set(protocols) - {"http", "grpc"}:
        ap.error(f"unknown protocol(s) in {args.protocol!r}")
    if args.side_by_side and not args.rate:
        ap.error("--side-by-side needs --rate (each server gets its own loadgen at that rate)")
    if {"sampling", "tail", "recent", "copy"} & set(wanted) and (not args.rate or args.side_by_side):
        ap.error("--runs sampling, tail, recent and copy need --rate (each server gets its own loadgen at that "
                 "rate) and compare --bin with itself (no --side-by-side)")
    if "dual" in wanted and (not args.rate or args.side_by_side):
        ap.error("--runs dual needs --rate (each server gets its own loadgen at that rate) and "
                 "compares --bin with itself (no --side-by-side)")
    if "catchup" in wanted and (not args.rate or len(args.side_by_side) != 1):
        ap.error("--runs catchup needs --rate and one --side-by-side BIN (the build to compare)")
    servers = [args.bin] + args.side_by_side
    results = []
    duals = []
    catchups = []
    samplings = []
    tails = []
    recents = []
    copies = []
    for name in wanted:
        for protocol in protocols:
            if name == "sampling":
                samplings.append(run_sampling(args, protocol))
                results.extend(samplings[-1])
                continue
            if name == "tail":
                tails.append(run_tail(args, protocol))
                results.extend(tails[-1])
                continue
            if name == "recent":
                recents.append(run_recent(args, protocol))
                results.extend(recents[-1])
                continue
            if name == "copy":
                copies.append(run_copy(args, protocol))
                results.extend(copies[-1])
                continue
            if name == "dual":
                duals.append(run_dual(args, protocol))
                results.extend(duals[-1])
                continue
            if name == "catchup":
                catchups.append(run_catchup(args, protocol))
                results.extend(catchups[-1])
                continue
            if len(servers) == 1:
                results.append(run(args, name.split("+")[0], with_query=name.endswith("+query"),
                                   protocol=protocol))
                continue
            with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
                futures = [pool.submit(run, args, name.split("+")[0], name.endswith("+query"),
                                       protocol, b, f"#{i}", False)
                           for i, b in enumerate(servers)]
                results.extend(f.result() for f in futures)
            for i, b in enumerate(servers):
                print(f"#{i}: {b}", file=sys.stderr)
    # spans/s counts what the server accepted while loadgen sent; stored/s
    # also waits until every accepted span is queryable (the verify's wait:
    # what was accepted into the durable queue's backlog is stored after).
    print(f"\n{'sink':<15} {'spans/s':>10} {'stored/s':>9} {'CPU-s/M spans':>14} "
          f"{'loadgen CPU-s/M':>16} "
          f"{'peak RSS MiB':>13} {'429s':>6} {'p50 ms':>7} {'p99 ms':>7}  stored==accepted")
    for r in results:
        rep = r["report"]
        verify = rep.get("verify")
        verified = None if verify is None else (
            f"{verify['stored']} == {rep['spans_accepted']}: {'yes' if verify['ok'] else 'NO'}")
        stored_rate = "n/a" if verify is None else f"{stored_per_s(rep):.0f}"
        print(f"{r['sink']:<15} {rep.get('spans_per_s', 0):>10.0f} {stored_rate:>9} "
              f"{r['cpu_s_per_m']:>14.2f} "
              f"{r['loadgen_cpu_s_per_m']:>16.2f} {r['peak_rss_mib']:>13} {rep.get('throttled', 0):>6} "
              f"{rep.get('latency_p50_ms', 0):>7.1f} {rep.get('latency_p99_ms', 0):>7.1f}  "
              f"{'n/a' if verified is None else verified}")
    by_name = {r["sink"]: r for r in results}
    chdb, chdb_q, null = (by_name.get(n) for n in ("chdb", "chdb+query", "null"))
    idle = chdb["report"].get("spans_per_s", 0) if chdb else 0
    busy = chdb_q["report"].get("spans_per_s", 0) if chdb_q else 0
    if idle and chdb_q:
        # Accepted spans/s can stay level while a backlog builds in the durable queue:
        # stored/s (until every accepted span is queryable) is the ratio that counts.
        stored_idle, stored_busy = stored_per_s(chdb["report"]), stored_per_s(chdb_q["report"])
        stored_ratio = f"{stored_busy / stored_idle:.0%}" if stored_idle and stored_busy else "n/a"
        print(f"\ningest with a full-scan query every 10 s: {stored_ratio} of idle throughput "
              f"stored, {busy / idle:.0%} accepted; query seconds {chdb_q['query_seconds']}, "
              f"query errors {len(chdb_q['query_errors'])}, "
              f"loadgen rejected requests {chdb_q['report'].get('rejected_requests', 0)}")
    if null and chdb and null["cpu_s_per_m"] and chdb["cpu_s_per_m"]:
        share = 1 - null['cpu_s_per_m'] / chdb['cpu_s_per_m']
        print(f"\nsink share of CPU (encoding and store): {share:.0%} "
              f"(chdb {chdb['cpu_s_per_m']:.2f} vs null {null['cpu_s_per_m']:.2f} CPU-s/M spans)")
    for pair in duals:
        print_dual(pair)
    for pair in catchups:
        print_catchup(pair)
    for pair in samplings:
        print_sampling(pair)
    for pair in tails:
        print_tail(pair)
    for pair in recents:
        print_recent(pair)
    for pair in copies:
        print_copy(pair)
    for r in results:
        print(f"RSS every 5 s ({r['sink']}), MiB: {r['rss_series_mib']}")
    print("\nloadgen reports:")
    for r in results:
        print(r["sink"], json.dumps(r["report"]))
    ok = all(r["loadgen_exit"] == 0 for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
