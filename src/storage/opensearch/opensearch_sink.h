// A sink that writes Jaeger-format documents (jaeger_document.h) to an
// OpenSearch or Elasticsearch cluster with _bulk, so a team's Jaeger query
// service keeps reading while spanhouse takes over (dual-write).
//
// Idempotent by content: each span is a `create` with _id = trace id + span
// id, so a retried or replayed write is refused per item with 409, which
// counts as written. It therefore never seals blocks: after a crash the
// durable queue hands it again whatever it had not acknowledged, and writing
// that again is harmless.
//
// Its own pace: `workers` threads take what Push queued (bounded by
// queue_bytes; full -> the durable queue keeps the rest on disk for it), one
// _bulk of up to bulk_spans spans each. Per item: 2xx and 409 are done;
// 429, 5xx and a cluster that cannot be reached are retried with backoff
// (only the items that failed), for as long as it takes; any other refusal
// (a mapping error) goes to the dead letter
// (<dead_letter_dir>/opensearch.ndjson: one line per document with the
// reason), counted. A request's ticket is acknowledged once all its spans
// are done, so a dead OpenSearch holds back only this sink.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "pipeline/queue/span_queue.h"
#include "sink/sink.h"
#include "storage/opensearch/index_templates.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::storage::opensearch {

struct OpenSearchSinkOptions {
  std::string name = "opensearch";
  std::string index_prefix;
  TemplateOptions templates;     // its index_prefix is set from index_prefix
  bool create_templates = true;  // put the index templates before the first write
  size_t queue_bytes = 64u << 20;
  size_t bulk_spans = 5000;  // spans per _bulk request at most
  int workers = 2;
  std::string dead_letter_dir;
  // Backoff between retries of a failed write: doubles from min to max, with jitter.
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{10000};
  // Drain: how long it keeps retrying what it holds before leaving it in the
  // durable queue for the next start.
  std::chrono::milliseconds drain_timeout{15000};
};

class OpenSearchSink final : public sink::Sink {
 public:
  OpenSearchSink(std::shared_ptr<OpenSearchClient> client, OpenSearchSinkOptions options);
  ~OpenSearchSink() override;

  const std::string& name() const override { return opts_.name; }
  void Attach(pipeline::durable::SinkCursor& cursor) override { cursor_ = &cursor; }
  Status Start() override;
  Status Push(pipeline::QueuedBatch& item) override;
  void Drain() override;
  const sink::SinkStats& stats() const override { return stats_; }
  size_t queued_bytes() const override { return queue_.bytes(); }
  void AppendMetrics(PromText& out) const override;

 private:
  struct Work;
  void Loop(size_t worker);
  // Writes `work` until every span is done or the sink gives up (draining
  // past its deadline): true when done.
  bool Write(Work& work);
  Status EnsureTemplates();
  // Seconds the oldest request not written yet has waited, held by this sink
  // or waiting for it in the durable queue's backlog (0: none).
  double LagSeconds() const;

  std::shared_ptr<OpenSearchClient> client_;
  const OpenSearchSinkOptions opts_;
  pipeline::durable::SinkCursor* cursor_ = nullptr;
  pipeline::SpanQueue queue_;
  sink::SinkStats stats_;
  std::atomic<uint64_t> items_retried_{0};
  std::atomic<uint64_t> services_written_{0};
  std::atomic<bool> templates_ok_{false};
  std::atomic<bool> draining_{false};
  std::chrono::steady_clock::time_point drain_deadline_;

  mutable std::mutex mu_;
  std::unordered_set<std::string> services_;  // "<index>/<id>" written; guarded by mu_
  std::vector<std::chrono::steady_clock::time_point> holding_since_;  // per worker; guarded
  std::vector<std::thread> threads_;
};

}  // namespace spanhouse::storage::opensearch
