// The one chDB engine of the integration_test process, shared by every test
// file: chDB runs one engine per process, so one global Environment opens it
// and every test resets the database it uses. It boots as `spanhouse serve`
// boots it, with the engine configuration serve writes (engine_config.h):
// the tiered storage policy, its cold volume a directory beside the data.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "integration/writer_harness.h"
#include "sink/span_queue.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/dependencies.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/engine_config.h"
#include "storage/clickhouse/row_formats.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/span_block.h"

namespace spanhouse::storage {

class Engine : public ::testing::Environment {
 public:
  static constexpr uint64_t kZstdMinPartBytes = 1u << 20;
  static inline std::unique_ptr<ChdbConnection> conn;
  static inline std::string dir;
  static inline std::string cold_dir;

  void SetUp() override {
    dir = (std::filesystem::temp_directory_path() / ("spanhouse-it-" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    cold_dir = dir + "/cold";
    TieringOptions tiering;
    tiering.cold_path = cold_dir;
    // Parts from kZstdMinPartBytes on are ZSTD, smaller ones LZ4 (serve's
    // rule, with a threshold a test reaches with a few thousand spans).
    CompressionOptions compression;
    compression.zstd_min_part_bytes = kZstdMinPartBytes;
    Status st = WriteEngineConfig(dir + "/clickhouse-config.xml", tiering, compression);
    ASSERT_TRUE(st.ok()) << st.message();
    std::shared_ptr<ChdbLibrary> lib;
    st = ChdbLibrary::Load(&lib);
    ASSERT_TRUE(st.ok()) << st.message();
    st = ChdbConnection::Open(lib, dir + "/clickhouse", EngineArgs(dir + "/clickhouse-config.xml"),
                              &conn);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void TearDown() override {
    if (conn) conn->Close();
    conn.reset();
    std::filesystem::remove_all(dir);
  }
};

// Registered once however many test files include this header.
inline ::testing::Environment* const kEngine = ::testing::AddGlobalTestEnvironment(new Engine);

// Runs `sql` and returns its TSV output; a failure fails the test.
inline std::string Q(const std::string& sql) {
  QueryResult r;
  Status st = Engine::conn->Query(sql, "TSV", &r);
  EXPECT_TRUE(st.ok()) << sql << ": " << st.message();
  return r.data;
}

inline void Reset() {
  Q(fmt::format("DROP DATABASE IF EXISTS {}", kDatabase));
}

// A writer's options on the test engine (its spool directory); with
// `max_rows` set, blocks of that many spans inserted `insert_rows` at a time.
inline WriterOptions TestWriter(size_t max_rows = 0, size_t insert_rows = 0) {
  WriterOptions opts;
  opts.spool_dir = Engine::dir + "/spool";
  if (max_rows != 0) {
    opts.max_rows = max_rows;
    opts.insert_rows = insert_rows;
  }
  return opts;
}

// Stores `b` through the real writer path (a sink of one writer, one flush).
// `values`: the writer's encoding (kInArrays: schema 4's); `extras_column`
// the table's (false: schema 7's rare columns); `span_ids_column` too
// (false: schema 10's two id columns), and `attr_columns` (false: schema
// 11's, without the attribute columns).
inline void WriteAll(const SpanBatch& b, const Capabilities& caps,
                     UserFieldValues values = UserFieldValues::kMarked, bool extras_column = true,
                     bool span_ids_column = true, bool attr_columns = true) {
  WriteOneBatch(Engine::conn.get(), caps, TestWriter(), b,
                LegacyLayout{values, extras_column, span_ids_column, attr_columns});
}

// Runs a DependencyJob with `opts` (interval and lag as the test wants)
// until its first run is done, stops it and checks it had no error.
inline void RunDependencyJobOnce(const DependencyJobOptions& opts) {
  DependencyJob job(*Engine::conn, opts);
  job.Start();
  for (int i = 0; i < 600 && job.runs() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  job.Stop();
  EXPECT_GE(job.runs(), 1u);
  EXPECT_EQ(job.errors(), 0u);
}

// Queues `b` for a writer.
inline Status Enqueue(sink::SpanQueue& q, std::unique_ptr<SpanBatch> b) {
  sink::QueuedBatch item;
  item.batch = std::move(b);
  return q.Push(item);
}

// `n` connections lent by the engine, for a ClickHouse sink of `n` writers
// (their Close leaves the engine's open).
inline std::vector<std::unique_ptr<SqlConnection>> LentConnections(size_t n = 1) {
  return Borrow(Engine::conn.get(), n);
}

// Inserts a Native block into `db`.`table` as the writer does: from a file.
inline void InsertNativeBlock(std::string_view db, std::string_view table, const std::string& block,
                              const Capabilities& caps) {
  const std::string path = fmt::format("{}/{}.{}.native", Engine::dir, db, table);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(block.data(), 1, block.size(), f), block.size());
  ASSERT_EQ(std::fclose(f), 0);
  const Status st =
      Engine::conn->Query(InsertFromFileSql(fmt::format("{}.{}", db, table), RowFormat::kNative,
                                            caps, FileStructure::kTable),
                          "", nullptr, {{"path", path}});
  std::remove(path.c_str());
  ASSERT_TRUE(st.ok()) << st.message();
}

// The spans of `b` and their resources, stored in `db`.
inline void StoreBatch(std::string_view db, const SpanBatch& b, const Capabilities& caps) {
  const std::vector<uint64_t> ids = ResourceIds(b);
  std::string spans;
  EncodeSpanBlock(b, caps, &spans, &ids);
  InsertNativeBlock(db, "spans", spans, caps);
  std::vector<uint32_t> which;
  for (uint32_t r = 0; r < b.resources.attrs.size(); ++r) which.push_back(r);
  std::string resources;
  const auto now_s = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  EncodeResourceBlock(b, which, ids, now_s, caps, &resources);
  InsertNativeBlock(db, "resources", resources, caps);
}

}  // namespace spanhouse::storage
