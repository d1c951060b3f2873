#!/usr/bin/env python3
"""How the spans table's layout changes the read of whole traces, and what it costs merges.

Copies one day of a store filled by `spanhouse bench query-fill` into tables that differ from
its spans table in one setting each (in a database `bench_layouts` made in that store and
dropped at the end; the store's own tables are only read). Each table gets the day as 8
inserts (traces split by a hash of their id) with merges stopped, then one OPTIMIZE ... FINAL:
the CPU of that merge is printed, since merges are most of ingest's CPU. Then traces are read
from each table as the reader reads them (every column of the traces' granules, found by hour
and trace id, in Native), 1, 10 and 20 ids at a time, the tables taking turns per group of ids;
the medians are printed with each table's bytes on disk and the CPU of its inserts (an INSERT
... SELECT from the store: a table whose user_fields type differs pays a conversion there
that the writer's Native inserts would not). The last rows read the schema's table without
the scope-attribute, event and link columns, without user_fields, and without both, to show
what those streams cost. A table may also keep the 21 rare columns as one (each span's
values as a RowBinary string, made by formatRowNoNewline; '' where all are empty): read
whole, it shows what one stream for them would save. Then each table is searched by a user
field (frontend spans of one hour with app.channel = android, every other hour of the day;
the counts must agree).

The store must be a schema-7 one (its spans table with the 21 rare columns: made by a
spanhouse from before schema 8); schema 8 keeps them as the one `extras` column measured here.

  python3 bench/trace_read_layouts.py --reuse DIR [--day 2026-12-01] [--ids 120] [--only 4,5]
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from merge_cost import ORDER, Chdb, spans_table_settings  # noqa: E402

DB = "bench_layouts"
HUGE = "min_bytes_for_wide_part = 1000000000000, min_rows_for_wide_part = 1000000000"
# (name, settings added to or replacing the spans table's, user_fields' type or "", or
# EXTRAS: the rare columns as one)
EXTRAS = "extras"
VARIANTS = [
    ("schema (as the spans table)", "", ""),
    ("min_compress_block_size = 8192", "min_compress_block_size = 8192", ""),
    ("min_compress_block_size = 1024", "min_compress_block_size = 1024", ""),
    ("compact parts only", HUGE, ""),
    ("user_fields JSON(max_dynamic_paths = 0)", "", "JSON(max_dynamic_paths = 0)"),
    ("user_fields JSON(max_dynamic_types = 1)", "", "JSON(max_dynamic_types = 1)"),
    ("rare columns as one RowBinary column", "", EXTRAS),
]
# Columns left out by the last row: rare per span, together ~50 of a lookup's streams.
RARE = ("scope_attr_", "scope_dropped", "scope_schema", "event_", "dropped_events", "link_",
        "dropped_links")


def table_settings(ch, extra):
    """The spans table's settings without its storage policy and TTL, with `extra`'s."""
    have = spans_table_settings(ch, ("storage_policy", "ttl_", "merge_with_ttl",
                                     "materialize_ttl", "non_replicated_dedup"))
    for e in (x for x in extra.split(", ") if x):
        name = e.split(" = ")[0]
        have = [s for s in have if not s.startswith(name + " ")] + [e]
    return ", ".join(have + ["allow_suspicious_low_cardinality_types = 1"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reuse", required=True, help="a data directory filled by `spanhouse bench "
                    "query-fill` (not in use by a serve)")
    ap.add_argument("--day", help="the day copied (default: the store's second newest)")
    ap.add_argument("--ids", type=int, default=120, help="trace ids read, in groups")
    ap.add_argument("--only", help="comma-separated indexes of the tables made (default: all; "
                    "0, the schema's, always)")
    args = ap.parse_args()
    only = {0} | ({int(x) for x in args.only.split(",")} if args.only else
                  set(range(len(VARIANTS))))

    ch = Chdb(args.reuse)
    day = args.day
    if not day:
        days, _ = ch.q("SELECT DISTINCT toDate(timestamp) AS d FROM spanhouse.spans ORDER BY d "
                       "DESC LIMIT 2")
        day = days.split()[-1]
    ch.q(f"DROP DATABASE IF EXISTS {DB} SYNC")
    ch.q(f"CREATE DATABASE {DB}")
    rows = {}
    try:
        tables = []
        for i, (name, extra, json_type) in enumerate(VARIANTS):
            if i not in only:
                continue
            t = f"{DB}.v{i}"
            ch.q(f"CREATE TABLE {t} AS spanhouse.spans ENGINE = MergeTree PARTITION BY "
                 f"toDate(timestamp) ORDER BY {ORDER} SETTINGS {table_settings(ch, extra)}")
            select = "*"
            if json_type == EXTRAS:
                # The 21 rare columns' values of a span as one RowBinary string
                # (formatRowNoNewline), '' where all are empty.
                types, _ = ch.q("SELECT name, type FROM system.columns WHERE database = "
                                "'spanhouse' AND table = 'spans' ORDER BY position")
                types = [line.split("\t") for line in types.splitlines() if line]
                rare = [(c, ty) for c, ty in types if c.startswith(RARE)]
                empty = " AND ".join(
                    f"empty({c})" if ty.startswith("Array") else
                    f"{c} = ''" if "String" in ty else f"{c} = 0" for c, ty in rare)
                ch.q(f"ALTER TABLE {t} " + ", ".join(f"DROP COLUMN {c}" for c, _ in rare) +
                     ", ADD COLUMN extras String CODEC(ZSTD(3))")
                select = ", ".join(c for c, _ in types if not c.startswith(RARE)) + (
                    f", if({empty}, '', formatRowNoNewline('RowBinary', "
                    f"{', '.join(c for c, _ in rare)}))")
            elif json_type:
                ch.q(f"ALTER TABLE {t} MODIFY COLUMN user_fields {json_type}")
            ch.q(f"SYSTEM STOP MERGES {t}")
            insert_cpu = 0.0
            for k in range(8):
                _, cpu = ch.q(f"INSERT INTO {t} SELECT {select} FROM spanhouse.spans WHERE "
                              f"toDate(timestamp) = '{day}' AND cityHash64(trace_id) % 8 = {k}")
                insert_cpu += cpu
            ch.q(f"SYSTEM START MERGES {t}")
            _, cpu = ch.q(f"OPTIMIZE TABLE {t} FINAL")
            size, _ = ch.q(f"SELECT sum(rows), sum(bytes_on_disk), count(), any(part_type) FROM "
                           f"system.parts WHERE database = '{DB}' AND table = 'v{i}' AND active")
            n, size_b, parts, kind = size.split()
            rows[name] = {"merge_cpu_s": round(cpu, 1), "insert_cpu_s": round(insert_cpu, 1),
                          "mb": round(int(size_b) / 1e6, 1),
                          "rows": int(n), "parts": int(parts), "part": kind, "ms": {}}
            print(f"{name}: {rows[name]}", file=sys.stderr, flush=True)
            tables.append((name, t, "*"))
        cols, _ = ch.q("SELECT name FROM system.columns WHERE database = 'spanhouse' AND "
                       "table = 'spans' ORDER BY position")
        for slim_name, drop in (("schema, without scope attrs, events, links", RARE),
                                ("schema, without user_fields", ("user_fields",)),
                                ("schema, without both", RARE + ("user_fields",))):
            rows[slim_name] = {"ms": {}}
            tables.append((slim_name, f"{DB}.v0",
                           ", ".join(c for c in cols.split() if not c.startswith(drop))))

        n_rows = rows[VARIANTS[0][0]]["rows"]
        ids, _ = ch.q(f"SELECT lower(hex(trace_id)), groupUniqArray(toUnixTimestamp("
                      f"toStartOfHour(timestamp))) FROM {DB}.v0 WHERE cityHash64(trace_id) % "
                      f"{max(1, n_rows // (args.ids * 30))} = 3 GROUP BY trace_id ORDER BY "
                      f"cityHash64(trace_id) LIMIT {args.ids + 1}")
        ids = [line.split("\t") for line in ids.splitlines() if line]

        def read(table, columns, group):
            arr = "[" + ",".join(f"'{g[0]}'" for g in group) + "]"
            hours = sorted({h for g in group for h in g[1].strip("[]").split(",")})
            sql = (f"SELECT {columns} FROM {table} WHERE toStartOfHour(timestamp) IN "
                   f"CAST([{','.join(hours)}] AS Array(DateTime)) AND trace_id IN (SELECT "
                   f"toFixedString(unhex(arrayJoin({arr})), 16)) ORDER BY indexOf({arr}, "
                   f"lower(hex(trace_id))), start_time, span_id SETTINGS "
                   f"output_format_native_use_flattened_dynamic_and_json_serialization = 1")
            t0 = time.perf_counter()
            ch.q(sql, fmt="Native")
            return (time.perf_counter() - t0) * 1000

        for name, t, columns in tables:
            read(t, columns, ids[:1])  # marks loaded once per table
        for n in (1, 10, 20):
            for at, start in enumerate(range(1, len(ids) - n + 1, n)):
                group = ids[start:start + n]
                order = tables[at % len(tables):] + tables[:at % len(tables)]
                for name, t, columns in order:
                    rows[name]["ms"].setdefault(n, []).append(read(t, columns, group))
        # A search by a user field scans its path over an hour of one service.
        day0, _ = ch.q(f"SELECT toUnixTimestamp(toDateTime('{day} 00:00:00'))")
        for at, hour in enumerate(range(int(day0), int(day0) + 86400, 7200)):
            order = tables[at % len(tables):] + tables[:at % len(tables)]
            counts = set()
            for name, t, columns in order:
                if columns != "*":
                    continue
                sql = (f"SELECT count() FROM {t} WHERE service_name = 'frontend' AND timestamp "
                       f">= toDateTime({hour}) AND timestamp < toDateTime({hour + 3600}) AND "
                       f"isNotNull(user_fields.`app.channel`) AND "
                       f"toString(user_fields.`app.channel`) = 'android'")
                t0 = time.perf_counter()
                out, _ = ch.q(sql)
                rows[name].setdefault("search", []).append((time.perf_counter() - t0) * 1000)
                counts.add(out.strip())
            assert len(counts) == 1, f"the tables disagree: {counts}"
    finally:
        ch.q(f"DROP DATABASE IF EXISTS {DB} SYNC")

    print(f"day {day}, {n_rows} spans; median ms of the reader's read of N traces "
          f"({len(ids) - 1} ids, in groups)")
    print(f"{'table':<46} {'1 trace':>8} {'10':>8} {'20':>8} {'MB':>8} {'merge CPU s':>12} "
          f"{'insert CPU s':>12} {'uf search':>10}")
    for name, r in rows.items():
        med = [statistics.median(r["ms"][n]) if r["ms"].get(n) else float("nan")
               for n in (1, 10, 20)]
        search = statistics.median(r["search"]) if r.get("search") else float("nan")
        print(f"{name:<46} {med[0]:>8.1f} {med[1]:>8.1f} {med[2]:>8.1f} "
              f"{r.get('mb', float('nan')):>8} {r.get('merge_cpu_s', float('nan')):>12} "
              f"{r.get('insert_cpu_s', float('nan')):>12} {search:>10.1f}")
    os._exit(0)  # chDB's threads may not stop cleanly at exit


if __name__ == "__main__":
    main()
