#!/usr/bin/env python3
"""Where a merge of the spans table spends its CPU, column group by column group.

Fills a data directory with loadgen spans (`spanhouse bench query-fill`, or reuses one),
loads them into memory in chDB, and for each column group makes a table of the sort key's
columns plus that group (the spans table's settings), inserts the spans as two parts with
merges stopped (traces split in two by a hash of their id: whole traces in each part,
interleaved in key order like two inserts of a live store), then merges the two with
OPTIMIZE ... FINAL, every part wide and the merge vertical (a column at a time), as
serve's merges of its inserts are. Prints, per group, the CPU of the two inserts and of the merge per
million rows, and the merged part's bytes per row. A merge runs on one thread; the CPU is
this process's (chDB runs in it), measured around each statement.

Alternative encodings of a group (e.g. attribute values as plain Strings) are measured the
same way, so the cost of a type can be read against its bytes.

  python3 bench/merge_cost.py --bin build/spanhouse --spans 1000000
"""
import argparse
import ctypes
import glob
import os
import resource
import subprocess
import sys
import tempfile
import time

KEY = ["timestamp", "trace_id", "start_time"]
ORDER = "(toStartOfHour(timestamp), trace_id, start_time)"

# (name, the spans columns kept besides the key (None: all), expressions inserted in place
# of a column, ALTERs on the empty table before the inserts). A table is made AS the
# spans table (its codecs kept) and the other columns dropped.
GROUPS = [
    ("sort key only", [], {}, []),
    ("ids, duration, name, service",
     ["span_id", "parent_span_id", "resource_id", "duration_ns", "name", "service_name"], {}, []),
    ("attr_keys", ["attr_keys"], {}, []),
    ("attr_types", ["attr_types"], {}, []),
    ("attr_values", ["attr_values"], {}, []),
    ("user_fields (a Map)", ["user_fields"], {}, []),
    ("extras (scope attributes, events, links)", ["extras"], {}, []),
    ("every column", None, {}, []),
    ("alt: attr_keys Array(String) ZSTD(3)", ["attr_keys"], {},
     ["MODIFY COLUMN attr_keys Array(String) CODEC(ZSTD(3))"]),
    ("alt: attr_keys Array(UInt16) key ids", ["attr_keys"],
     {"attr_keys": "arrayMap(k -> toUInt16(cityHash64(k) % 65521), attr_keys)"},
     ["MODIFY COLUMN attr_keys Array(UInt16) CODEC(ZSTD(3))"]),
    ("alt: attr_values ZSTD(1), not 3", ["attr_values"], {},
     ["MODIFY COLUMN attr_values Array(LowCardinality(String)) CODEC(ZSTD(1))"]),
    ("alt: attr_values Array(String) ZSTD(3)", ["attr_values"], {},
     ["MODIFY COLUMN attr_values Array(String) CODEC(ZSTD(3))"]),
    ("alt: user_fields ZSTD(3), not 6", ["user_fields"], {},
     ["MODIFY COLUMN user_fields Map(LowCardinality(String), LowCardinality(String)) "
      "CODEC(ZSTD(3))"]),
]


def find_libchdb():
    env = os.environ.get("SPANHOUSE_LIBCHDB")
    if env:
        return env
    cache = os.environ.get("SPANHOUSE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "spanhouse")
    found = sorted(glob.glob(os.path.join(cache, "chdb-*", "libchdb.so")))
    if not found:
        sys.exit("merge_cost: libchdb.so not found (run scripts/setup.sh, or set SPANHOUSE_LIBCHDB)")
    return found[-1]


class Chdb:
    def __init__(self, data_dir):
        lib = ctypes.CDLL(find_libchdb())
        lib.chdb_connect.restype = ctypes.c_void_p
        lib.chdb_connect.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.chdb_query_n.restype = ctypes.c_void_p
        lib.chdb_query_n.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_char_p, ctypes.c_size_t]
        lib.chdb_result_buffer.restype = ctypes.c_void_p  # binary formats hold NULs
        lib.chdb_result_buffer.argtypes = [ctypes.c_void_p]
        lib.chdb_result_error.restype = ctypes.c_char_p
        lib.chdb_result_error.argtypes = [ctypes.c_void_p]
        lib.chdb_result_length.restype = ctypes.c_size_t
        lib.chdb_result_length.argtypes = [ctypes.c_void_p]
        lib.chdb_destroy_query_result.argtypes = [ctypes.c_void_p]
        args = [b"merge_cost", f"--path={data_dir}/clickhouse".encode(),
                f"--config-file={data_dir}/clickhouse-config.xml".encode()]
        argv = (ctypes.c_char_p * len(args))(*args)
        self.lib = lib
        self.conn = ctypes.c_void_p.from_address(lib.chdb_connect(len(args), argv)).value
        if not self.conn:
            sys.exit(f"merge_cost: chDB did not open {data_dir}")

    def q(self, sql, fmt="TSV"):
        """Runs one statement; returns (output, CPU seconds of this process). The output is
        text, except in a binary `fmt` (e.g. Native): then its bytes."""
        b = sql.encode()
        f = fmt.encode()
        t0 = time.time()
        c0 = resource.getrusage(resource.RUSAGE_SELF)
        r = self.lib.chdb_query_n(self.conn, b, len(b), f, len(f))
        c1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
        if os.environ.get("MERGE_COST_DEBUG"):
            print(f"  {time.time() - t0:.2f}s wall {cpu:.2f}s cpu: {sql[:80]}", file=sys.stderr)
        err = self.lib.chdb_result_error(r)
        n = self.lib.chdb_result_length(r)
        out = err if err else (ctypes.string_at(self.lib.chdb_result_buffer(r), n) if n else b"")
        self.lib.chdb_destroy_query_result(r)
        if err:
            raise RuntimeError(f"{sql[:200]}: {out.decode(errors='replace')}")
        return (out.decode() if fmt == "TSV" else out), cpu


def spans_table_settings(ch, drop):
    """The store's spans table settings ("name = value"), but those whose name starts with
    one of `drop`."""
    out, _ = ch.q("SELECT extract(create_table_query, 'SETTINGS (.*)$') FROM system.tables "
                  "WHERE database = 'spanhouse' AND name = 'spans'")
    out = out.strip().replace("\\'", "'")  # TSV escapes quotes
    return [s for s in out.split(", ") if s and not s.startswith(tuple(drop))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/spanhouse", help="spanhouse binary (for the fill)")
    ap.add_argument("--spans", type=int, default=1000000, help="spans filled (one day)")
    ap.add_argument("--reuse", help="a data directory filled before (by this script or "
                    "`spanhouse bench query-fill`); its spans of one hour-aligned range are used")
    ap.add_argument("--rows", type=int, default=1000000, help="at most this many spans merged")
    args = ap.parse_args()

    tmp = None
    data = args.reuse
    if not data:
        tmp = tempfile.mkdtemp(prefix="merge-cost-")
        data = tmp
        t = time.time()
        print(f"filling {data} with {args.spans} spans ...", flush=True)
        subprocess.run([args.bin, "bench", "query-fill", "--data-dir", data, "--spans",
                        str(args.spans), "--days", "1"], check=True, stdout=subprocess.DEVNULL)
        print(f"filled in {time.time() - t:.0f} s", flush=True)
    ch = Chdb(data)
    # The spans table's own settings (granules, merge base), minus its storage policy (the
    # tables here stay on the default disk).
    settings = ", ".join(spans_table_settings(ch, ("storage_policy", "ttl_",
                                                   "min_bytes_for_wide_part")))
    # Every part wide and every merge vertical (a column at a time), as serve's merges of
    # its inserts are: their result is past min_bytes_for_wide_part. A table of a few
    # columns would otherwise be merged row by row (horizontally), which costs far more.
    settings += (", min_bytes_for_wide_part = 0, vertical_merge_algorithm_min_rows_to_activate = 1"
                 ", vertical_merge_algorithm_min_columns_to_activate = 1")
    ch.q("DROP DATABASE IF EXISTS merge_cost")
    # Tables made AS the spans table take its LowCardinality(UInt64) resource_id
    # (schema 6), which a CREATE must be allowed.
    ch.q("SET allow_suspicious_low_cardinality_types = 1")
    ch.q("CREATE DATABASE merge_cost")
    ch.q("CREATE TABLE merge_cost.src AS spanhouse.spans ENGINE = Memory")
    # One day's spans (one partition: the merge joins two parts).
    ch.q(f"INSERT INTO merge_cost.src SELECT * FROM spanhouse.spans WHERE toDate(timestamp) = "
         f"(SELECT toDate(timestamp) AS d FROM spanhouse.spans GROUP BY d ORDER BY count() DESC "
         f"LIMIT 1) ORDER BY {ORDER[1:-1]} LIMIT {args.rows}")
    rows = int(ch.q("SELECT count() FROM merge_cost.src")[0])
    print(f"{rows} spans, spans table settings: {settings}\n")
    m = rows / 1e6
    ins = ("SETTINGS min_insert_block_size_rows = 100000000, min_insert_block_size_bytes = 0, "
           "max_insert_block_size = 100000000")
    print(f"{'column group':<42} {'insert CPU-s/M':>14} {'merge CPU-s/M':>14} {'bytes/row':>10}")
    all_cols = ch.q("SELECT name FROM system.columns WHERE database = 'spanhouse' AND "
                    "table = 'spans' ORDER BY position")[0].split()
    for n, (name, kept, exprs, alters) in enumerate(GROUPS):
        t = f"merge_cost.g{n}"
        cols = all_cols if kept is None else KEY + kept
        ch.q(f"CREATE TABLE {t} AS spanhouse.spans ENGINE = MergeTree PARTITION BY "
             f"toDate(timestamp) ORDER BY {ORDER} SETTINGS {settings}")
        dropped = [c for c in all_cols if c not in cols]
        if dropped:
            ch.q(f"ALTER TABLE {t} " + ", ".join(f"DROP COLUMN {c}" for c in dropped))
        for a in alters:
            ch.q(f"ALTER TABLE {t} {a}")
        select = ", ".join(f"{exprs[c]} AS {c}" if c in exprs else c for c in cols)
        ch.q(f"SYSTEM STOP MERGES {t}")
        insert_cpu = 0.0
        for half in (0, 1):
            insert_cpu += ch.q(f"INSERT INTO {t} ({', '.join(cols)}) {ins} SELECT {select} FROM "
                               f"merge_cost.src WHERE cityHash64(trace_id) % 2 = {half}")[1]
        parts = int(ch.q(f"SELECT count() FROM system.parts WHERE database = 'merge_cost' AND "
                         f"table = 'g{n}' AND active")[0])
        ch.q(f"SYSTEM START MERGES {t}")
        merge_cpu = ch.q(f"OPTIMIZE TABLE {t} FINAL")[1]
        size = int(ch.q(f"SELECT sum(bytes_on_disk) FROM system.parts WHERE database = "
                        f"'merge_cost' AND table = 'g{n}' AND active")[0])
        note = "" if parts == 2 else f"  ({parts} parts before the merge)"
        print(f"{name:<42} {insert_cpu / m:>14.2f} {merge_cpu / m:>14.2f} {size / rows:>10.2f}{note}",
              flush=True)
        ch.q(f"DROP TABLE {t}")
    ch.q("DROP DATABASE merge_cost")
    if tmp:
        subprocess.run(["rm", "-rf", tmp], check=False)
    sys.stdout.flush()
    # chDB's own teardown at exit can take minutes (or crash) after this much work;
    # everything is printed and removed by now.
    os._exit(0)


if __name__ == "__main__":
    main()
