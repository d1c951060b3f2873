// A connection that runs one SQL statement at a time: what the writers and
// readers need of a ClickHouse, whichever carries it (chDB in the process;
// tests' fakes).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  // Closes the connection; later statements fail.
  virtual void Close() = 0;
};

}  // namespace spanhouse::storage
