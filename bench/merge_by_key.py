#!/usr/bin/env python3
"""What the spans table's sort key costs its merges: (hour, trace_id, start) against (second,
trace_id, start), on the same inserted parts, side by side.

Takes a data directory that serve filled (`python3 bench/ingest_e2e.py --runs chdb --keep DIR`:
its spans table holds the inserts of a minute of loadgen, ~400k spans each, in arrival order).
For each round and each key, in a copy of that directory made for the one measurement: a table
AS the spans table (its columns, codecs and settings) with that ORDER BY, the first --parts
inserts copied into it one by one with merges stopped (each its own part, as serve's were),
then merged by OPTIMIZE ... FINAL, a vertical merge on one thread, as serve's background merges
of those parts are. Prints the merge's CPU seconds (this process's: chDB runs in it) per key and
round, the ratio second/hour within each round, CPU-seconds per million spans merged, and the
merged part's bytes.

  python3 bench/merge_by_key.py --data DIR --parts 5 --rounds 2
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from merge_cost import Chdb  # noqa: E402

KEYS = [
    ("hour", "(toStartOfHour(timestamp), trace_id, start_time)"),
    ("second", "(timestamp, trace_id, start_time)"),
]


def measure(data, key, parts):
    """In this process (one chDB per process): the merge of the first `parts` inserts under
    `key`. Prints "cpu rows bytes"."""
    ch = Chdb(data)
    ch.q("SYSTEM STOP MERGES spanhouse.spans")
    names, _ = ch.q("SELECT name FROM system.parts WHERE database = 'spanhouse' AND table = "
                    "'spans' AND active AND level = 0 ORDER BY min_block_number")
    names = names.split()
    if len(names) < parts:
        sys.exit(f"merge_by_key: {len(names)} unmerged inserts in {data}, {parts} needed")
    settings, _ = ch.q("SELECT extract(create_table_query, 'SETTINGS (.*)$') FROM system.tables "
                       "WHERE database = 'spanhouse' AND name = 'spans'")
    # Without the TTL (an old span would go to the cold volume, where nothing merges) and
    # with the store's other settings.
    settings = [s for s in settings.strip().replace("\\'", "'").split(", ")
                if s and not s.startswith(("storage_policy", "merge_with_ttl", "ttl_only"))]
    ch.q(f"CREATE TABLE spanhouse.v AS spanhouse.spans ENGINE = MergeTree PARTITION BY "
         f"toDate(timestamp) ORDER BY {key} SETTINGS {', '.join(settings)}, "
         f"allow_suspicious_low_cardinality_types = 1")
    ch.q("SYSTEM STOP MERGES spanhouse.v")
    for name in names[:parts]:
        ch.q(f"INSERT INTO spanhouse.v SELECT * FROM spanhouse.spans WHERE _part = '{name}' "
             f"SETTINGS insert_deduplicate = 0, max_threads = 1")
    ch.q("SYSTEM START MERGES spanhouse.v")
    _, cpu = ch.q("OPTIMIZE TABLE spanhouse.v FINAL")
    out, _ = ch.q("SELECT count(), sum(rows), sum(bytes_on_disk) FROM system.parts WHERE "
                  "database = 'spanhouse' AND table = 'v' AND active")
    n, rows, size = out.split()
    if n != "1":
        sys.exit(f"merge_by_key: {n} parts left after OPTIMIZE FINAL")
    print(f"{cpu:.3f} {rows} {size}")
    sys.stdout.flush()
    os._exit(0)  # chDB's threads: no clean shutdown needed for a throwaway copy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="a data directory serve filled (--keep)")
    ap.add_argument("--parts", type=int, default=5, help="inserts merged")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--one", nargs=2, metavar=("DIR", "KEY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return measure(args.one[0], args.one[1], args.parts)
    if not args.data:
        ap.error("--data is required")
    if not os.path.isdir(os.path.join(args.data, "clickhouse")):
        sys.exit(f"merge_by_key: {args.data} is not a data directory (no clickhouse/)")
    results = {name: [] for name, _ in KEYS}
    sizes = {}
    for r in range(args.rounds):
        # Turns: the first key first in even rounds, last in odd ones.
        order = KEYS if r % 2 == 0 else list(reversed(KEYS))
        for name, key in order:
            tmp = tempfile.mkdtemp(prefix="merge-by-key-")
            try:
                copy = os.path.join(tmp, "data")
                subprocess.run(["cp", "-a", args.data, copy], check=True)
                out = subprocess.run([sys.executable, __file__, "--parts", str(args.parts),
                                      "--one", copy, key], capture_output=True, text=True)
                if out.returncode != 0:
                    sys.exit(f"merge_by_key: {name}: {out.stderr.strip()[-2000:]}")
                cpu, rows, size = out.stdout.split()[-3:]
                results[name].append(float(cpu))
                sizes[name] = int(size)
                print(f"round {r + 1} {name:6s}: merge {float(cpu):.2f} CPU-s, {rows} spans, "
                      f"{int(size) / 1e6:.1f} MB", flush=True)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    n = int(rows)
    print()
    print(f"{'key':8s} " + " ".join(f"{'round ' + str(i + 1):>9s}" for i in range(args.rounds)) +
          f"  {'CPU-s/M':>8s}  {'bytes/span':>10s}")
    for name, key in KEYS:
        cpus = results[name]
        print(f"{name:8s} " + " ".join(f"{c:9.2f}" for c in cpus) +
              f"  {sum(cpus) / len(cpus) / n * 1e6:8.2f}  {sizes[name] / n:10.2f}")
    ratios = [s / h for s, h in zip(results["second"], results["hour"])]
    print(f"second/hour per round: {', '.join(f'{x:.2f}' for x in ratios)}")


if __name__ == "__main__":
    main()
