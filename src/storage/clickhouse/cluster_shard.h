// Which shard of a ClickHouse cluster owns a trace: sipHash64(trace_id)
// modulo the number of shards, the same expression the Distributed tables
// are given as their sharding key (kShardingKey), so that spanhouse, which
// writes each shard's local tables directly, and ClickHouse agree, and a
// trace always lives on one shard. SipHash-2-4 with a zero key is what
// every ClickHouse version's sipHash64 computes, 18.16 included.
#pragma once

#include <cstdint>
#include <string_view>

#include "model/span_batch.h"

namespace spanhouse::storage {

inline constexpr std::string_view kShardingKey = "sipHash64(trace_id)";

// SipHash-2-4 of `data` with the key (0, 0): ClickHouse's sipHash64 of a
// String or FixedString holding these bytes.
uint64_t SipHash64(std::string_view data);

// The shard (0-based, in the cluster's order, every shard of weight 1) that
// owns `trace_id` among `shards`.
inline uint32_t ClusterShardOf(const TraceId& trace_id, uint32_t shards) {
  if (shards <= 1) return 0;
  const uint64_t h = SipHash64({reinterpret_cast<const char*>(trace_id.data()), trace_id.size()});
  return static_cast<uint32_t>(h % shards);
}

}  // namespace spanhouse::storage
