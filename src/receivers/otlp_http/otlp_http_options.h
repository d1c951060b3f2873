// The OTLP/HTTP listener's options; the Zipkin listener takes the same.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "net/http_server.h"
#include "pipeline/durable/segment_log.h"
#include "receivers/durable/spill_backlog.h"

namespace spanhouse::receivers {

struct OtlpHttpOptions {
  std::string address = "127.0.0.1:4318";
  size_t max_body_bytes = 20u << 20;  // after decompression
  // More spans in one request: 413 (the client should send smaller batches).
  size_t max_spans_per_request = 100000;
  int threads = 2;
  // How long a request may wait for memory before it is answered 429.
  std::chrono::milliseconds memory_wait{250};
  net::HttpAuthorizer authorize{};               // empty: no token needed
  std::shared_ptr<const net::TlsContext> tls{};  // set: HTTPS only
  // The durable queue (null: none). Each accepted request is appended to it
  // as one record before the 200, which waits for the record to be durable
  // by the log's fsync policy, for as long as that takes: there is no
  // timeout, since a 503 after one would make the client send again spans
  // that are queued and will be stored (duplicates). The sync failing, or
  // the log closing first, answers 503.
  pipeline::durable::SegmentLog* log = nullptr;
  // With the log: where a request goes once logged when the memory budget
  // is spent (or others already wait there), instead of a 429 (null: 429).
  SpillBacklog* spill = nullptr;
};

}  // namespace spanhouse::receivers
