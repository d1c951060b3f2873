// Embedded ClickHouse through chDB's C API, loaded with dlopen.
//
// dlopen rather than linking: libchdb.so is 560 MB and lives in a cache
// outside the build tree (scripts/fetch_chdb.sh); loading it at run time lets
// every other command and test run without it, and lets a missing library be
// reported as a clear message instead of a loader error.
//
// One engine per process and one statement at a time per connection
// (docs/decisions/0032-embedded-chdb.md). ChdbConnection serialises its own queries; open a second
// connection for work that must not wait behind the writer.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "storage/clickhouse/sql_connection.h"
#include "storage/clickhouse/tsv.h"

namespace spanhouse::storage {

// The chDB library, loaded once per process.
class ChdbLibrary {
 public:
  // Finds libchdb.so: $SPANHOUSE_CHDB_LIB, else the path fixed at build time
  // (the project's cache), else the loader's search path.
  static Status Load(std::shared_ptr<ChdbLibrary>* out);

  struct Api;
  const Api& api() const { return *api_; }
  ~ChdbLibrary();

 private:
  ChdbLibrary() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

class ChdbConnection final : public SqlConnection {
 public:
  // Opens (and on first use boots) the engine on `data_path`. Extra
  // arguments are passed to chdb_connect as --key=value.
  static Status Open(std::shared_ptr<ChdbLibrary> lib, const std::string& data_path,
                     const std::vector<std::string>& extra_args,
                     std::unique_ptr<ChdbConnection>* out);
  ~ChdbConnection() override;
  ChdbConnection(const ChdbConnection&) = delete;
  ChdbConnection& operator=(const ChdbConnection&) = delete;

  // Runs one statement; `format` names the output format ("" for none).
  Status Query(std::string_view sql, std::string_view format, QueryResult* result = nullptr,
               const std::vector<QueryParam>& params = {});
  Status Run(std::string_view sql, std::string_view format, QueryResult* result,
             const std::vector<QueryParam>& params) override {
    return Query(sql, format, result, params);
  }
  bool local_files() const override { return true; }
  // Closes the connection; the last one closed shuts the engine down.
  void Close() override;

 private:
  ChdbConnection() = default;
  std::shared_ptr<ChdbLibrary> lib_;
  void* conn_ = nullptr;  // chdb_connection*
  std::mutex mu_;         // one statement at a time
};

}  // namespace spanhouse::storage
