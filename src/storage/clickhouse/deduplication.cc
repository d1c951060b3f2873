#include "storage/clickhouse/deduplication.h"

#include <fmt/format.h>

namespace spanhouse::storage {

Status EnableInsertDeduplication(SqlConnection& conn, const Capabilities& caps, uint64_t window,
                                 std::string_view database) {
  // Deduplication tokens came with 22.2; older engines store a retried
  // block twice, as before.
  if (!caps.dedup_token) return Status::Ok();
  for (const char* table :
       {"spans", "trace_index", "red_1m", "red_service_1m", "operations", "sampled_spans"}) {
    const Status st = conn.Query(
        fmt::format("ALTER TABLE {}.{} MODIFY SETTING non_replicated_deduplication_window = {}",
                    database, table, window),
        "");
    if (!st.ok()) {
      return Status::Internal(fmt::format("deduplication window on {}: {}", table, st.message()));
    }
  }
  return Status::Ok();
}

}  // namespace spanhouse::storage
