#include "sink/sharded_queue.h"

#include <cstring>

namespace spanhouse::sink {

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

Status ShardedQueue::PushTo(size_t shard, QueuedBatch& item) {
  return shards_[shard % shards_.size()]->Push(item);
}

Status ShardedQueue::Push(QueuedBatch& item) {
  const size_t n = shards_.size();
  if (item.block != nullptr) return shards_[0]->Push(item);
  if (n == 1) return shards_[0]->Push(item);

  SpanBatch& batch = *item.batch;
  std::vector<std::vector<uint32_t>> which(n);
  for (uint32_t i = 0; i < batch.span_count(); ++i) {
    which[ShardOf(batch.spans.trace_id[i], n)].push_back(i);
  }
  for (size_t s = 0; s < n; ++s) {
    if (which[s].size() == batch.span_count()) return shards_[s]->Push(item);  // one shard's
  }
  std::vector<std::pair<size_t, std::unique_ptr<SpanBatch>>> parts;
  size_t total = 0;
  for (size_t s = 0; s < n; ++s) {
    if (which[s].empty()) continue;
    auto part = std::make_unique<SpanBatch>();
    part->AppendSpans(batch, which[s].data(), which[s].size());
    total += part->MemoryBytes();
    parts.emplace_back(s, std::move(part));
  }
  // Share the reservation out by size.
  const size_t reserved = item.reservation.bytes();
  Status result;
  size_t pushed = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    auto& [s, part] = parts[k];
    QueuedBatch q;
    const size_t bytes = k + 1 == parts.size()  // the last part takes the rest
                             ? item.reservation.bytes()
                             : (total == 0 ? 0 : reserved * part->MemoryBytes() / total);
    q.reservation = item.reservation.Split(bytes);
    q.ticket = item.ticket.Clone();
    q.batch = std::move(part);
    if (Status st = shards_[s]->Push(q); !st.ok()) {
      result = st;
    } else {
      ++pushed;
    }
  }
  // Each queued part holds the record now; after a refusal the item's own
  // ticket is kept unacked (and so the record, for the next start). Some
  // parts taken: the item cannot be offered again whole.
  if (result.ok()) item.ticket.Ack();
  if (!result.ok() && pushed > 0) return Status::Unavailable(result.message());
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

}  // namespace spanhouse::sink
