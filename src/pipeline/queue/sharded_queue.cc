#include "pipeline/queue/sharded_queue.h"

#include <cstring>

namespace spanhouse::pipeline {

size_t ShardOf(const TraceId& id, size_t shards) {
  if (shards <= 1) return 0;
  uint64_t lo;
  uint64_t hi;
  std::memcpy(&hi, id.data(), 8);
  std::memcpy(&lo, id.data() + 8, 8);
  // A 64-bit mix (murmur3 finalizer): ids from some SDKs are not uniformly random.
  uint64_t h = lo ^ (hi * 0x9e3779b97f4a7c15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return static_cast<size_t>(h % shards);
}

ShardedQueue::ShardedQueue(size_t shards, size_t max_bytes_per_shard) {
  for (size_t i = 0; i < std::max<size_t>(1, shards); ++i) {
    shards_.push_back(std::make_unique<SpanQueue>(max_bytes_per_shard));
  }
}

SpanQueue::PushResult ShardedQueue::Push(std::unique_ptr<SpanBatch> batch, Reservation reservation,
                                         durable::SegmentLog::Ref ref) {
  const size_t n = shards_.size();
  if (n == 1) return shards_[0]->TryPush(batch, reservation, &ref);

  std::vector<std::vector<uint32_t>> which(n);
  for (uint32_t i = 0; i < batch->span_count(); ++i) {
    which[ShardOf(batch->spans.trace_id[i], n)].push_back(i);
  }
  std::vector<std::pair<size_t, std::unique_ptr<SpanBatch>>> parts;
  for (size_t s = 0; s < n; ++s) {
    if (which[s].empty()) continue;
    if (which[s].size() == batch->span_count()) {  // the whole batch is one shard's
      parts.emplace_back(s, std::move(batch));
      break;
    }
    auto part = std::make_unique<SpanBatch>();
    part->AppendSpans(*batch, which[s].data(), which[s].size());
    parts.emplace_back(s, std::move(part));
  }
  // Share the reservation out by size.
  size_t total = 0;
  for (auto& [s, part] : parts) total += part->MemoryBytes();
  const size_t reserved = reservation.bytes();
  SpanQueue::PushResult result = SpanQueue::PushResult::kOk;
  for (size_t k = 0; k < parts.size(); ++k) {
    auto& [s, part] = parts[k];
    const size_t bytes = k + 1 == parts.size()  // the last part takes the rest
                             ? reservation.bytes()
                             : (total == 0 ? 0 : reserved * part->MemoryBytes() / total);
    Reservation share = reservation.Split(bytes);
    durable::SegmentLog::Ref part_ref = ref.Clone();
    SpanQueue::PushResult r = shards_[s]->TryPush(part, share, &part_ref);
    if (r != SpanQueue::PushResult::kOk) result = r;
  }
  // Each queued part holds the record's segment now; a part not queued keeps
  // its hold (and so the record, for the next start).
  if (result == SpanQueue::PushResult::kOk) ref.Done();
  return result;
}

void ShardedQueue::Close() {
  for (auto& q : shards_) q->Close();
}

size_t ShardedQueue::bytes() const {
  size_t b = 0;
  for (const auto& q : shards_) b += q->bytes();
  return b;
}

}  // namespace spanhouse::pipeline
