#include "storage/clickhouse/insert_errors.h"

#include <algorithm>
#include <charconv>

namespace spanhouse::storage {

namespace {

// Codes from the engine's ErrorCodes.cpp.
constexpr int kRetryableCodes[] = {
    159,   // TIMEOUT_EXCEEDED
    164,   // READONLY (e.g. a disk switched read-only for a moment)
    202,   // TOO_MANY_SIMULTANEOUS_QUERIES
    209,   // SOCKET_TIMEOUT
    210,   // NETWORK_ERROR
    236,   // ABORTED
    241,   // MEMORY_LIMIT_EXCEEDED
    242,   // TABLE_IS_READ_ONLY
    243,   // NOT_ENOUGH_SPACE
    252,   // TOO_MANY_PARTS
    394,   // QUERY_WAS_CANCELLED
    425,   // SYSTEM_ERROR (errno from the OS: ENOSPC, EIO)
    439,   // CANNOT_SCHEDULE_TASK
    473,   // DEADLOCK_AVOIDED
    1000,  // POCO_EXCEPTION (I/O)
};
constexpr int kPermanentCodes[] = {
    6,    // CANNOT_PARSE_TEXT
    16,   // NO_SUCH_COLUMN_IN_TABLE
    20,   // NUMBER_OF_COLUMNS_DOESNT_MATCH
    27,   // CANNOT_PARSE_INPUT_ASSERTION_FAILED
    33,   // CANNOT_READ_ALL_DATA (a truncated block)
    43,   // ILLEGAL_TYPE_OF_ARGUMENT
    53,   // TYPE_MISMATCH
    69,   // ARGUMENT_OUT_OF_BOUND
    70,   // CANNOT_CONVERT_TYPE
    72,   // CANNOT_PARSE_NUMBER
    117,  // INCORRECT_DATA
    128,  // TOO_LARGE_ARRAY_SIZE
    131,  // TOO_LARGE_STRING_SIZE
    190,  // SIZES_OF_ARRAYS_DONT_MATCH
    321,  // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
    349,  // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
    432,  // UNKNOWN_CODEC
    41,   // CANNOT_PARSE_DATETIME
};

}  // namespace

int ClickHouseErrorCode(std::string_view message) {
  const size_t at = message.find("Code: ");
  if (at == std::string_view::npos) return -1;
  const char* begin = message.data() + at + 6;
  int code = -1;
  auto r = std::from_chars(begin, message.data() + message.size(), code);
  return r.ec == std::errc() ? code : -1;
}

InsertError ClassifyInsertError(const Status& st) {
  // Our own failures (the spool file, injected faults) are about the
  // machine, not the data.
  if (st.retryable()) return InsertError::kRetryable;
  const int code = ClickHouseErrorCode(st.message());
  if (code < 0) return InsertError::kRetryable;
  if (std::find(std::begin(kRetryableCodes), std::end(kRetryableCodes), code) !=
      std::end(kRetryableCodes)) {
    return InsertError::kRetryable;
  }
  if (std::find(std::begin(kPermanentCodes), std::end(kPermanentCodes), code) !=
      std::end(kPermanentCodes)) {
    return InsertError::kPermanent;
  }
  return InsertError::kUnknown;
}

}  // namespace spanhouse::storage
