// What a receiver under test hands its requests to: a memory budget, a
// durable queue (with a log in a temporary directory, or without one) and one
// TestSink behind it, started, where every delivered batch lands.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "common/memory_budget.h"
#include "pipeline/durable/durable_queue.h"
#include "pipeline/durable/segment_log.h"
#include "pipeline/durable/sink_cursor.h"
#include "pipeline/filter/span_filter.h"
#include "receivers/intake/http_intake.h"
#include "testdata/test_sink.h"

namespace spanhouse::receivers {

// An HTTP receiver's listener on a free loopback port, one I/O thread.
inline HttpListenerOptions Listener() {
  HttpListenerOptions o;
  o.address = "127.0.0.1:0";
  o.threads = 1;
  return o;
}

// A directory of its own for the running test's log, removed before and
// after. Declared before whatever writes into it.
struct TestLogDir {
  explicit TestLogDir(std::string_view prefix)
      : path(::testing::TempDir() + std::string(prefix) + "-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()) {
    std::filesystem::remove_all(path);
  }
  ~TestLogDir() { std::filesystem::remove_all(path); }
  TestLogDir(const TestLogDir&) = delete;
  TestLogDir& operator=(const TestLogDir&) = delete;
  const std::string path;
};

struct PipelineOptions {
  size_t budget_bytes = size_t{1} << 30;
  size_t sink_bytes = size_t{64} << 20;  // the TestSink's queue
  // The log's directory; empty: no log (durable.enabled false).
  std::string log_dir{};
  bool fsync_always = false;
  uint64_t log_max_bytes = uint64_t{1} << 30;
  uint64_t segment_bytes = uint64_t{64} << 20;
  pipeline::SpanFilter* filter = nullptr;
  pipeline::durable::LogTestHooks hooks{};
};

// Members in destruction order: the queue goes first (its backlog stops
// pushing into the sink, its log is closed), then the sink (whose queued
// batches hold reservations), then the budget.
struct TestPipeline {
  explicit TestPipeline(PipelineOptions o = {})
      : budget(o.budget_bytes), sink("test", o.sink_bytes) {
    pipeline::durable::DurableOptions d;
    d.enabled = !o.log_dir.empty();
    d.log.dir = o.log_dir;
    d.log.fsync_always = o.fsync_always;
    d.log.max_bytes = o.log_max_bytes;
    d.log.segment_bytes = o.segment_bytes;
    const Status st =
        pipeline::durable::DurableQueue::Open(d, budget, o.filter, &queue, std::move(o.hooks));
    EXPECT_TRUE(st.ok()) << st.message();
    if (queue == nullptr) return;
    queue->AddSink(sink);
    // As serve does: the sinks first, then the queue (which replays to them).
    EXPECT_TRUE(sink.Start().ok());
    queue->Start();
  }
  // The sink's cursor (its backlog's counters).
  const pipeline::durable::CursorStats& cursor() const { return queue->cursors()[0]->stats(); }
  bool backlogged() const { return queue->cursors()[0]->backlogged(); }
  // Stops the backlog and closes the log; the sink and what it holds stay.
  void CloseQueue() {
    if (queue == nullptr) return;
    queue->StopBacklogs();
    queue.reset();
  }

  MemoryBudget budget;
  testdata::TestSink sink;
  std::unique_ptr<pipeline::durable::DurableQueue> queue;
};

}  // namespace spanhouse::receivers
