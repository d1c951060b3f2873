#!/usr/bin/env python3
"""Query API benchmark (issue 6's targets): latency of the query API over HTTP on a filled store.

1. `spanhouse bench query-fill` writes --spans loadgen spans (fixed seed) spread over the
   last --days days into a data directory, as `spanhouse serve` writes them (skipped with
   --reuse DIR).
2. `spanhouse serve` opens that directory; after --settle seconds (background merges),
   each query runs --repeat times, one at a time, timed from request to full answer:
   - search: /api/traces?service=S&tag=...&limit=20 over one hour at a random point of the
     range (a span attribute on api-gateway, a resource attribute (pod) on cart, a user field
     app.channel on frontend), each repetition another hour;
   - trace by id: /api/traces/{id}, --lookups ids (default --repeat) taken at random from
     the searches' answers;
   - 7-day RED for one service: /api/metrics/{calls,errors,latencies} for checkout over
     7 days (step and ratePer 1 h) and /api/spanhouse/services/summary over 7 days.
   Prints p50, p99 and max per query (ms), and one JSON line.

   With --bin twice (an old and a new build), the two take turns on the same store and the
   same queries, --rounds times each, and the ratios new/old are printed beside them. With
   --reuse given once per --bin, each binary serves its own store (the same spans in the
   two schemas: one store copied and upgraded by the new build).

Usage: bench/query_api.py [--bin build/spanhouse [--bin OTHER]] [--rounds 1] [--spans 1000000]
                          [--days 7] [--repeat 200] [--lookups N] [--settle 30] [--reuse DIR]
                          [--keep]
Only loopback addresses are used; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from ingest_e2e import free_port, wait_ready


def timed_get(url: str) -> tuple[float, dict]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
    return (time.perf_counter() - t) * 1000, json.loads(body)


def percentiles(ms: list[float]) -> dict:
    s = sorted(ms)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"n": len(s), "p50_ms": round(pick(0.5), 2), "p99_ms": round(pick(0.99), 2),
            "max_ms": round(s[-1], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", action="append",
                    help="the spanhouse binary (default build/spanhouse); twice: both side by "
                         "side, taking turns on the same queries, with the ratios")
    ap.add_argument("--rounds", type=int, default=1, help="turns each binary takes")
    ap.add_argument("--spans", type=int, default=1_000_000)
    ap.add_argument("--days", type=float, default=7)
    ap.add_argument("--repeat", type=int, default=200,
                    help="times each search and each RED query (a fifth, at least 20) runs")
    ap.add_argument("--lookups", type=int, default=0,
                    help="trace-by-id lookups per round, of ids the searches found (default: "
                         "--repeat); more make the p99 rest on more than a few samples")
    ap.add_argument("--settle", type=float, default=30)
    ap.add_argument("--reuse", action="append",
                    help="a data directory filled before (skips the fill); once per --bin: "
                         "each binary's own")
    ap.add_argument("--keep", action="store_true", help="keep the data directory")
    args = ap.parse_args()
    bins = args.bin or ["build/spanhouse"]

    if args.reuse and len(args.reuse) not in (1, len(bins)):
        ap.error("--reuse once, or once per --bin")
    work = args.reuse[0] if args.reuse else tempfile.mkdtemp(prefix="spanhouse-query-bench-")
    store = {b: (args.reuse[i] if args.reuse and len(args.reuse) > 1 else work)
             for i, b in enumerate(bins)}
    fill = None
    if not args.reuse:
        t = time.time()
        out = subprocess.run([bins[0], "bench", "query-fill", "--data-dir", work, "--spans",
                              str(args.spans), "--days", str(args.days)],
                             stdout=subprocess.PIPE, check=True, text=True)
        fill = json.loads(out.stdout.strip().splitlines()[-1])
        fill["wall_s"] = round(time.time() - t, 1)
        print(f"fill: {fill}", file=sys.stderr)
    # name -> binary -> every timing (ms) of every round; the binaries take
    # turns, a round each, on the same queries (the same seed in a round).
    timings: dict[str, dict[str, list[float]]] = {}
    for rnd in range(args.rounds):
        for b in bins:
            for name, ms in run_suite(b, store[b], args, seed=7 + rnd, settle=(
                    args.settle if rnd == 0 and b == bins[0] else 5)).items():
                timings.setdefault(name, {}).setdefault(b, []).extend(ms)
    if not args.keep and not args.reuse:
        shutil.rmtree(work, ignore_errors=True)
    results = {name: {b: percentiles(ms) for b, ms in by_bin.items()}
               for name, by_bin in timings.items()}
    width = max(len(k) for k in results)
    head = f"{'query':<{width}}  {'n':>5}"
    for i, _ in enumerate(bins):
        head += f" {'p50 ms':>9} {'p99 ms':>9}" if len(bins) == 1 else f" {f'p50 #{i}':>9} {f'p99 #{i}':>9}"
    if len(bins) > 1:
        head += f" {'p50 #1/#0':>10} {'p99 #1/#0':>10}"
    print(head if len(bins) > 1 else head + f" {'max ms':>9}")
    for k, by_bin in results.items():
        line = f"{k:<{width}}  {by_bin[bins[0]]['n']:>5}"
        for b in bins:
            line += f" {by_bin[b]['p50_ms']:>9} {by_bin[b]['p99_ms']:>9}"
        if len(bins) > 1:
            a, z = by_bin[bins[0]], by_bin[bins[1]]
            line += f" {z['p50_ms'] / a['p50_ms']:>10.2f} {z['p99_ms'] / a['p99_ms']:>10.2f}"
        else:
            line += f" {by_bin[bins[0]]['max_ms']:>9}"
        print(line)
    if len(bins) > 1:
        for i, b in enumerate(bins):
            print(f"#{i}: {b}" + (f" on {store[b]}" if store[b] != work else ""))
    print(json.dumps({"spans": None if args.reuse else args.spans, "days": args.days,
                      "fill": fill, "bins": bins, "rounds": args.rounds, "results": results}))
    return 0


def run_suite(binary: str, work: str, args, seed: int, settle: float) -> dict[str, list[float]]:
    """Serves `work` with `binary` and times every query of the suite (ms), then stops it."""
    otlp, query = free_port(), free_port()
    log = open(os.path.join(work, "serve.log"), "a")
    # A store filled days before (--reuse) is kept whole: with the default
    # retention (7 days) its oldest day would be dropped at this start.
    config = os.path.join(work, "query-bench.yaml")
    with open(config, "w") as f:
        f.write("storage:\n  retention_s: 315360000\nmetrics:\n  retention_days: 3650\n")
    serve = subprocess.Popen(
        [binary, "serve", "--config", config, "--data-dir", work,
         "--otlp-http-listen", f"127.0.0.1:{otlp}",
         "--query-listen", f"127.0.0.1:{query}", "--otlp-grpc-listen", "",
         "--zipkin-listen", "", "--log-level", "warn"],
        stdout=log, stderr=log)
    base = f"http://127.0.0.1:{query}"
    results: dict[str, list[float]] = {}
    try:
        wait_ready(base, serve, deadline_s=600)
        time.sleep(settle)
        rng = random.Random(seed)
        # The spans lie in the --days before the newest trace (now, unless the store
        # was filled earlier: --reuse); searches start 1 h inside either end.
        _, newest = timed_get(f"{base}/api/traces?service=api-gateway&limit=1&lookback=168h")
        now_ms = max(s["startTime"] for t in newest["data"] for s in t["spans"]) // 1000
        lo_ms = now_ms - int(args.days * 86400_000) + 3600_000
        hi_ms = now_ms - 3600_000
        _, pods = timed_get(f"{base}/api/traces?service=cart&limit=20&end={now_ms * 1000}"
                            f"&lookback=2h")
        pod = next(t["value"] for trace in pods["data"] for p in trace["processes"].values()
                   if p["serviceName"] == "cart" for t in p["tags"] if t["key"] == "k8s.pod.name")
        searches = {
            "search api-gateway + span tag http.request.method=POST (1 h)":
                ("api-gateway", "http.request.method:POST"),
            "search cart + resource tag k8s.pod.name (1 h)": ("cart", f"k8s.pod.name:{pod}"),
            "search frontend + user field app.channel=android (1 h)":
                ("frontend", "user_fields.app.channel:android"),
        }
        ids = []
        for name, (service, tag) in searches.items():
            times = []
            traces = 0
            for _ in range(args.repeat):
                start_ms = rng.randint(lo_ms, hi_ms)
                q = urllib.parse.urlencode({"service": service, "tag": tag, "limit": 20,
                                            "start": start_ms * 1000,
                                            "end": (start_ms + 3600_000) * 1000})
                ms, doc = timed_get(f"{base}/api/traces?{q}")
                ids += [t["traceID"] for t in doc["data"]]
                traces += len(doc["data"])
                times.append(ms)
            results[name] = times
        rng.shuffle(ids)
        results["trace by id"] = [timed_get(f"{base}/api/traces/{i}")[0]
                                  for i in ids[:args.lookups or args.repeat]]
        week = {"service": "checkout", "endTs": now_ms, "lookback": 7 * 86400_000,
                "step": 3600_000, "ratePer": 3600_000}
        for metric, extra in (("calls", {}), ("errors", {}), ("latencies", {"quantile": 0.99})):
            q = urllib.parse.urlencode({**week, **extra})
            results[f"7-day RED checkout: /api/metrics/{metric}"] = [
                timed_get(f"{base}/api/metrics/{metric}?{q}")[0]
                for _ in range(max(20, args.repeat // 5))]
        q = urllib.parse.urlencode({"endTs": now_ms, "lookback": 7 * 86400_000})
        results["7-day summary, every service"] = [
            timed_get(f"{base}/api/spanhouse/services/summary?{q}")[0]
            for _ in range(max(20, args.repeat // 5))]
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=300)
            except subprocess.TimeoutExpired:
                serve.kill()
        log.close()
    return results


if __name__ == "__main__":
    sys.exit(main())
