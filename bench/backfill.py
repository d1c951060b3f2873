#!/usr/bin/env python3
"""`spanhouse backfill`: how fast history written by Jaeger moves from OpenSearch into ClickHouse,
on this machine, two builds side by side in one run.

The corpus: `spanhouse loadgen --corpus fresh --payloads 0` traces (every request generated
afresh: concrete URLs, SQL literals, ids in log lines) sent to Jaeger v2 (v1.75.0, tools/jaeger),
which writes them with its OpenSearch backend into a real OpenSearch 2.19 node (tests/opensearch's
launcher; daily indices, 1 shard, 0 replicas), as a team's history would be. Jaeger stores a
request it retried twice, as it would in production: the corpus holds some spans twice. Made
once per --work directory and kept there with the node's data and the pages dumped from it.

Measured, each with a fresh `spanhouse serve` on the embedded engine (defaults: writer.max_age_ms
3000), every process's CPU from /proc (user+system):
  import  the server's import path alone: the corpus's documents, dumped once as pages of
          --page-spans (NDJSON of `_source`s), POSTed to /api/admin/import by concurrent clients
          (this script's threads), until a last import with ?wait=stored says all is stored.
          First the old build's serve and the new one's side by side on the corpus (4 clients);
          then the new one on --copies copies of it (each copy's trace ids changed: distinct
          spans, the same entropy) with each of --clients clients, for a steady rate.
          Printed: spans/s and serve's CPU-seconds per million spans.
  search  OpenSearch's own CPU per million spans read, paging through the corpus with
          search_after as the backfill does, for the forms of the query a backfill could send:
          as sent (the whole `_source`, every hit's metadata), `_source` limited to the fields
          spanhouse reads, `filter_path` to hits' `_source` and `sort`, and both.
  e2e     end to end: `spanhouse backfill` of the old build (with its own serve) against the new
          one (--parallel N, with its serve), in turns, --runs times. Printed: spans/s, the ratio
          new/old, and the CPU-seconds per million spans of OpenSearch's JVM, of the backfill
          command and of serve, so the bottleneck shows; every run checks that each distinct
          span was imported once.
Every process is stopped at the end (the node's data stays in --work when given).

Usage: bench/backfill.py --old OLD_BINARY [--bin build/spanhouse] [--spans 250000]
                         [--work DIR] [--what import,search,e2e] [--copies 4] [--clients 4,8]
                         [--parallel 4] [--runs 2] [--page-spans 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from ingest_e2e import cpu_seconds, free_port, wait_ready  # noqa: E402
from jaeger_server import Jaeger  # noqa: E402
from opensearch_server import OpenSearch  # noqa: E402

PATTERN = "hist-jaeger-span-*"
SORT = [{"startTime": "asc"}, {"traceID": "asc"}, {"spanID": "asc"}]
# What storage/opensearch/jaeger_document.cc's decoder reads of a document.
READ_FIELDS = ["traceID", "spanID", "parentSpanID", "flags", "operationName", "references",
               "startTime", "duration", "tags", "tag", "logs", "process"]


def make_corpus(work: Path, os_node: OpenSearch, binary: str, spans: int) -> int:
    """Has Jaeger write `spans` more spans unless the node holds that many; returns the count."""
    have = os_node.count(PATTERN)
    if have >= spans:
        return have
    jaeger = Jaeger(work, storage="opensearch", opensearch_url=os_node.url,
                    index_prefix="hist", shards=1, replicas=0)
    try:
        subprocess.run([binary, "loadgen", "--endpoint", f"{jaeger.otlp_http_url}/v1/traces",
                        "--spans", str(spans - have), "--rate", "3000", "--payloads", "0",
                        "--corpus", "fresh", "--connections", "2", "--quiet"],
                       check=False, timeout=3600)
        # Jaeger writes behind its answers: wait until the count stops growing.
        last, still = -1, 0
        while still < 3:
            time.sleep(5)
            n = os_node.count(PATTERN)
            still = still + 1 if n == last else 0
            last = n
    finally:
        jaeger.stop()
    return os_node.count(PATTERN)


def dump_pages(work: Path, os_node: OpenSearch, page_spans: int) -> tuple[list[Path], int]:
    """The corpus's `_source`s as NDJSON pages (made once, kept under work/pages-N), and how
    many distinct spans (trace id, span id) they hold."""
    pages_dir = work / f"pages-{page_spans}"
    done = pages_dir / "done.json"
    if done.exists():
        return sorted(pages_dir.glob("p*.ndjson")), json.loads(done.read_text())["distinct"]
    pages_dir.mkdir(exist_ok=True)
    after = None
    n = 0
    keys: set[tuple[str, str]] = set()
    while True:
        body = {"size": page_spans, "sort": SORT}
        if after is not None:
            body["search_after"] = after
        hits = os_node.search(PATTERN, body)["hits"]["hits"]
        if not hits:
            break
        with open(pages_dir / f"p{n:05d}.ndjson", "w") as f:
            for h in hits:
                f.write(json.dumps(h["_source"], separators=(",", ":")) + "\n")
                keys.add((h["_source"]["traceID"], h["_source"]["spanID"]))
        after = hits[-1]["sort"]
        n += 1
    done.write_text(json.dumps({"pages": n, "distinct": len(keys)}))
    return sorted(pages_dir.glob("p*.ndjson")), len(keys)


def copy_pages(pages: list[Path], copies: int) -> list[Path]:
    """`copies` copies of the pages, each with every trace id's first byte set to the copy's
    number (its references' too): distinct spans with the corpus's entropy. Made once."""
    out = []
    for c in range(copies):
        d = pages[0].parent / f"copy-{c}"
        if not (d / "done").exists():
            d.mkdir(exist_ok=True)
            for p in pages:
                text = re.sub(rb'"traceID":"[0-9a-f]{2}', b'"traceID":"%02x' % c, p.read_bytes())
                (d / p.name).write_bytes(text)
            (d / "done").write_text("")
        out += [d / p.name for p in pages]
    return out


class Serve:
    """A `spanhouse serve` on the embedded engine in a directory of its own."""

    def __init__(self, binary: str, root: Path, name: str):
        self.dir = root / name
        self.port = free_port()
        self.log = open(root / f"{name}.log", "wb")
        self.proc = subprocess.Popen(
            [binary, "serve", "--data-dir", str(self.dir), "--query-listen",
             f"127.0.0.1:{self.port}", "--otlp-http-listen", f"127.0.0.1:{free_port()}",
             "--otlp-grpc-listen", f"127.0.0.1:{free_port()}", "--zipkin-listen",
             f"127.0.0.1:{free_port()}"], stdout=self.log, stderr=self.log)
        wait_ready(self.url, self.proc)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=120)
        self.log.close()


def post_pages(url: str, pages: list[Path], clients: int) -> dict:
    """POSTs every page with `clients` threads, each taking the next page; sums the answers;
    then waits until all is stored (?wait=stored; a build that answers once stored ignores it)."""
    lock = threading.Lock()
    todo = list(reversed(pages))
    totals = {"received": 0, "imported": 0, "already_stored": 0, "invalid": 0}
    errors: list[str] = []

    def client() -> None:
        s = requests.Session()
        s.trust_env = False
        while True:
            with lock:
                if not todo or errors:
                    return
                page = todo.pop()
            data = page.read_bytes()
            for _ in range(60):
                r = s.post(f"{url}/api/admin/import", data=data,
                           headers={"Content-Type": "application/x-ndjson"}, timeout=600)
                if r.status_code != 503:
                    break
                time.sleep(1)
            with lock:
                if r.status_code != 200:
                    errors.append(f"{page.name}: HTTP {r.status_code}: {r.text[:200]}")
                    return
                for k in totals:
                    totals[k] += r.json()[k]

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("import failed: " + errors[0])
    r = requests.post(f"{url}/api/admin/import?wait=stored", data=b"", timeout=600)
    if r.status_code != 200:
        raise SystemExit(f"the last import: HTTP {r.status_code}: {r.text[:200]}")
    return totals


def measure_import(label: str, binary: str, root: Path, pages: list[Path], clients: int,
                   distinct: int) -> float:
    serve = Serve(binary, root, f"serve-import-{label}-{clients}-{time.time_ns()}")
    try:
        cpu0, self0 = serve.cpu(), resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.time()
        totals = post_pages(serve.url, pages, clients)
        wall = time.time() - t0
        cpu = serve.cpu() - cpu0
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        mine = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
    finally:
        serve.stop()
    n = totals["received"]
    ok = totals["imported"] == distinct
    print(f"  {label:3s} K={clients}: {n} spans ({totals['imported']} imported) in {wall:6.1f} s: "
          f"{n / wall:8.0f} spans/s; CPU-s per million spans: serve {cpu * 1e6 / n:6.2f} "
          f"(the posting client {mine * 1e6 / n:.2f}); each distinct span imported once: {ok}",
          flush=True)
    if not ok:
        raise SystemExit(f"import {label}: {totals}, {distinct} distinct spans")
    return n / wall


def measure_search(os_node: OpenSearch, label: str, page_spans: int, source: bool,
                   filter_path: bool) -> None:
    """Pages through the corpus as the backfill does (one cursor), with or without `_source`
    includes and `filter_path`; prints OpenSearch's CPU per million spans and bytes per span."""
    s = requests.Session()
    s.trust_env = False
    params = "?ignore_unavailable=true&allow_no_indices=true"
    if filter_path:
        params += "&filter_path=hits.hits._source,hits.hits.sort"
    after, n, nbytes = None, 0, 0
    cpu0, t0 = cpu_seconds(os_node.pid), time.time()
    while True:
        q = {"size": page_spans, "track_total_hits": False, "sort": SORT}
        if after is not None:
            q["search_after"] = after
            q["query"] = {"range": {"startTime": {"gte": after[0]}}}
        if source:
            q["_source"] = {"includes": READ_FIELDS}
        r = s.post(f"{os_node.url}/{PATTERN}-*-*/_search{params}", data=json.dumps(q),
                   headers={"Content-Type": "application/json"}, timeout=600)
        r.raise_for_status()
        body = r.content
        nbytes += len(body)
        hits = body.count(b'"sort":[')
        if hits == 0:
            break
        n += hits
        last = body.rindex(b'"sort":[')
        after = json.loads(body[last + 7:body.index(b"]", last) + 1])
    cpu, wall = cpu_seconds(os_node.pid) - cpu0, time.time() - t0
    print(f"  {label:40s} {n} spans in {wall:5.1f} s; OpenSearch {cpu * 1e6 / n:6.2f} CPU-s per "
          f"million spans; {nbytes / n:6.0f} bytes per span in the answers", flush=True)


def measure_e2e(label: str, binary: str, root: Path, os_node: OpenSearch, extra: list[str],
                page_spans: int, distinct: int, t_range: tuple[int, int]) -> float:
    serve = Serve(binary, root, f"serve-e2e-{label}-{time.time_ns()}")
    checkpoint = root / f"{label}-{time.time_ns()}.checkpoint"
    try:
        cmd = [binary, "backfill", "--from", "opensearch", "--opensearch", os_node.url,
               "--index-prefix", "hist", "--server", serve.url, "--start", str(t_range[0]),
               "--end", str(t_range[1]), "--quiet", "--page-spans", str(page_spans),
               "--checkpoint", str(checkpoint)] + extra
        serve0, os0 = serve.cpu(), cpu_seconds(os_node.pid)
        t0 = time.time()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.time() - t0
        out, err = proc.stdout.read(), proc.stderr.read()
        serve_cpu, os_cpu = serve.cpu() - serve0, cpu_seconds(os_node.pid) - os0
    finally:
        serve.stop()
    cp = json.loads(checkpoint.read_text())
    n = cp["read"]
    if not cp.get("done") or cp["imported"] != distinct:
        raise SystemExit(f"e2e {label}: {out} {err} checkpoint {cp}, {distinct} distinct spans")
    per_m = 1e6 / n
    rate = n / wall
    print(f"  {label:3s} {' '.join(extra):12s}: {n} spans read, {cp['imported']} imported in "
          f"{wall:6.1f} s: {rate:7.0f} spans/s; CPU-s per million spans: OpenSearch "
          f"{os_cpu * per_m:6.2f}, backfill {(usage.ru_utime + usage.ru_stime) * per_m:6.2f}, "
          f"serve {serve_cpu * per_m:6.2f}", flush=True)
    return rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "spanhouse"), help="the new build")
    ap.add_argument("--old", required=True, help="the build to compare with")
    ap.add_argument("--spans", type=int, default=250000)
    ap.add_argument("--work", help="keep the corpus (OpenSearch's data) and pages here")
    ap.add_argument("--what", default="import,search,e2e")
    ap.add_argument("--copies", type=int, default=4, help="copies of the corpus, import alone")
    ap.add_argument("--clients", default="4,8", help="concurrent clients, import alone")
    ap.add_argument("--parallel", type=int, default=4, help="the new backfill's --parallel")
    ap.add_argument("--runs", type=int, default=2, help="end-to-end runs of each build")
    ap.add_argument("--page-spans", type=int, default=5000)
    args = ap.parse_args()

    tmp = tempfile.TemporaryDirectory(prefix="bench-backfill-")
    work = Path(args.work) if args.work else Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    runs = Path(tmp.name)
    os_node = OpenSearch(work)
    try:
        corpus = make_corpus(work, os_node, args.bin, args.spans)
        pages, distinct = dump_pages(work, os_node, args.page_spans)
        stats = os_node.request("GET", f"{PATTERN}/_stats/store,docs").json()["_all"]["primaries"]
        first = os_node.search(PATTERN, {"size": 1, "sort": [{"startTime": "asc"}]})
        last = os_node.search(PATTERN, {"size": 1, "sort": [{"startTime": "desc"}]})
        t0 = first["hits"]["hits"][0]["_source"]["startTime"] // 1_000_000
        t1 = last["hits"]["hits"][0]["_source"]["startTime"] // 1_000_000
        doc_bytes = sum(p.stat().st_size for p in pages) / corpus
        print(f"corpus: {corpus} span documents ({distinct} distinct spans) written by Jaeger "
              f"v1.75.0 into OpenSearch 2.19 (loadgen --corpus fresh --payloads 0; "
              f"{t1 - t0 + 1} s of history; {doc_bytes:.0f} bytes of _source per span, "
              f"{stats['store']['size_in_bytes'] / corpus:.0f} on disk); old: {args.old}, "
              f"new: {args.bin}", flush=True)
        t_range = (t0 - 60, t1 + 60)
        if "import" in args.what:
            print(f"import alone, pages of {args.page_spans} spans, side by side on the corpus:")
            rates = {label: measure_import(label, binary, runs, pages, 4, distinct)
                     for label, binary in (("old", args.old), ("new", args.bin))}
            print(f"  new / old {rates['new'] / rates['old']:.2f}x")
            copies = copy_pages(pages, args.copies)
            print(f"import alone, the new build, {args.copies} copies of the corpus "
                  f"({len(copies)} pages):")
            for k in [int(c) for c in args.clients.split(",")]:
                measure_import("new", args.bin, runs, copies, k, distinct * args.copies)
        if "search" in args.what:
            print(f"OpenSearch alone, pages of {args.page_spans} spans, one cursor:")
            for rep in range(2):
                for label, source, fp in (("whole _source (as backfill asks)", False, False),
                                          ("_source includes", True, False),
                                          ("filter_path", False, True),
                                          ("_source includes and filter_path", True, True)):
                    measure_search(os_node, f"{label}, pass {rep + 1}", args.page_spans, source,
                                   fp)
        if "e2e" in args.what:
            print(f"end to end (pages of {args.page_spans}), in turns:")
            rates_e2e: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(args.runs):
                rates_e2e["old"].append(measure_e2e("old", args.old, runs, os_node, [],
                                                    args.page_spans, distinct, t_range))
                rates_e2e["new"].append(measure_e2e("new", args.bin, runs, os_node,
                                                    ["--parallel", str(args.parallel)],
                                                    args.page_spans, distinct, t_range))
            for i, (o, n) in enumerate(zip(rates_e2e["old"], rates_e2e["new"])):
                print(f"  run {i + 1}: new / old {n / o:.2f}x ({n:.0f} vs {o:.0f} spans/s)")
    finally:
        os_node.stop()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
