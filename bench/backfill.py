#!/usr/bin/env python3
"""`spanhouse backfill --from opensearch`: how fast history written by Jaeger moves into
ClickHouse, on this machine.

Jaeger v2 (v1.75.0, tools/jaeger; its OpenSearch backend) receives `spanhouse loadgen` traces
(fresh traces for every request: --payloads 0) and writes them into a real OpenSearch 2.19 node
(tests/opensearch's launcher), as a team's history would be. Then a `spanhouse serve` on the
embedded engine starts, and `spanhouse backfill` copies the whole range into it, through the
server's /api/admin/import. Printed: spans, wall seconds, spans/s, and CPU-seconds per million
spans of the backfill command, of serve (decoding, the check of what is stored, the inserts,
chDB) and of OpenSearch (the searches), each from /proc; and a second run over the same range
without the checkpoint (every span already stored: what idempotency costs). Every process is
stopped at the end.

Usage: bench/backfill.py [--bin build/spanhouse] [--spans 200000] [--page-spans 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
sys.path.insert(0, str(ROOT / "bench"))

from ingest_e2e import cpu_seconds, free_port, wait_ready  # noqa: E402
from jaeger_server import Jaeger  # noqa: E402
from opensearch_server import OpenSearch  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "spanhouse"))
    ap.add_argument("--spans", type=int, default=200000)
    ap.add_argument("--rate", type=int, default=10000, help="spans/s sent to Jaeger")
    ap.add_argument("--page-spans", type=int, default=5000)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-backfill-") as tmp:
        work = Path(tmp)
        os_node = OpenSearch(work)
        jaeger = None
        serve = None
        try:
            jaeger = Jaeger(work, storage="opensearch", opensearch_url=os_node.url,
                            index_prefix="hist", shards=1, replicas=0)
            t_start = int(time.time()) - 60
            subprocess.run([args.bin, "loadgen", "--endpoint", f"{jaeger.otlp_http_url}/v1/traces",
                            "--spans", str(args.spans), "--rate", str(args.rate),
                            "--payloads", "0", "--connections", "2", "--quiet"],
                           check=True, timeout=3600)
            deadline = time.time() + 600
            have = -1
            while time.time() < deadline:
                try:
                    have = os_node.count("hist-jaeger-span-*")
                except Exception:  # noqa: BLE001 - shards not ready yet
                    have = -1
                if have >= args.spans:
                    break
                time.sleep(2)
            jaeger.stop()
            jaeger = None
            print(f"corpus: {have} spans written by Jaeger v1.75.0 into OpenSearch "
                  f"(loadgen, fresh traces every request)")

            data = work / "serve"
            qport, oport, gport, zport = free_port(), free_port(), free_port(), free_port()
            log = open(work / "serve.log", "wb")
            serve = subprocess.Popen(
                [args.bin, "serve", "--data-dir", str(data), "--query-listen",
                 f"127.0.0.1:{qport}", "--otlp-http-listen", f"127.0.0.1:{oport}",
                 "--otlp-grpc-listen", f"127.0.0.1:{gport}", "--zipkin-listen",
                 f"127.0.0.1:{zport}"], stdout=log, stderr=log)
            wait_ready(f"http://127.0.0.1:{qport}", serve)
            t_end = int(time.time()) + 60
            cmd = [args.bin, "backfill", "--from", "opensearch", "--opensearch", os_node.url,
                   "--index-prefix", "hist", "--server", f"http://127.0.0.1:{qport}",
                   "--start", str(t_start), "--end", str(t_end), "--quiet",
                   "--page-spans", str(args.page_spans)]
            for label, checkpoint in (("first run", "a"), ("second run, all stored", "b")):
                serve_cpu0, os_cpu0 = cpu_seconds(serve.pid), cpu_seconds(os_node.pid)
                t0 = time.time()
                run = subprocess.run(
                    ["/usr/bin/time", "-f", "%U %S"] + cmd +
                    ["--checkpoint", str(work / f"{checkpoint}.checkpoint")],
                    capture_output=True, text=True, timeout=3600)
                wall = time.time() - t0
                if run.returncode != 0:
                    print(run.stdout, run.stderr)
                    return 1
                user, system = map(float, run.stderr.strip().splitlines()[-1].split())
                cp = json.loads((work / f"{checkpoint}.checkpoint").read_text())
                n = cp["read"]
                per_m = 1e6 / max(n, 1)
                print(f"{label}: {n} spans read, {cp['imported']} imported, "
                      f"{cp['already_stored']} already stored in {wall:.1f} s: "
                      f"{n / wall:.0f} spans/s; CPU-s per million spans: backfill "
                      f"{(user + system) * per_m:.2f}, serve "
                      f"{(cpu_seconds(serve.pid) - serve_cpu0) * per_m:.2f}, OpenSearch "
                      f"{(cpu_seconds(os_node.pid) - os_cpu0) * per_m:.2f}")
        finally:
            if serve is not None:
                serve.terminate()
                serve.wait(timeout=120)
            if jaeger is not None:
                jaeger.stop()
            os_node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
