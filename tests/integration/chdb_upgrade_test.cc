// Integration tests against real embedded ClickHouse (chDB): data directories
// of every older schema upgraded at start, keeping every row.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "integration/trace_as_read.h"
#include "sink/span_queue.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/tsv.h"
#include "tools/loadgen/generator.h"

namespace spanhouse::storage {
namespace {

TEST(ChdbSchema, OldSpansTableIsUpgradedInPlace) {
  Reset();
  // A spans table as an earlier schema made it: the first 12 columns only.
  Capabilities caps = Capabilities::FromVersion("26.5");
  std::string cols;
  for (size_t i = 0; i < 12; ++i) {
    const auto& c = SpanColumns(true, false)[i];
    cols += fmt::format("{}{} {}", i ? ", " : "", c.name, TableType(c.logical, caps));
  }
  Q(fmt::format("CREATE DATABASE {}", kDatabase));
  Q(
      fmt::format("CREATE TABLE {}.spans ({}) ENGINE = MergeTree PARTITION BY toDate(timestamp) "
                  "ORDER BY (toStartOfHour(timestamp), trace_id)",
                  kDatabase, cols));
  Q(fmt::format(
      "INSERT INTO {}.spans (timestamp, trace_id, span_id, name, start_time, duration_ns) "
      "VALUES (1700000000, unhex('0102030405060708090a0b0c0d0e0f10'), unhex('0102030405060708'), "
      "'old', 1700000000000000000, 5)",
      kDatabase));
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(
      Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' AND table = 'spans'",
                    kDatabase)),
      std::to_string(SpanColumns(true, true, true).size() + SpanIdAliases().size()) + "\n");
  EXPECT_EQ(Q(fmt::format("SELECT name, duration_ns, length(attr_keys) FROM {}.spans", kDatabase)),
            "old\t5\t0\n");
  // New rows still go in next to the old one.
  WriteAll(testdata::SampleBatch(1), caps);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.spans", kDatabase)), "4\n");
}

// An older data directory: its layout (Schema4Layout or Schema5Layout),
// loadgen traces of the last hour written as that schema's writer did
// (schema 4: user-field values in the arrays too), in two inserts. Returns
// the spans written.
SpanBatch MakeOlder(Capabilities* caps, size_t traces, const StorageLayout& layout,
                    UserFieldValues values) {
  SchemaOptions older;
  older.layout = layout;
  EXPECT_TRUE(EnsureSchema(*Engine::conn, caps, older).ok());
  loadgen::TraceGenerator gen(loadgen::CorpusOptions{9});
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  SpanBatch a;
  SpanBatch b;
  for (size_t t = 0; t < traces; ++t) {
    gen.AppendTrace(now - 1800000000000ull + t * 20000000ull, t % 2 == 0 ? &a : &b);
  }
  WriteAll(a, *caps, values, layout.extras_column, layout.span_ids_column, layout.attr_columns);
  WriteAll(b, *caps, values, layout.extras_column, layout.span_ids_column, layout.attr_columns);
  a.Append(b);
  return a;
}

SpanBatch MakeVersion4(Capabilities* caps, size_t traces) {
  return MakeOlder(caps, traces, Schema4Layout(), UserFieldValues::kInArrays);
}

// What an upgrade must keep: every spans row with every column (a hash
// over all of them, in schema 8's columns: a table with schema 7's rare
// columns gives the extras value the engine makes of them), the traces in
// trace_index, the views' sums.
std::string Fingerprint() {
  const bool rare = Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' AND "
                                  "table = 'spans' AND name = 'event_times'",
                                  kDatabase)) == "1\n";
  std::string cols;
  // Both ids as span_id and parent_span_id: columns before schema 11,
  // aliases of span_ids since.
  for (const auto& c : SpanColumns(true, false)) {
    std::string expr = c.name;
    if (c.logical == Logical::kJson) expr = "toString(user_fields)";
    if (c.id == Col::kExtras && rare) expr = ExtrasFromRareColumns();
    cols += fmt::format("{}{}", cols.empty() ? "" : ", ", expr);
  }
  const bool short_ids = Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' "
                                       "AND table = 'trace_index' AND name = 'trace_id8'",
                                       kDatabase)) == "1\n";
  return Q(fmt::format(
      "SELECT (SELECT count() FROM {0}.spans), (SELECT sum(cityHash64({1})) FROM {0}.spans), "
      "(SELECT uniqExact(substring({2}, 1, 8)) FROM {0}.trace_index), "
      "(SELECT sum(calls) FROM {0}.red_1m), (SELECT count() FROM (SELECT DISTINCT service_name, "
      "name, kind FROM {0}.operations))",
      kDatabase, cols, short_ids ? "trace_id8" : "trace_id"));
}

void ExpectUpgraded(const SpanBatch& old, const Capabilities& caps, const std::string& before) {
  // Each day copied is one part, merged.
  EXPECT_EQ(Q(fmt::format("SELECT count() = uniqExact(partition) FROM system.parts WHERE "
                          "database = '{}' AND table = 'spans' AND active",
                          kDatabase)),
            "1\n");
  EXPECT_EQ(Q(fmt::format("SELECT sorting_key, engine_full LIKE '%index_granularity = 4096,%' "
                          "FROM system.tables WHERE database = '{}' AND name = 'spans'",
                          kDatabase)),
            "timestamp, trace_id, start_time\t1\n");
  EXPECT_EQ(Q(fmt::format("SELECT type FROM system.columns WHERE database = '{}' AND table = "
                          "'spans' AND name = 'resource_id'",
                          kDatabase)),
            "LowCardinality(UInt64)\n");
  EXPECT_EQ(Q(fmt::format("SELECT groupArray(name) FROM (SELECT name FROM system.columns WHERE "
                          "database = '{}' AND table = 'trace_index' ORDER BY position)",
                          kDatabase)),
            "['day','trace_id8','start_s','end_s']\n");
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM system.tables WHERE database = '{}' AND name LIKE "
                          "'%before_upgrade'",
                          kDatabase)),
            "0\n");
  // Schema 8's columns: extras, none of the 21 it holds; schema 11's
  // span_ids, the two ids its aliases (last); schema 12's attribute columns.
  std::string want;
  for (const auto& c : SpanColumns(true, true, true)) {
    want += fmt::format("{}{}", want.empty() ? "" : ",", c.name);
  }
  want += ",span_id,parent_span_id";
  EXPECT_EQ(Q(fmt::format("SELECT arrayStringConcat(groupArray(name), ',') FROM (SELECT name "
                          "FROM system.columns WHERE database = '{}' AND table = 'spans' ORDER "
                          "BY position)",
                          kDatabase)),
            want + "\n");
  EXPECT_EQ(Q(fmt::format("SELECT max(version) FROM {}.schema_version", kDatabase)),
            fmt::format("{}\n", kSchemaVersion));
  // Every row kept, nothing counted twice by the views.
  EXPECT_EQ(Fingerprint(), before);
  // The old rows read back exactly (their user-field values in the arrays).
  ChdbSpanReader reader(*Engine::conn, caps);
  std::set<TraceId> ids(old.spans.trace_id.begin(), old.spans.trace_id.end());
  std::string why;
  for (const TraceId& id : ids) {
    SpanBatch out;
    Status st = reader.GetTrace(id, &out);
    ASSERT_TRUE(st.ok()) << ToHex(id) << ": " << st.message();
    ASSERT_TRUE(TraceAsRead(old, id).LogicallyEquals(out, &why)) << ToHex(id) << ": " << why;
  }
  // New spans go in the new way, next to the old; the views feed on.
  SpanBatch fresh = testdata::SampleBatch(1, old.spans.start_ns[0] + 5000000);
  fresh.spans.trace_id[0] = fresh.spans.trace_id[1] = fresh.spans.trace_id[2] =
      testdata::MakeTraceId(250);
  WriteAll(fresh, caps);
  SpanBatch out;
  ASSERT_TRUE(reader.GetTrace(testdata::MakeTraceId(250), &out).ok());
  EXPECT_TRUE(fresh.LogicallyEquals(out, &why)) << why;
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kDatabase)),
            fmt::format("{}\n", old.span_count() + 3));
  EXPECT_EQ(Q(fmt::format("SELECT countIf(bitAnd(t, 128) != 0) > 0 FROM {}.spans ARRAY JOIN "
                          "attr_types AS t",
                          kDatabase)),
            "1\n");
}

TEST(ChdbSchema, Version4DataDirectoryIsUpgradedKeepingEveryRow) {
  Reset();
  Capabilities caps;
  const SpanBatch old = MakeVersion4(&caps, 60);
  const std::string before = Fingerprint();
  ASSERT_NE(before.substr(0, 2), "0\t");
  // Schema 4's rows keep user-field values in the arrays: nothing marked.
  EXPECT_EQ(Q(fmt::format("SELECT countIf(bitAnd(t, 128) != 0) FROM {}.spans ARRAY JOIN "
                          "attr_types AS t",
                          kDatabase)),
            "0\n");
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectUpgraded(old, caps, before);
  // The next start finds nothing to do.
  const std::string after = Fingerprint();
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Fingerprint(), after);
}

// Schema 5 -> 6: the granules change, so the spans table is copied again
// (trace_index stays), resource_id becomes LowCardinality on the way.
TEST(ChdbSchema, Version5DataDirectoryIsUpgradedKeepingEveryRow) {
  Reset();
  Capabilities caps;
  const SpanBatch old = MakeOlder(&caps, 60, Schema5Layout(), UserFieldValues::kMarked);
  const std::string before = Fingerprint();
  ASSERT_NE(before.substr(0, 2), "0\t");
  EXPECT_EQ(Q(fmt::format("SELECT type, engine_full LIKE '%index_granularity = 32768%' FROM "
                          "system.columns JOIN system.tables ON system.columns.database = "
                          "system.tables.database AND system.columns.table = system.tables.name "
                          "WHERE database = '{}' AND table = 'spans' AND name = 'resource_id'",
                          kDatabase)),
            "UInt64\t1\n");
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectUpgraded(old, caps, before);
}

// Schema 7 -> 8: the 21 rare columns become extras, by a copy; every
// event, link and scope attribute reads back.
TEST(ChdbSchema, Version7DataDirectoryIsUpgradedKeepingEveryRow) {
  Reset();
  Capabilities caps;
  const SpanBatch old = MakeOlder(&caps, 60, Schema7Layout(), UserFieldValues::kMarked);
  size_t events = 0;
  size_t links = 0;
  for (uint32_t i = 0; i < old.span_count(); ++i) {
    events += old.spans.events[i].size();
    links += old.spans.links[i].size();
  }
  ASSERT_GT(events, 0u);
  ASSERT_GT(links, 0u);
  EXPECT_EQ(Q(fmt::format("SELECT sum(length(event_times)), sum(length(link_trace_ids)) FROM "
                          "{}.spans",
                          kDatabase)),
            fmt::format("{}\t{}\n", events, links));
  const std::string before = Fingerprint();
  ASSERT_NE(before.substr(0, 2), "0\t");
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectUpgraded(old, caps, before);
  EXPECT_EQ(Q(fmt::format("SELECT countIf(extras != '') > 0 FROM {}.spans", kDatabase)), "1\n");
}

// Schema 8 -> 9: spans sorted by the second first, by a copy; every trace
// reads back whole.
TEST(ChdbSchema, Version8DataDirectoryIsUpgradedKeepingEveryRow) {
  Reset();
  Capabilities caps;
  const SpanBatch old = MakeOlder(&caps, 60, Schema8Layout(), UserFieldValues::kMarked);
  EXPECT_EQ(Q(fmt::format("SELECT sorting_key FROM system.tables WHERE database = '{}' AND name "
                          "= 'spans'",
                          kDatabase)),
            "toStartOfHour(timestamp), trace_id, start_time\n");
  const std::string before = Fingerprint();
  ASSERT_NE(before.substr(0, 2), "0\t");
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectUpgraded(old, caps, before);
}

// Schema 10 -> 11: span_id and parent_span_id become span_ids, by a copy;
// every trace reads back with its parent ids.
TEST(ChdbSchema, Version10DataDirectoryIsUpgradedKeepingEveryRow) {
  Reset();
  Capabilities caps;
  const SpanBatch old = MakeOlder(&caps, 60, Schema10Layout(), UserFieldValues::kMarked);
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' AND table = "
                          "'spans' AND name = 'span_ids'",
                          kDatabase)),
            "0\n");
  size_t children = 0;
  for (uint32_t i = 0; i < old.span_count(); ++i) {
    children += old.spans.parent_span_id[i] != SpanId{} ? 1 : 0;
  }
  ASSERT_GT(children, 0u);
  const std::string before = Fingerprint();
  ASSERT_NE(before.substr(0, 2), "0\t");
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectUpgraded(old, caps, before);
  // The aliases are what the table's two id columns were.
  EXPECT_EQ(Q(fmt::format("SELECT countIf(parent_span_id != toFixedString(unhex("
                          "'0000000000000000'), 8)), countIf(span_ids = concat(span_id, "
                          "parent_span_id)) FROM {}.spans",
                          kDatabase)),
            fmt::format("{}\t{}\n", children + 2, old.span_count() + 3));
  bool has = false;
  ASSERT_TRUE(SpansHaveSpanIds(*Engine::conn, kDatabase, &has).ok());
  EXPECT_TRUE(has);
}

// An upgrade stopped part-way (after the renames, the new tables half
// filled) is finished by the next start, every row there once.
TEST(ChdbSchema, Version4UpgradeStoppedPartWayIsFinishedByTheNextStart) {
  Reset();
  Capabilities caps;
  const SpanBatch old = MakeVersion4(&caps, 40);
  const std::string before = Fingerprint();
  for (const char* view : {"trace_index_mv", "red_1m_mv", "operations_mv"}) {
    Q(fmt::format("DROP VIEW {}.{}", kDatabase, view));
  }
  Q(fmt::format("RENAME TABLE {0}.spans TO {0}.spans_before_upgrade", kDatabase));
  Q(fmt::format("RENAME TABLE {0}.trace_index TO {0}.trace_index_before_upgrade", kDatabase));
  // As the upgrade makes them: user_fields stays the older table's JSON.
  SchemaOptions json;
  json.layout = Schema12Layout();
  for (const std::string& sql : SchemaDdl(caps, json)) {
    if (sql.find(".spans (") != std::string::npos ||
        sql.find(".trace_index (") != std::string::npos) {
      Q(sql);
    }
  }
  // Its rows with this schema's columns (the old table has the rare ones
  // and both ids in columns of their own).
  std::string names;
  std::string exprs;
  for (const auto& c : SpanColumns()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", c.name);
    std::string expr = c.name;
    if (c.id == Col::kExtras) expr = ExtrasFromRareColumns();
    if (c.id == Col::kSpanIds) expr = "concat(span_id, parent_span_id)";
    exprs += fmt::format("{}{}", exprs.empty() ? "" : ", ", expr);
  }
  Q(fmt::format("INSERT INTO {0}.spans ({1}) SELECT {2} FROM {0}.spans_before_upgrade LIMIT 25",
                kDatabase, names, exprs));
  Q(
      fmt::format("INSERT INTO {0}.trace_index SELECT day, substring(trace_id, 1, 8), 1, 2 FROM "
                  "{0}.trace_index_before_upgrade LIMIT 5",
                  kDatabase));
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  ExpectUpgraded(old, caps, before);
}

TEST(ChdbSchema, Version1ResourceColumnsMoveToTheResourcesTable) {
  Reset();
  // Schema 1 kept the resource's attributes in every span row.
  Capabilities caps = Capabilities::FromVersion("26.5");
  std::string cols;
  for (const auto& c : ReadColumns()) {
    if (c.id == Col::kResourceId) continue;
    cols += fmt::format("{}{} {}", cols.empty() ? "" : ", ", c.name, TableType(c.logical, caps));
  }
  Q(fmt::format("CREATE DATABASE {}", kDatabase));
  Q(
      fmt::format("CREATE TABLE {}.spans ({}) ENGINE = MergeTree PARTITION BY toDate(timestamp) "
                  "ORDER BY (toStartOfHour(timestamp), trace_id)",
                  kDatabase, cols));
  // The rest of the schema as it was (the spans table above stays).
  for (const auto& sql : SchemaDdl(caps)) Q(sql);
  // Three spans of one trace; two share a resource.
  Q(fmt::format(
      "INSERT INTO {}.spans (timestamp, trace_id, span_id, name, start_time, duration_ns, "
      "service_name, resource_attr_keys, resource_attr_types, resource_attr_values, "
      "resource_schema_url) VALUES "
      "(1700000000, unhex('0102030405060708090a0b0c0d0e0f10'), unhex('0000000000000001'), 'a', "
      "1700000000000000000, 5, 'cart', ['service.name','pod'], [1,1], ['cart','cart-1'], 'u1'), "
      "(1700000000, unhex('0102030405060708090a0b0c0d0e0f10'), unhex('0000000000000002'), 'b', "
      "1700000000000000001, 5, 'cart', ['service.name','pod'], [1,1], ['cart','cart-1'], 'u1'), "
      "(1700000000, unhex('0102030405060708090a0b0c0d0e0f10'), unhex('0000000000000003'), 'c', "
      "1700000000000000002, 5, 'db', ['service.name','cores'], [1,3], ['db','8'], '')",
      kDatabase));
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();

  EXPECT_EQ(Q(fmt::format("SELECT count() FROM system.columns WHERE database = '{}' AND table = "
                          "'spans' AND name LIKE 'resource_attr%'",
                          kDatabase)),
            "0\n");
  EXPECT_EQ(Q(fmt::format("SELECT count(), uniqExact(resource_id), countIf(resource_id = 0) FROM "
                          "{}.spans",
                          kDatabase)),
            "3\t2\t0\n");
  EXPECT_EQ(Q(fmt::format("SELECT service_name, attr_keys, attr_values, schema_url FROM "
                          "{}.resources ORDER BY service_name",
                          kDatabase)),
            "cart\t['service.name','pod']\t['cart','cart-1']\tu1\n"
            "db\t['service.name','cores']\t['db','8']\t\n");

  // Reads join the resource back onto every span.
  ChdbSpanReader reader(*Engine::conn, caps);
  SpanBatch out;
  TraceId id;
  ASSERT_TRUE(FromHex("0102030405060708090a0b0c0d0e0f10", id.data(), 16));
  st = reader.GetTrace(id, &out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out.span_count(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    const Range r = out.resources.attrs[out.spans.resource[i]];
    ASSERT_EQ(r.size(), 2u) << i;
    EXPECT_EQ(out.Str(out.resource_attrs.value[r.begin]), i < 2 ? "cart" : "db");
    EXPECT_EQ(out.Str(out.resource_attrs.value[r.begin + 1]), i < 2 ? "cart-1" : "8");
    EXPECT_EQ(out.resource_attrs.type[r.begin + 1], i < 2 ? ValueType::kString : ValueType::kInt);
  }
  uint64_t n = 0;
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kResource, "pod", "cart-1", &n).ok());
  EXPECT_EQ(n, 2u);
  // Running it again finds nothing to move.
  ASSERT_TRUE(EnsureSchema(*Engine::conn, &caps).ok());
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.resources", kDatabase)), "2\n");
}

}  // namespace
}  // namespace spanhouse::storage
