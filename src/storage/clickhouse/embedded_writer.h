// The sink writer for embedded ClickHouse: one thread that drains a
// SpanQueue and inserts in large batches.
//
// Each dequeued SpanBatch is encoded at once as one Native block appended to
// a pending buffer; the buffer is inserted when it holds enough rows or
// bytes, or when its oldest span has waited long enough. The insert reads
// the blocks from a spool file through the file() table function, which
// design.md measured as far cheaper than data inline in the query text.
// A failed insert is retried with backoff and the queue is not drained
// meanwhile, so a slow or failing store turns into back-pressure (429s).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "pipeline/queue/span_queue.h"
#include "storage/clickhouse/chdb.h"
#include "storage/clickhouse/schema.h"

namespace spanhouse::storage {

struct WriterOptions {
  size_t max_rows = 200000;
  size_t max_bytes = 64u << 20;
  std::chrono::milliseconds max_age{1000};
  std::string spool_dir;  // where insert files are written
  // At shutdown, how many times a failing insert is retried before the
  // pending spans are given up (and logged as lost).
  int shutdown_retries = 5;
};

struct WriterStats {
  std::atomic<uint64_t> rows_written{0};
  std::atomic<uint64_t> inserts{0};
  std::atomic<uint64_t> insert_errors{0};
  std::atomic<uint64_t> rows_lost{0};
};

class EmbeddedWriter {
 public:
  EmbeddedWriter(ChdbConnection& conn, Capabilities caps, pipeline::SpanQueue& queue,
                 WriterOptions options);
  ~EmbeddedWriter();
  void Start();
  // Returns once the queue is closed and drained and the last insert is done.
  void Join();
  const WriterStats& stats() const { return stats_; }

 private:
  void Run();
  bool Flush(bool shutting_down);

  ChdbConnection& conn_;
  const Capabilities caps_;
  pipeline::SpanQueue& queue_;
  const WriterOptions opts_;
  std::thread thread_;
  WriterStats stats_;
  std::string pending_;  // Native blocks, owned by the writer thread
  size_t pending_rows_ = 0;
  std::chrono::steady_clock::time_point pending_since_;
};

}  // namespace spanhouse::storage
