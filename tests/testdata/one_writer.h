// A ClickHouse sink of one writer over a borrowed connection, made as serve
// makes its sinks (MakeClickHouseSink), for tests that drive one writer:
// what they push is written; Close drains it.
#pragma once

#include <memory>
#include <utility>

#include "storage/clickhouse/embedded_sink.h"

namespace spanhouse::testdata {

class OneWriter {
 public:
  OneWriter(storage::SqlConnection* conn, const storage::Capabilities& caps,
            storage::WriterOptions o, const storage::SinkFaults* faults = nullptr,
            storage::LegacyLayout layout = {})
      : sink_(storage::MakeClickHouseSink(storage::Borrow(conn), caps, Options(std::move(o)),
                                          faults, layout)) {
    started_ = sink_->Start();
  }
  ~OneWriter() { Close(); }
  OneWriter(const OneWriter&) = delete;
  OneWriter& operator=(const OneWriter&) = delete;

  const Status& started() const { return started_; }
  Status Push(sink::QueuedBatch& item) { return sink_->Push(item); }
  Status Push(std::unique_ptr<SpanBatch> b) {
    sink::QueuedBatch item;
    item.batch = std::move(b);
    return sink_->Push(item);
  }
  // Writes what it holds and stops (once).
  void Close() { sink_->Drain(); }
  const storage::WriterStats& stats() const { return storage::ClickHouseStats(*sink_); }
  sink::RuntimeSink& sink() { return *sink_; }

 private:
  static storage::EmbeddedSinkOptions Options(storage::WriterOptions o) {
    storage::EmbeddedSinkOptions so;
    so.writer = std::move(o);
    so.queue_bytes = size_t{1} << 34;  // the tests' own bounds are their budgets
    return so;
  }
  std::unique_ptr<sink::RuntimeSink> sink_;
  Status started_;
};

}  // namespace spanhouse::testdata
