#include "storage/clickhouse/embedded_sink.h"

#include <algorithm>
#include <utility>

#include "storage/clickhouse/cluster_shard.h"

namespace spanhouse::storage {

EmbeddedSink::EmbeddedSink(std::vector<std::unique_ptr<SqlConnection>> connections,
                           Capabilities caps, EmbeddedSinkOptions options, const SinkFaults* faults,
                           LegacyLayout layout)
    : connections_(std::move(connections)),
      caps_(caps),
      opts_(std::move(options)),
      faults_(faults),
      layout_(layout),
      queue_(connections_.size(), opts_.queue_bytes) {}

EmbeddedSink::~EmbeddedSink() {
  Drain();
}

Status EmbeddedSink::Start() {
  if (!writers_.empty()) return Status::Ok();
  const size_t n = connections_.size();
  for (size_t i = 0; i < n; ++i) {
    WriterOptions w = opts_.writer;
    // The default sink's writers keep their old names (spool files, logs).
    w.name = opts_.name == "chdb" ? std::to_string(i) : opts_.name + "-" + std::to_string(i);
    w.shard = static_cast<uint32_t>(i);
    w.shards = static_cast<uint32_t>(n);
    w.cursor = cursor_;
    writers_.push_back(std::make_unique<EmbeddedWriter>(
        connections_[i].get(), caps_, queue_.shard(i), std::move(w), &stats_, faults_, layout_));
  }
  for (auto& w : writers_) w->Start();
  return Status::Ok();
}

bool EmbeddedSink::BlockMembers(std::string_view key, const SpanBatch& batch,
                                std::vector<uint32_t>* idx) const {
  InsertKey k;
  if (!k.Decode(key)) return false;
  idx->clear();
  for (uint32_t i = 0; i < batch.span_count(); ++i) {
    if (k.Holds(batch, i)) idx->push_back(i);
  }
  return true;
}

Status EmbeddedSink::Push(sink::QueuedBatch& item) {
  if (opts_.cluster_shards > 1) KeepOwnShard(item);
  if (item.block != nullptr) {
    // To the writer that sealed it, as before (any could: the token makes it once).
    InsertKey k;
    return queue_.PushTo(k.Decode(item.block->key) ? k.shard : 0, item);
  }
  return queue_.Push(item);
}

bool EmbeddedSink::Select(const SpanBatch& b, std::vector<uint32_t>* idx) const {
  if (opts_.cluster_shards <= 1) return false;
  idx->clear();
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    if (ClusterShardOf(b.spans.trace_id[i], opts_.cluster_shards) == opts_.cluster_shard) {
      idx->push_back(i);
    }
  }
  return true;
}

void EmbeddedSink::KeepOwnShard(sink::QueuedBatch& item) const {
  // Keeps the rows of `b` this shard owns; false if it has none. (The
  // durable queue hands a live request's own rows only: then this copies
  // nothing.)
  auto keep = [this](std::unique_ptr<SpanBatch>& b) {
    std::vector<uint32_t> own;
    Select(*b, &own);
    if (own.size() == b->span_count()) return true;
    auto part = std::make_unique<SpanBatch>();
    if (!own.empty()) part->AppendSpans(*b, own.data(), own.size());
    b = std::move(part);
    return !own.empty();
  };
  if (item.block != nullptr) {
    // The same filter the block's first write went through: the same spans.
    auto& parts = item.block->parts;
    std::erase_if(parts, [&](std::unique_ptr<SpanBatch>& p) { return !keep(p); });
    return;
  }
  if (item.batch == nullptr) return;
  keep(item.batch);
  // The memory of the other shards' spans is not this sink's to hold.
  item.reservation.Resize(std::min(item.reservation.bytes(), item.batch->MemoryBytes()));
}

void EmbeddedSink::Drain() {
  queue_.Close();
  for (auto& w : writers_) w->Join();
  for (auto& c : connections_) c->Close();
}

void EmbeddedSink::AppendMetrics(PromText& out) const {
  sink::AppendSinkMetrics(opts_.name, stats_, out);
  const std::string label = PromText::Label("sink", opts_.name);
  const uint64_t sorted = stats_.blocks_sorted.load();
  out.Family("spanhouse_sink_blocks_encoded_total", "counter",
             "Blocks encoded by the writers, by row order: sorted by the table key (a block "
             "inserted alone), or in arrival order (one of an insert's several blocks, which "
             "the engine sorts together).");
  out.Sample("spanhouse_sink_blocks_encoded_total", label + "," + PromText::Label("order", "table"),
             sorted);
  out.Sample("spanhouse_sink_blocks_encoded_total",
             label + "," + PromText::Label("order", "arrival"),
             stats_.blocks_spooled.load() - sorted);
  out.One("spanhouse_sink_spool_files_reused_total", "counter",
          "Encoded blocks written over a spool file an earlier insert was done with (its pages "
          "already cached), not into a new one.",
          label, stats_.spool_files_reused.load());
  out.One("spanhouse_sampled_spans_written_total", "counter",
          "Spans sampled out stored as sampled_spans rows (counted in the RED metrics, the "
          "catalog and the dependency edges; not stored as spans, not in "
          "spanhouse_sink_rows_written_total).",
          label, stats_.sampled_rows_written.load());
  out.One("spanhouse_queue_bytes", "gauge", "Bytes of spans waiting in the sink's queue.", label,
          queue_.bytes());
}

}  // namespace spanhouse::storage
