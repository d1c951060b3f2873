// GET /metrics: spanhouse's own counters in the Prometheus text exposition
// format (0.0.4). Per component and stage, as every component reports them:
// received, sent (accepted, written), dropped (rejected by reason, lost),
// errors; the bytes held in memory and queues; the insert latency as a
// histogram; and what the engine stores (parts, rows, bytes per table and
// disk).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/filter/span_filter.h"
#include "pipeline/memory_budget.h"
#include "pipeline/queue/sharded_queue.h"
#include "receivers/otlp_http/otlp_http_receiver.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/embedded_writer.h"

namespace spanhouse::server {

// Builds the exposition: each family once, with its HELP and TYPE lines,
// then its samples (a scraper rejects a family whose samples are split).
class PromText {
 public:
  // `type`: counter, gauge or histogram. A counter's name ends in _total.
  void Family(std::string_view name, std::string_view type, std::string_view help);
  // `labels` as `k="v",k2="v2"` (values escaped with Label), or empty.
  void Sample(std::string_view name, std::string_view labels, uint64_t value);
  // A family of one sample.
  void One(std::string_view name, std::string_view type, std::string_view help,
           std::string_view labels, uint64_t value) {
    Family(name, type, help);
    Sample(name, labels, value);
  }
  // `k="v"` with v escaped as the format asks (\\, \", \n).
  static std::string Label(std::string_view key, std::string_view value);
  std::string& text() { return out_; }

 private:
  std::string out_;
};

// The components /metrics reads; each may be null (left out).
struct MetricsSources {
  // One per receiver, labelled receiver="otlp_http|otlp_grpc|zipkin".
  struct Receiver {
    std::string name;
    const receivers::IntakeStats* stats = nullptr;
    const net::HttpServerStats* http = nullptr;  // its HTTP listener's own refusals, if any
  };
  std::vector<Receiver> receivers;
  const pipeline::FilterStats* filter = nullptr;
  const pipeline::MemoryBudget* budget = nullptr;
  const pipeline::ShardedQueue* queue = nullptr;
  const std::vector<std::unique_ptr<storage::EmbeddedWriter>>* writers = nullptr;
  // Families of components wired in beside these (a durable queue, auth):
  // each call appends whole families.
  std::vector<std::function<void(PromText&)>> extra;
};

void AppendPipelineMetrics(const MetricsSources& sources, PromText& out);

// Active parts, rows and bytes per table and disk ("default" is the hot
// volume, "cold" or "cold_s3" the cold one), asked of the engine at each
// scrape (system.parts: metadata only). Nothing is appended if it fails.
void AppendStorageMetrics(storage::ChdbConnection& conn, PromText& out);

}  // namespace spanhouse::server
