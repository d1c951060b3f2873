#!/usr/bin/env python3
"""Trace-by-id lookup latency, spanhouse against Jaeger v2 (v1.75.0, Badger store), on the
same traces in one run (issue 28's targets: a trace of the last 15 minutes by id, p50 <= 5 ms,
p99 <= 15 ms, and ahead of Jaeger Badger).

1. Starts `spanhouse serve` (fresh data directory, default configuration; one per --bin) and
   Jaeger (tests/e2e/jaeger_server.py: Badger under a temporary directory; the binary that
   scripts/setup.sh --tests builds, or $JAEGER_BIN), all on free loopback ports.
   Then waits --settle seconds, as a server that has been up a while: spanhouse answers a
   trace from its recent-traces index alone only when its root started after the index's
   horizon (here the process's start) plus the clock skew it allows a client (10 s).
2. One `spanhouse loadgen` (--rate spans/s for --duration s, --corpus, --seed) sends to a small
   forwarding proxy in this process, which posts every request, unchanged, to each store's
   OTLP/HTTP receiver (429/503 retried per store). loadgen draws fresh trace ids on every run,
   so two loadgens could not give the stores the same traces; the proxy does.
3. Waits until every spanhouse stores every accepted span (/api/spans/count of the loadgen
   run id), picks --lookups trace ids from spanhouse's searches (services in turn, time
   windows spread over the send), and waits until Jaeger answers each with as many spans.
   With --stored, every store is then restarted on its data, spanhouse without its
   recent-traces index (query.recent_max_bytes: 0), so each lookup reads what is stored
   (Badger from its files, spanhouse from ClickHouse) as for a trace minutes to days old.
   With --trace-copy, one spanhouse more (the first binary) keeps the trace copy
   (storage.trace_copy_s) from its first start.
4. Looks each id up on every store in turn, one request at a time (GET /api/traces/{id}, a new
   connection each, timed from request to full answer), the store that goes first rotating.
   Span counts that differ between the stores are reported (the bench goes on).

Prints p50, p99 and max (ms) per store, the ratios spanhouse/Jaeger, the spans per trace
looked up, each store's bytes on disk per span sent, and one JSON line. With --bin twice (new first, then OLD), both builds get the same
traces and lookups: three columns.

Usage: bench/lookup_vs_jaeger.py [--bin build/spanhouse [--bin OLD]] [--rate 20000]
                                 [--duration 30] [--lookups 200] [--corpus fresh] [--seed 1]
                                 [--settle 12] [--stored] [--trace-copy]
Needs `requests` and `pytest` (tests/e2e's modules): run it with .venv/bin/python.
Only loopback addresses are used; every process is stopped and the temporary directory
removed at the end, on errors too.
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
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from ingest_e2e import cpu_seconds, free_port, wait_ready  # noqa: E402
from jaeger_server import Jaeger, jaeger_missing  # noqa: E402
from otlp_fanout import Fanout  # noqa: E402


def get(url: str, timeout: float = 60) -> tuple[float, int, bytes]:
    t = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            body, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        body, status = e.read(), e.code
    return (time.perf_counter() - t) * 1000, status, body


def spans_in(status: int, body: bytes) -> int:
    """Spans of a /api/traces/{id} answer (0 for a 404 or an empty one)."""
    if status != 200:
        return 0
    return sum(len(t.get("spans") or []) for t in json.loads(body).get("data") or [])


def percentiles(ms: list[float]) -> dict:
    s = sorted(ms)
    if not s:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"n": len(s), "p50_ms": round(pick(0.5), 2), "p99_ms": round(pick(0.99), 2),
            "max_ms": round(s[-1], 2)}


class Spanhouse:
    def __init__(self, binary: str, root: Path, tag: str, config: str = ""):
        self.name = "spanhouse" if tag == "sh" else f"spanhouse {tag}"
        self.binary = binary
        self.root = root
        self.dir = root / tag
        self.config = config  # YAML of its own, at every start
        self.otlp = f"127.0.0.1:{free_port()}"
        self.query = f"http://127.0.0.1:{free_port()}"
        # Every listener on a free port of its own ("" keeps the default port, which a second
        # serve, or anything else, may hold).
        self.ports = ["--otlp-grpc-listen", f"127.0.0.1:{free_port()}",
                      "--zipkin-listen", f"127.0.0.1:{free_port()}"]
        self.log = open(root / f"{tag}.log", "ab")
        self.start(self.config_args(self.config))

    def config_args(self, text: str) -> list[str]:
        if not text:
            return []
        path = self.root / f"{self.dir.name}-{len(text)}.yaml"
        path.write_text(text)
        return ["--config", str(path)]

    def start(self, extra: list[str]) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--data-dir", str(self.dir), "--otlp-http-listen", self.otlp,
             "--query-listen", self.query.removeprefix("http://"), *self.ports,
             "--log-level", "warn", *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_ready(self.query, self.proc)
        except BaseException:
            self.proc.kill()
            self.proc.wait()
            self.log.close()
            raise

    def restart_without_recent(self) -> None:
        """Stopped and started again on its data with no recent-traces index: every lookup
        reads the store."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)
        self.start(self.config_args(self.config + "query:\n  recent_max_bytes: 0\n"))

    def disk_bytes(self) -> dict[str, int]:
        """Bytes on disk of its tables' active parts (/metrics), by table: parts a merge
        replaced, which the engine deletes minutes later, are not counted."""
        _, status, body = get(f"{self.query}/metrics")
        out: dict[str, int] = {}
        for line in body.decode().splitlines() if status == 200 else []:
            if line.startswith("spanhouse_storage_bytes{"):
                table = line.split('table="')[1].split('"')[0]
                out[table] = out.get(table, 0) + int(float(line.split()[-1]))
        return out

    @property
    def otlp_url(self) -> str:
        return f"http://{self.otlp}/v1/traces"

    def stored(self, run_id: str) -> int:
        _, status, body = get(f"{self.query}/api/spans/count?resource_attr=loadgen.run_id"
                              f"&value={run_id}")
        return json.loads(body).get("count", -1) if status == 200 else -1

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def dir_bytes(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_blocks * 512
        except OSError:
            pass
    return total


def pick_ids(sh: Spanhouse, t0_us: int, t1_us: int, n: int, rng: random.Random) -> list[str]:
    """n trace ids from spanhouse's searches: each service in turn, each over its own slice of
    the send (so the traces come from all along it, and in all sizes)."""
    _, _, body = get(f"{sh.query}/api/services")
    services = sorted(json.loads(body)["data"])
    windows = max(1, min(40, n // 5))
    per = max(1, -(-n // windows))
    span = (t1_us - t0_us) // windows
    ids: list[str] = []
    seen = set()
    for w in range(windows):
        q = urllib.parse.urlencode({"service": services[w % len(services)], "limit": per * 2,
                                    "start": t0_us + w * span, "end": t0_us + (w + 1) * span})
        _, status, body = get(f"{sh.query}/api/traces?{q}", timeout=120)
        got = [t["traceID"] for t in json.loads(body).get("data") or []] if status == 200 else []
        rng.shuffle(got)
        for i in got[:per]:
            if i not in seen:
                seen.add(i)
                ids.append(i)
    # Short sends leave some windows with few traces: top up from the whole send.
    for s in services:
        if len(ids) >= n:
            break
        q = urllib.parse.urlencode({"service": s, "limit": n, "start": t0_us, "end": t1_us})
        _, status, body = get(f"{sh.query}/api/traces?{q}", timeout=120)
        for t in (json.loads(body).get("data") or []) if status == 200 else []:
            if t["traceID"] not in seen and len(ids) < n:
                seen.add(t["traceID"])
                ids.append(t["traceID"])
    rng.shuffle(ids)
    return ids[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", action="append",
                    help="spanhouse binary (default build/spanhouse); twice: NEW then OLD, "
                         "side by side on the same traces")
    ap.add_argument("--rate", type=float, default=20000, help="spans/s sent")
    ap.add_argument("--duration", type=float, default=30, help="seconds of sending")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--corpus", default="fresh", choices=("fresh", "replay"))
    ap.add_argument("--seed", type=int, default=1, help="loadgen's corpus and the id picks")
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed lookups per store first (the first requests of a fresh "
                         "process pay for lazy set-up, which is not what is measured)")
    ap.add_argument("--settle", type=float, default=12,
                    help="seconds between the stores' start and the send (0: none)")
    ap.add_argument("--stored", action="store_true",
                    help="traces as stored: every store restarted before the lookups, "
                         "spanhouse without its recent-traces index (memory and disk)")
    ap.add_argument("--trace-copy", action="store_true",
                    help="one spanhouse more (the first --bin) with storage.trace_copy_s: 86400 "
                         "from its first start: lookups read the trace copy")
    ap.add_argument("--wait", type=float, default=300,
                    help="seconds to wait at most for the stores to hold every span")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # the report in order with the progress lines
    bins = args.bin or [str(ROOT / "build" / "spanhouse")]
    if len(bins) > 2:
        ap.error("--bin at most twice")
    if jaeger_missing():
        print(jaeger_missing(), file=sys.stderr)
        return 2

    root = Path(tempfile.mkdtemp(prefix="lookup-vs-jaeger-"))
    shs: list[Spanhouse] = []
    jaeger = None
    fan = None
    ok = False
    try:
        if args.trace_copy:
            shs.append(Spanhouse(bins[0], root, "copy", "storage:\n  trace_copy_s: 86400\n"))
        for i, b in enumerate(bins):
            shs.append(Spanhouse(b, root, "new" if i == 0 and len(bins) > 1 else
                                 ("old" if i else "sh")))
        jaeger = Jaeger(root, storage="badger")
        fan = Fanout([s.otlp_url for s in shs] + [f"{jaeger.otlp_http_url}/v1/traces"])

        # CPU of each process over the send, to tell which one held the rate back on a
        # small machine (this process is the proxy then).
        time.sleep(args.settle)
        pids = {s.name: s.proc.pid for s in shs} | {"jaeger badger": jaeger.proc.pid}
        cpu0 = {n: cpu_seconds(p) for n, p in pids.items()} | {"proxy": time.process_time()}
        t0_us = time.time_ns() // 1000
        lg = subprocess.run(
            [bins[0], "loadgen", "--endpoint", fan.url, "--rate", str(args.rate),
             "--duration", str(args.duration), "--connections", str(args.connections),
             "--corpus", args.corpus, "--seed", str(args.seed), "--json", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=args.duration + 600)
        if lg.returncode != 0:
            raise RuntimeError(f"loadgen exited with {lg.returncode}: {lg.stderr[-3000:]}")
        t1_us = time.time_ns() // 1000
        send_cpu = {n: round(cpu_seconds(p) - cpu0[n], 1) for n, p in pids.items()} | {
            "proxy": round(time.process_time() - cpu0["proxy"], 1)}
        report = json.loads(lg.stdout.strip().splitlines()[-1])
        run_id, accepted = report["run_id"], report["spans_accepted"]
        print(f"sent: {accepted} spans accepted ({report['rejected_spans']} rejected) in "
              f"{report['elapsed_s']:.1f} s ({report['spans_per_s']:.0f} spans/s, --rate "
              f"{args.rate:.0f}), run {run_id}; requests the "
              f"proxy failed per store: {list(fan.failed.values())}; CPU-s over the send: "
              f"{send_cpu}", file=sys.stderr)

        # Every spanhouse holds every accepted span before ids are picked and timed.
        deadline = time.time() + args.wait
        for s in shs:
            while (have := s.stored(run_id)) < accepted and time.time() < deadline:
                time.sleep(1)
            print(f"{s.name}: stores {have} of {accepted} spans", file=sys.stderr)

        rng = random.Random(args.seed)
        ids = pick_ids(shs[0], t0_us, t1_us, args.lookups + args.warmup, rng)
        warm, ids = ids[:args.warmup], ids[args.warmup:]
        # Jaeger's writes go through a batch processor and Badger: poll until each trace is
        # as whole there as in spanhouse (or --wait is out: then it is a mismatch below).
        want = {i: spans_in(*get(f"{shs[0].query}/api/traces/{i}")[1:]) for i in ids}
        missing = set(ids)
        while missing and time.time() < deadline:
            for i in list(missing):
                if spans_in(*get(f"{jaeger.query_url}/api/traces/{i}")[1:]) >= want[i]:
                    missing.discard(i)
            if missing:
                time.sleep(1)
        print(f"jaeger: {len(ids) - len(missing)} of {len(ids)} traces whole", file=sys.stderr)

        if args.stored:
            for s in shs:
                s.restart_without_recent()
            jaeger.restart()
            print("every store restarted; spanhouse without its recent-traces index",
                  file=sys.stderr)
        stores = [(s.name, s.query) for s in shs] + [("jaeger badger", jaeger.query_url)]
        for i in warm:
            for _, base in stores:
                get(f"{base}/api/traces/{i}")
        times: dict[str, list[float]] = {name: [] for name, _ in stores}
        counts: dict[str, list[int]] = {name: [] for name, _ in stores}
        mismatches = []
        for k, i in enumerate(ids):
            # The store that goes first rotates, so none always follows another's request.
            got = {}
            for name, base in stores[k % len(stores):] + stores[:k % len(stores)]:
                ms, status, body = get(f"{base}/api/traces/{i}")
                times[name].append(ms)
                got[name] = spans_in(status, body)
                counts[name].append(got[name])
            if len(set(got.values())) > 1:
                mismatches.append({"trace_id": i, **got})

        results = {name: percentiles(ms) for name, ms in times.items()}
        # Whether spanhouse answered from its recent-traces memory or from the store.
        recent = {}
        for s in shs:
            try:
                _, _, body = get(f"{s.query}/metrics")
                recent[s.name] = {
                    line.split()[0].removeprefix("spanhouse_recent_"): float(line.split()[1])
                    for line in body.decode().splitlines()
                    if line.startswith("spanhouse_recent_") and "{" not in line.split()[0]}
            except (OSError, ValueError, IndexError):
                recent[s.name] = None
        sizes = sorted(counts[stores[0][0]])
        j = results["jaeger badger"]
        print(f"trace by id{' (stored: every store restarted, no recent index)' if args.stored else ''}, "
              f"{len(ids)} traces of the last {(t1_us - t0_us) / 60e6:.1f} min "
              f"(spans per trace: min {sizes[0]}, median {sizes[len(sizes) // 2]}, "
              f"mean {sum(sizes) / len(sizes):.1f}, max {sizes[-1]}), "
              f"{accepted} spans sent to each")
        width = max(len(n) for n in results)
        print(f"{'store':<{width}} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
              f"{'p50/jaeger':>11} {'p99/jaeger':>11}")
        for name, r in results.items():
            print(f"{name:<{width}} {r['n']:>5} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                  f"{r['max_ms']:>8.2f} {r['p50_ms'] / j['p50_ms']:>11.2f} "
                  f"{r['p99_ms'] / j['p99_ms']:>11.2f}")
        if len(shs) > 1:
            a, b = results[shs[0].name], results[shs[1].name]
            print(f"{shs[0].name}/{shs[1].name}: p50 {a['p50_ms'] / b['p50_ms']:.2f}, p99 "
                  f"{a['p99_ms'] / b['p99_ms']:.2f}")
        # Bytes on disk per span accepted, after the lookups: spanhouse's active parts
        # (every table; the trace copy apart), Badger's directory.
        tables = {s.name: s.disk_bytes() for s in shs}
        disk = {n: sum(t.values()) for n, t in tables.items()} | {
            "jaeger badger": dir_bytes(jaeger.badger_dir)}
        print("bytes on disk per span: " + ", ".join(
            f"{n} {b / accepted:.1f}" + (f" (trace_copy {t['trace_copy'] / accepted:.1f})"
                                         if "trace_copy" in (t := tables.get(n, {})) else "")
            for n, b in disk.items()))
        print(f"span count mismatches: {len(mismatches)}"
              + (f" (first: {mismatches[:3]})" if mismatches else ""))
        for s in shs:
            print(f"{s.name}: {s.binary}; recent traces: {recent[s.name]}")
        print(json.dumps({
            "bins": bins, "stored": args.stored, "rate": args.rate, "duration_s": args.duration, "corpus": args.corpus,
            "seed": args.seed, "spans_accepted": accepted,
            "spans_per_s": report["spans_per_s"], "lookups": len(ids),
            "spans_per_trace": {"min": sizes[0], "median": sizes[len(sizes) // 2],
                                "mean": round(sum(sizes) / len(sizes), 1), "max": sizes[-1]},
            "results": results,
            "ratio_vs_jaeger": {n: {"p50": round(r["p50_ms"] / j["p50_ms"], 3),
                                    "p99": round(r["p99_ms"] / j["p99_ms"], 3)}
                                for n, r in results.items() if n != "jaeger badger"},
            "send_cpu_s": send_cpu, "recent": recent,
            "disk_bytes_per_span": {n: round(b / accepted, 1) for n, b in disk.items()},
            "proxy_failed": list(fan.failed.values()), "jaeger_incomplete": len(missing),
            "mismatches": len(mismatches)}))
        ok = True
    finally:
        if fan is not None:
            fan.stop()
        for s in shs:
            try:
                s.stop()
            except Exception as e:  # noqa: BLE001 (report and go on stopping the others)
                print(f"stopping {s.name}: {e}", file=sys.stderr)
        if jaeger is not None:
            jaeger.stop()
        if not ok:
            for log in sorted(root.glob("*.log")) + sorted(root.glob("*/jaeger.log")):
                print(f"--- {log}:\n{log.read_text(errors='replace')[-3000:]}", file=sys.stderr)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
