// A second database in the same engine (SchemaOptions::database and the
// readers' options): how a second embedded sink is tested. Its tables and
// views are its own, its views fill its own tables, and the first database
// is left as it was.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../testdata/sample_batch.h"
#include "integration/engine.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/chdb_span_reader.h"
#include "storage/clickhouse/deduplication.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {
namespace {

constexpr std::string_view kSecond = "spanhouse_test_b";

// The tables every schema makes, views' targets and the catalog included.
constexpr const char* kDataTables[] = {"spans",          "resources",       "trace_index", "red_1m",
                                       "red_service_1m", "dependencies_1m", "operations"};

// "name\tengine" of every table and view of `db`, in name order.
std::string Tables(std::string_view db) {
  return Q(fmt::format("SELECT name, engine FROM system.tables WHERE database = '{}' ORDER BY name",
                       db));
}

TEST(SecondDatabase, IsAStoreOfItsOwn) {
  Reset();
  Q(fmt::format("DROP DATABASE IF EXISTS {}", kSecond));
  Capabilities caps;
  Status st = EnsureSchema(*Engine::conn, &caps);
  ASSERT_TRUE(st.ok()) << st.message();
  const std::string first = Q(fmt::format(
      "SELECT name, create_table_query FROM system.tables WHERE database = '{}' ORDER BY name",
      kDatabase));

  SchemaOptions options;
  options.database = std::string(kSecond);
  st = EnsureSchema(*Engine::conn, &caps, options);
  ASSERT_TRUE(st.ok()) << st.message();
  // Every table and view of the first, and again at the next start.
  EXPECT_EQ(Tables(kSecond), Tables(kDatabase));
  EXPECT_NE(Tables(kSecond).find("trace_index_mv\tMaterializedView"), std::string::npos);
  st = EnsureSchema(*Engine::conn, &caps, options);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.schema_version", kSecond)), "1\n");
  // Each view reads and feeds its own database's tables.
  const std::string views = Q(
      fmt::format("SELECT create_table_query FROM system.tables WHERE database = '{}' AND engine = "
                  "'MaterializedView'",
                  kSecond));
  EXPECT_EQ(views.find(fmt::format("{}.", kDatabase)), std::string::npos) << views;
  EXPECT_NE(views.find(fmt::format("TO {}.trace_index", kSecond)), std::string::npos) << views;

  // Spans of the last hour (inside the metrics' retention).
  const auto now_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  const uint64_t base_ns = (now_ns - 3600ull * 1000000000) / 60000000000 * 60000000000;
  const SpanBatch in = testdata::SampleBatch(2, base_ns);
  StoreBatch(kSecond, in, caps);

  // A reader on the second database reads them back, resources and all.
  ChdbSpanReader reader(*Engine::conn, caps, {}, {}, std::string(kSecond));
  SpanBatch out;
  for (uint8_t t = 0; t < 2; ++t) {
    st = reader.GetTrace(testdata::MakeTraceId(t), &out);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  std::string why;
  EXPECT_TRUE(in.LogicallyEquals(out, &why)) << why;
  uint64_t n = 0;
  ASSERT_TRUE(
      reader.CountSpansWithAttr(ChdbSpanReader::AttrOwner::kResource, "service.name", "db", &n)
          .ok());
  EXPECT_EQ(n, 2u);
  std::vector<std::string> services;
  ASSERT_TRUE(reader.GetServices(&services).ok());
  EXPECT_EQ(services, (std::vector<std::string>{"db", "frontend"}));
  // Its views filled its own tables; the dependency job and the
  // deduplication window reach its tables alone.
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_1m", kSecond)), "6\n");
  EXPECT_EQ(Q(fmt::format("SELECT sum(calls) FROM {}.red_service_1m", kSecond)), "6\n");
  EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.trace_index", kSecond)), "2\n");
  const auto from_s = static_cast<uint32_t>(base_ns / 1000000000);
  st = ComputeDependencies(*Engine::conn, from_s, from_s + 120, kParentsBeforeS, kParentsAfterS,
                           kSecond);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(fmt::format("SELECT parent, child, sum(calls) FROM {}.dependencies_1m GROUP BY "
                          "parent, child",
                          kSecond)),
            "frontend\tdb\t2\n");
  std::vector<query::DependencyLink> links;
  ASSERT_TRUE(reader.GetDependencies(from_s, from_s + 120, &links).ok());
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].calls, 2u);
  st = EnableInsertDeduplication(*Engine::conn, caps, 1234, kSecond);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(Q(fmt::format("SELECT countIf(engine_full LIKE '%deduplication_window = 1234%') FROM "
                          "system.tables WHERE database = '{}' AND name = 'spans'",
                          kSecond)),
            "1\n");

  // The first database is as it was: the same tables, none of the rows.
  EXPECT_EQ(Q(fmt::format(
                "SELECT name, create_table_query FROM system.tables WHERE database = '{}' ORDER BY "
                "name",
                kDatabase)),
            first);
  for (const char* table : kDataTables) {
    EXPECT_EQ(Q(fmt::format("SELECT count() FROM {}.{}", kDatabase, table)), "0\n") << table;
  }
  ChdbSpanReader first_reader(*Engine::conn, caps);
  SpanBatch none;
  EXPECT_EQ(first_reader.GetTrace(testdata::MakeTraceId(0), &none).code(), StatusCode::kNotFound);
  Q(fmt::format("DROP DATABASE {}", kSecond));
}

TEST(SecondDatabase, NameMustBeAPlainIdentifier) {
  for (const char* name : {"", "1db", "db-b", "db.b", "db`b", "db b"}) {
    SchemaOptions options;
    options.database = name;
    Capabilities caps;
    EXPECT_EQ(EnsureSchema(*Engine::conn, &caps, options).code(), StatusCode::kInvalidArgument)
        << name;
  }
}

}  // namespace
}  // namespace spanhouse::storage
