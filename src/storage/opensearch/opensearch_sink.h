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
// Its own pace: `workers` shards of its queue (bounded by queue_bytes; full
// -> the durable queue keeps the rest on disk for it), one _bulk of up to
// bulk_spans spans each. Per item: 2xx and 409 are done;
// 429, 5xx and a cluster that cannot be reached are retried with backoff
// (only the items that failed), for as long as it takes; any other refusal
// (a mapping error) goes to the dead letter
// (<dead_letter_dir>/opensearch.ndjson: one line per document with the
// reason), counted. A request's ticket is acknowledged once all its spans
// are done, so a dead OpenSearch holds back only this sink.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "sink/sink.h"
#include "storage/opensearch/index_layout.h"
#include "storage/opensearch/index_templates.h"
#include "storage/opensearch/opensearch_client.h"

namespace spanhouse::storage::opensearch {

struct OpenSearchSinkOptions {
  std::string name = "opensearch";
  IndexLayout layout;         // where the documents go
  TemplateOptions templates;  // its index_prefix is set from the layout's
  // Before the first write: put the index templates, and with aliases create
  // the first index behind them when the write alias is missing (as Jaeger's
  // es-rollover init does).
  bool create_templates = true;
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

// The sink: a plug-in of the sink runtime (sink/runtime.h), which owns its
// queue (`workers` shards by trace id), threads, retries, drain and metrics.
std::unique_ptr<sink::Sink> MakeOpenSearchSink(std::shared_ptr<OpenSearchClient> client,
                                               OpenSearchSinkOptions options);

// With aliases: when the write alias of `kind` is missing, creates the first
// index of the series ("<base>000001") with the read and write aliases on it.
Status EnsureAliases(OpenSearchClient& client, const IndexLayout& layout, IndexKind kind);

}  // namespace spanhouse::storage::opensearch
