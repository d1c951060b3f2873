// GET /metrics: spanhouse's own counters in the Prometheus text exposition
// format (0.0.4). Per component and stage, as every component reports them:
// received, sent (accepted, written), dropped (rejected by reason, lost),
// errors; the bytes held in memory and queues; the insert latency as a
// histogram; and what the engine stores (parts, rows, bytes per table and
// disk).
#pragma once

#include <string>
#include <vector>

#include "common/memory_budget.h"
#include "common/prom_text.h"
#include "net/http_server.h"
#include "pipeline/dedup/dedup_index.h"
#include "pipeline/durable/durable_queue.h"
#include "pipeline/filter/span_filter.h"
#include "pipeline/sampling/head_sampler.h"
#include "pipeline/sampling/tail_sampler.h"
#include "pipeline/sampling/tail_window.h"
#include "receivers/intake/intake.h"
#include "sink/sink.h"
#include "storage/clickhouse/sql_connection.h"

namespace spanhouse::server {

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
  const pipeline::HeadSampler* head_sampler = nullptr;
  const pipeline::TailSampler* tail_sampler = nullptr;
  const pipeline::TailWindow* tail_window = nullptr;
  const MemoryBudget* budget = nullptr;
  std::vector<const sink::Sink*> sinks;
  const pipeline::durable::DurableQueue* queue = nullptr;
  const pipeline::DedupIndex* dedup = nullptr;
};

void AppendPipelineMetrics(const MetricsSources& sources, PromText& out);

// Active parts, rows and bytes per table and disk ("default" is the hot
// volume, "cold" or "cold_s3" the cold one), asked of the engine at each
// scrape (system.parts: metadata only). Nothing is appended if it fails.
// `disks`: the server has storage policies (else every part is on "default").
void AppendStorageMetrics(storage::SqlConnection& conn, std::string_view database, bool disks,
                          PromText& out);

}  // namespace spanhouse::server
