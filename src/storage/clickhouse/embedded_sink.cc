#include "storage/clickhouse/embedded_sink.h"

#include <algorithm>
#include <utility>

#include "storage/clickhouse/cluster_shard.h"
#include "storage/clickhouse/insert_errors.h"

namespace spanhouse::storage {

ClickHousePlugin::ClickHousePlugin(std::vector<std::unique_ptr<SqlConnection>> connections,
                                   Capabilities caps, EmbeddedSinkOptions options,
                                   const SinkFaults* faults, LegacyLayout layout)
    : connections_(std::move(connections)), opts_(std::move(options)) {
  const size_t n = connections_.size();
  for (size_t i = 0; i < n; ++i) {
    WriterOptions w = opts_.writer;
    // The default sink's writers keep their old names (spool files, logs).
    w.name = opts_.name == "chdb" ? std::to_string(i) : opts_.name + "-" + std::to_string(i);
    w.shard = static_cast<uint32_t>(i);
    w.shards = static_cast<uint32_t>(n);
    writers_.push_back(std::make_unique<EmbeddedWriter>(connections_[i].get(), caps, std::move(w),
                                                        stats_, faults, layout));
  }
}

ClickHousePlugin::~ClickHousePlugin() {
  Stop();
}

Status ClickHousePlugin::Start() {
  for (auto& w : writers_) w->Start();
  return Status::Ok();
}

void ClickHousePlugin::Stop() {
  for (auto& w : writers_) w->Stop();
  for (auto& c : connections_) c->Close();
}

bool ClickHousePlugin::BlockMembers(std::string_view key, const SpanBatch& batch,
                                    std::vector<uint32_t>* idx) const {
  InsertKey k;
  if (!k.Decode(key)) return false;
  idx->clear();
  for (uint32_t i = 0; i < batch.span_count(); ++i) {
    if (k.Holds(batch, i)) idx->push_back(i);
  }
  return true;
}

size_t ClickHousePlugin::BlockShard(std::string_view key) const {
  // To the writer that sealed it, as before (any could: the token makes it once).
  InsertKey k;
  return k.Decode(key) && k.shard < writers_.size() ? k.shard : 0;
}

bool ClickHousePlugin::Select(const SpanBatch& b, std::vector<uint32_t>* idx) const {
  if (opts_.cluster_shards <= 1) return false;
  idx->clear();
  for (uint32_t i = 0; i < b.span_count(); ++i) {
    if (ClusterShardOf(b.spans.trace_id[i], opts_.cluster_shards) == opts_.cluster_shard) {
      idx->push_back(i);
    }
  }
  return true;
}

void ClickHousePlugin::Keep(sink::QueuedBatch& item) const {
  if (opts_.cluster_shards <= 1) return;
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

void ClickHousePlugin::Add(size_t shard, sink::QueuedBatch item) {
  writers_[shard]->Add(std::move(item));
}

void ClickHousePlugin::TakeDue(size_t shard, bool /*idle*/, bool flush,
                               std::vector<std::unique_ptr<sink::Write>>* out) {
  writers_[shard]->TakeDue(flush, out);
}

std::chrono::milliseconds ClickHousePlugin::NextDue(size_t shard) const {
  return writers_[shard]->NextDue();
}

Status ClickHousePlugin::WriteOnce(size_t shard, sink::Write& w) {
  return writers_[shard]->WriteOnce(static_cast<Flight&>(w));
}

sink::Failure ClickHousePlugin::Classify(const Status& st) const {
  switch (ClassifyInsertError(st)) {
    case InsertError::kRetryable:
      return sink::Failure::kRetryable;
    case InsertError::kPermanent:
      return sink::Failure::kPermanent;
    case InsertError::kUnknown:
      break;
  }
  return sink::Failure::kUnknown;
}

Status ClickHousePlugin::DeadLetter(size_t shard, sink::Write& w, const Status& why) {
  return writers_[shard]->DeadLetter(static_cast<Flight&>(w), why);
}

void ClickHousePlugin::Finished(size_t shard, sink::Write& w, bool stored) {
  writers_[shard]->Finished(static_cast<Flight&>(w), stored);
}

void ClickHousePlugin::AppendMetrics(const std::string& name, PromText& out) const {
  const std::string label = PromText::Label("sink", name);
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
}

std::unique_ptr<sink::RuntimeSink> MakeClickHouseSink(
    std::vector<std::unique_ptr<SqlConnection>> connections, Capabilities caps,
    EmbeddedSinkOptions options, const SinkFaults* faults, LegacyLayout layout) {
  sink::RuntimeOptions r;
  r.name = options.name;
  r.queue_bytes = options.queue_bytes;
  r.retry.backoff_max = options.writer.max_backoff;
  r.retry.unknown_attempts = options.writer.unknown_error_attempts;
  r.retry.stopping_attempts = options.writer.shutdown_retries;
  r.retry.drain_timeout = std::chrono::milliseconds::max();
  return std::make_unique<sink::RuntimeSink>(
      std::make_unique<ClickHousePlugin>(std::move(connections), caps, std::move(options), faults,
                                         layout),
      std::move(r));
}

const WriterStats& ClickHouseStats(const sink::RuntimeSink& sink) {
  return static_cast<const ClickHousePlugin&>(sink.plugin()).writer_stats();
}

}  // namespace spanhouse::storage
