// A ClickHouse sink: spans stored by `writers` writer threads
// (embedded_writer.h), each draining one shard of the sink's queue (split by
// trace id) over a connection of its own: to the embedded chDB, or to a
// server over HTTP. On a cluster each shard has a sink of its own, which
// takes only the traces its shard owns (cluster_shard.h) and acknowledges
// the rest at once: a slow or dead shard holds back only itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sink/sharded_queue.h"
#include "sink/sink.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

struct EmbeddedSinkOptions {
  std::string name = "chdb";
  // Each shard's bound on queued bytes. What bounds the pipeline is the
  // memory budget; a bound no smaller than it means a shard never refuses.
  size_t queue_bytes = size_t{1} << 30;
  // Every writer's options; name, shard, shards and cursor are set per writer.
  WriterOptions writer;
  // On a cluster of cluster_shards shards, the one this sink writes.
  uint32_t cluster_shard = 0;
  uint32_t cluster_shards = 1;
};

class EmbeddedSink final : public sink::Sink {
 public:
  // One writer per connection (taken; closed by Drain).
  EmbeddedSink(std::vector<std::unique_ptr<SqlConnection>> connections, Capabilities caps,
               EmbeddedSinkOptions options, const SinkFaults* faults = nullptr,
               LegacyLayout layout = {});
  ~EmbeddedSink() override;

  const std::string& name() const override { return opts_.name; }
  void Attach(sink::BlockLedger& cursor) override { cursor_ = &cursor; }
  Status Start() override;
  bool BlockMembers(std::string_view key, const SpanBatch& batch,
                    std::vector<uint32_t>* idx) const override;
  bool Select(const SpanBatch& batch, std::vector<uint32_t>* idx) const override;
  Status Push(sink::QueuedBatch& item) override;
  void Drain() override;
  const sink::SinkStats& stats() const override { return stats_; }
  const WriterStats& writer_stats() const { return stats_; }
  size_t queued_bytes() const override { return queue_.bytes(); }
  void AppendMetrics(PromText& out) const override;

 private:
  // Keeps the spans of the traces this sink's cluster shard owns.
  void KeepOwnShard(sink::QueuedBatch& item) const;

  std::vector<std::unique_ptr<SqlConnection>> connections_;
  const Capabilities caps_;
  const EmbeddedSinkOptions opts_;
  const SinkFaults* faults_;
  const LegacyLayout layout_;
  sink::BlockLedger* cursor_ = nullptr;
  sink::ShardedQueue queue_;
  WriterStats stats_;
  std::vector<std::unique_ptr<EmbeddedWriter>> writers_;
};

}  // namespace spanhouse::storage
