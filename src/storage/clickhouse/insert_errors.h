// Which failed inserts a retry can fix. The engine reports errors as text
// ("Code: 252. DB::Exception: Too many parts ..."); the code decides.
#pragma once

#include <string_view>

#include "common/status.h"

namespace spanhouse::storage {

enum class InsertError {
  kRetryable,  // the engine is busy, short of memory or disk, or timed out: retry with backoff
  kPermanent,  // the block itself is bad (types, values, layout): retrying cannot help
  kUnknown,    // neither list: retried a bounded number of times, then treated as permanent
};

// The ClickHouse error code in `message` ("Code: N."), or -1.
int ClickHouseErrorCode(std::string_view message);

InsertError ClassifyInsertError(const Status& st);

}  // namespace spanhouse::storage
