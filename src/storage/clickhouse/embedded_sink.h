// A ClickHouse sink: the sink runtime (sink/runtime.h) with the ClickHouse
// plugin below, one queue shard per connection (to the embedded chDB, or to
// a server over HTTP), each written by an EmbeddedWriter (embedded_writer.h).
// On a cluster each shard has a sink of its own, which takes only the traces
// its shard owns (cluster_shard.h): a slow or dead shard holds back only
// itself.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sink/plugin.h"
#include "sink/runtime.h"
#include "storage/clickhouse/embedded_writer.h"
#include "storage/clickhouse/schema.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::storage {

struct EmbeddedSinkOptions {
  std::string name = "chdb";
  // The bound on the bytes its queue holds. What bounds the pipeline is the
  // memory budget; a bound no smaller than it means the sink never refuses.
  size_t queue_bytes = size_t{1} << 30;
  // Every writer's options; name, shard and shards are set per writer.
  WriterOptions writer;
  // On a cluster of cluster_shards shards, the one this sink writes.
  uint32_t cluster_shard = 0;
  uint32_t cluster_shards = 1;
};

class ClickHousePlugin final : public sink::Plugin {
 public:
  // One writer per connection (taken; closed by Stop).
  ClickHousePlugin(std::vector<std::unique_ptr<SqlConnection>> connections, Capabilities caps,
                   EmbeddedSinkOptions options, const SinkFaults* faults = nullptr,
                   LegacyLayout layout = {});
  ~ClickHousePlugin() override;

  size_t shards() const override { return writers_.size(); }
  Status Start() override;
  void Stop() override;
  WriterStats& stats() override { return stats_; }
  const WriterStats& writer_stats() const { return stats_; }

  bool Select(const SpanBatch& batch, std::vector<uint32_t>* idx) const override;
  void Keep(sink::QueuedBatch& item) const override;
  bool BlockMembers(std::string_view key, const SpanBatch& batch,
                    std::vector<uint32_t>* idx) const override;
  size_t BlockShard(std::string_view key) const override;

  void Add(size_t shard, sink::QueuedBatch item) override;
  void TakeDue(size_t shard, bool idle, bool flush,
               std::vector<std::unique_ptr<sink::Write>>* out) override;
  std::chrono::milliseconds NextDue(size_t shard) const override;

  Status WriteOnce(size_t shard, sink::Write& w) override;
  sink::Failure Classify(const Status& st) const override;
  Status DeadLetter(size_t shard, sink::Write& w, const Status& why) override;
  void Finished(size_t shard, sink::Write& w, bool stored) override;

  void AppendMetrics(const std::string& name, PromText& out) const override;

 private:
  std::vector<std::unique_ptr<SqlConnection>> connections_;
  const EmbeddedSinkOptions opts_;
  WriterStats stats_;
  std::vector<std::unique_ptr<EmbeddedWriter>> writers_;
};

// The ClickHouse sink over `connections`: its retry policy from
// options.writer (no drain deadline: a failing insert is retried
// writer.shutdown_retries times once stopping).
std::unique_ptr<sink::RuntimeSink> MakeClickHouseSink(
    std::vector<std::unique_ptr<SqlConnection>> connections, Capabilities caps,
    EmbeddedSinkOptions options, const SinkFaults* faults = nullptr, LegacyLayout layout = {});

// The writers' own counters of a sink MakeClickHouseSink made.
const WriterStats& ClickHouseStats(const sink::RuntimeSink& sink);

}  // namespace spanhouse::storage
