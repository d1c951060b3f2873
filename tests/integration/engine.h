// The one chDB engine of the integration_test process, shared by every test
// file: chDB runs one engine per process, so one global Environment opens it
// and every test resets the database it uses.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

class Engine : public ::testing::Environment {
 public:
  static inline std::unique_ptr<ChdbConnection> conn;
  static inline std::string dir;

  void SetUp() override {
    dir = (std::filesystem::temp_directory_path() / ("spanhouse-it-" + std::to_string(::getpid())))
              .string();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::shared_ptr<ChdbLibrary> lib;
    Status st = ChdbLibrary::Load(&lib);
    ASSERT_TRUE(st.ok()) << st.message();
    st = ChdbConnection::Open(lib, dir + "/clickhouse", {}, &conn);
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

}  // namespace spanhouse::storage
