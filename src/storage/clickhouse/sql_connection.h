// A connection that runs one SQL statement at a time: what the writers and
// readers need of a ClickHouse, whichever carries it (chDB in the process, a
// server over HTTP, tests' fakes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/status.h"

namespace spanhouse::storage {

// What a query returned.
struct QueryResult {
  std::string data;
  uint64_t rows_read = 0;
};

// A named query parameter bound server-side as {name:Type}.
using QueryParam = std::pair<std::string, std::string>;

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  // Runs one statement; `format` names the output format ("" for none).
  virtual Status Run(std::string_view sql, std::string_view format, QueryResult* result,
                     const std::vector<QueryParam>& params) = 0;
  Status Query(std::string_view sql, std::string_view format, QueryResult* result = nullptr,
               const std::vector<QueryParam>& params = {}) {
    return Run(sql, format, result, params);
  }
  // `insert` ("INSERT INTO t FORMAT F") with its rows in `data`, sent as they
  // are (a server over the network); `settings` as name, value. An engine
  // in this process reads its rows from files instead (local_files).
  virtual Status Insert(std::string_view insert, std::string data,
                        const std::vector<QueryParam>& settings = {});
  // Whether the engine reads this process's files (the file() table
  // function): an insert is then read from the writer's spool files, with
  // no copy through the connection.
  virtual bool local_files() const { return false; }
  // Bytes of insert bodies put on the network so far (compressed, every
  // attempt); 0 for an engine in this process.
  virtual uint64_t bytes_sent() const { return 0; }
  // Closes the connection; later statements fail.
  virtual void Close() = 0;
};

inline Status SqlConnection::Insert(std::string_view insert, std::string data,
                                    const std::vector<QueryParam>&) {
  data.clear();  // taken, as by any connection; nothing here sends it
  return Status::Internal(fmt::format("this connection takes no inline rows: {}", insert));
}

// Another's connection lent to one that takes its connections (a sink): it
// forwards every statement, and its Close leaves the lender's open.
class BorrowedConnection final : public SqlConnection {
 public:
  explicit BorrowedConnection(SqlConnection* lender) : lender_(lender) {}
  Status Run(std::string_view sql, std::string_view format, QueryResult* result,
             const std::vector<QueryParam>& params) override {
    return lender_->Run(sql, format, result, params);
  }
  Status Insert(std::string_view insert, std::string data,
                const std::vector<QueryParam>& settings) override {
    return lender_->Insert(insert, std::move(data), settings);
  }
  bool local_files() const override { return lender_->local_files(); }
  uint64_t bytes_sent() const override { return lender_->bytes_sent(); }
  void Close() override {}

 private:
  SqlConnection* lender_;
};

// `n` connections borrowed from `lender`.
inline std::vector<std::unique_ptr<SqlConnection>> Borrow(SqlConnection* lender, size_t n = 1) {
  std::vector<std::unique_ptr<SqlConnection>> out;
  for (size_t i = 0; i < n; ++i) out.push_back(std::make_unique<BorrowedConnection>(lender));
  return out;
}

}  // namespace spanhouse::storage
