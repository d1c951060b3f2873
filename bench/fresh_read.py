#!/usr/bin/env python3
"""How soon a trace is readable after its OTLP answer, and what that first lookup costs.

Starts `spanhouse serve` (one per --bin, side by side on the same machine, each on a fresh data
directory and its default configuration), then sends --traces traces one at a time to each in
turn: a request of --spans spans (OTLP/JSON, fresh random ids, a root and its children, times of
now). The moment the 200 arrives, GET /api/traces/{id} is asked in a loop (no pause) until the
answer holds every span, for at most --give-up seconds.

Prints per binary: the share of traces whole at the first lookup, time from the answer to the
whole trace (p50, p99, max), the first lookup's own latency (p50, p99), and the ratios of the
last --bin to the first. Then --lookups more lookups of those traces (random order, all stored or
held by then) on each: p50 and p99.

Usage: bench/fresh_read.py [--bin build/spanhouse [--bin OLD]] [--traces 200] [--spans 8]
Only loopback addresses are used; the servers are stopped at the end.
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
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ingest_e2e import free_port, wait_ready  # noqa: E402


def request_body(rng: random.Random, spans: int) -> tuple[str, bytes]:
    trace = rng.randbytes(16).hex()
    ids = [rng.randbytes(8).hex() for _ in range(spans)]
    now = time.time_ns()
    out = []
    for i, span in enumerate(ids):
        out.append({"traceId": trace, "spanId": span,
                    "parentSpanId": "" if i == 0 else ids[rng.randrange(i)],
                    "name": f"op-{i % 4}", "kind": 2 if i == 0 else 3,
                    "startTimeUnixNano": str(now + i * 1000),
                    "endTimeUnixNano": str(now + 5_000_000 - i * 1000),
                    "attributes": [{"key": "request.id",
                                    "value": {"stringValue": rng.randbytes(6).hex()}}]})
    body = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "fresh-bench"}}]},
        "scopeSpans": [{"scope": {"name": "bench"}, "spans": out}]}]}
    return trace, json.dumps(body).encode()


def spans_in(answer: bytes) -> int:
    data = json.loads(answer).get("data") or []
    return sum(len(t.get("spans") or []) for t in data)


def get(url: str) -> tuple[float, int, bytes]:
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        body, status = e.read(), e.code
    return (time.perf_counter() - t) * 1000, status, body


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


class Server:
    def __init__(self, binary: str, root: str, tag: str):
        self.binary = binary
        self.dir = os.path.join(root, tag)
        self.otlp = f"127.0.0.1:{free_port()}"
        self.query = f"127.0.0.1:{free_port()}"
        self.log = open(os.path.join(root, tag + ".log"), "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", self.dir, "--otlp-http-listen", self.otlp,
             "--query-listen", self.query, "--otlp-grpc-listen", f"127.0.0.1:{free_port()}",
             "--zipkin-listen", f"127.0.0.1:{free_port()}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_ready(f"http://{self.query}", self.proc)
        except BaseException:
            self.proc.kill()
            raise
        self.first_whole = 0
        self.to_whole_ms: list[float] = []
        self.first_lookup_ms: list[float] = []
        self.gave_up = 0
        self.lookup_ms: list[float] = []

    def send_and_follow(self, trace: str, body: bytes, spans: int, give_up_s: float) -> None:
        req = urllib.request.Request(f"http://{self.otlp}/v1/traces", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            r.read()
        answered = time.perf_counter()
        url = f"http://{self.query}/api/traces/{trace}"
        first = True
        while True:
            ms, status, answer = get(url)
            whole = status == 200 and spans_in(answer) == spans
            if first:
                self.first_lookup_ms.append(ms)
                self.first_whole += 1 if whole else 0
                first = False
            if whole:
                self.to_whole_ms.append((time.perf_counter() - answered) * 1000)
                return
            if time.perf_counter() - answered > give_up_s:
                self.gave_up += 1
                return

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)
        self.log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append", help="spanhouse binary (twice: side by side)")
    ap.add_argument("--traces", type=int, default=200)
    ap.add_argument("--spans", type=int, default=8)
    ap.add_argument("--lookups", type=int, default=400)
    ap.add_argument("--give-up", type=float, default=15.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    bins = args.bin or ["build/spanhouse"]
    root = tempfile.mkdtemp(prefix="fresh-read-")
    servers = []
    try:
        for i, b in enumerate(bins):
            servers.append(Server(b, root, f"bin{i}"))
        rng = random.Random(args.seed)
        traces = []
        for _ in range(args.traces):
            trace, body = request_body(rng, args.spans)
            traces.append(trace)
            for s in servers:
                s.send_and_follow(trace, body, args.spans, args.give_up)
        for i in range(args.lookups):
            trace = traces[rng.randrange(len(traces))]
            for s in servers:
                ms, status, _ = get(f"http://{s.query}/api/traces/{trace}")
                if status == 200:
                    s.lookup_ms.append(ms)
        rows = []
        for b, s in zip(bins, servers):
            row = {"bin": b, "traces": args.traces, "spans_per_trace": args.spans,
                   "whole_at_first_lookup": s.first_whole / args.traces,
                   "to_whole_p50_ms": pct(s.to_whole_ms, 50),
                   "to_whole_p99_ms": pct(s.to_whole_ms, 99),
                   "to_whole_max_ms": max(s.to_whole_ms, default=float("nan")),
                   "gave_up": s.gave_up,
                   "first_lookup_p50_ms": pct(s.first_lookup_ms, 50),
                   "first_lookup_p99_ms": pct(s.first_lookup_ms, 99),
                   "lookup_p50_ms": pct(s.lookup_ms, 50), "lookup_p99_ms": pct(s.lookup_ms, 99)}
            rows.append(row)
            print(f"{b}: whole at the first lookup {row['whole_at_first_lookup']:.1%}; "
                  f"answer -> whole p50 {row['to_whole_p50_ms']:.1f} ms, p99 "
                  f"{row['to_whole_p99_ms']:.1f} ms, max {row['to_whole_max_ms']:.1f} ms "
                  f"({s.gave_up} gave up); first lookup p50 {row['first_lookup_p50_ms']:.2f} ms "
                  f"p99 {row['first_lookup_p99_ms']:.2f} ms; later lookups p50 "
                  f"{row['lookup_p50_ms']:.2f} ms p99 {row['lookup_p99_ms']:.2f} ms")
        if len(rows) == 2:
            a, b = rows
            for key in ("to_whole_p50_ms", "to_whole_p99_ms", "first_lookup_p50_ms",
                        "lookup_p50_ms", "lookup_p99_ms"):
                print(f"  {key}: last / first = {b[key] / a[key]:.3f}")
        print(json.dumps(rows))
    finally:
        for s in servers:
            try:
                s.stop()
            except Exception as e:  # noqa: BLE001 (report and go on stopping the others)
                print(f"stopping {s.binary}: {e}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
