// Insert deduplication for the durable queue's retries and replays: the
// writer gives each logged block an insert_deduplication_token, and the
// engine keeps the last `window` tokens per table (a non-replicated
// MergeTree keeps none by default), so a block inserted again after an
// ambiguous failure or a crash is stored once. The tables the spans
// table's views feed (trace_index, red_1m, operations) keep tokens too, as
// the views pass them on (deduplicate_blocks_in_dependent_materialized_views),
// or a replayed block would count its spans twice in red_1m. So does
// sampled_spans, which the writer inserts with the spans' token (tokens are
// kept per table, and the views into red_1m from either table are told apart).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

// Enough for hours of blocks (a writer inserts about one per second per
// shard); a replay comes right after the restart.
inline constexpr uint64_t kDeduplicationWindow = 10000;

// Sets non_replicated_deduplication_window on `database`'s tables (a
// metadata-only ALTER, done at every start; a no-op where it is set already).
Status EnableInsertDeduplication(SqlConnection& conn, const Capabilities& caps,
                                 uint64_t window = kDeduplicationWindow,
                                 std::string_view database = kDatabase);

}  // namespace spanhouse::storage
