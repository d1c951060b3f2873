// A SpanReader in front of the store's: answers by trace id and searches
// with the recent spans held in memory (recent_traces.h) merged in, so a
// trace is whole the moment its request is answered, not once the writer
// has stored it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/prom_text.h"
#include "query/recent_traces.h"
#include "query/span_reader.h"

namespace spanhouse::query {

// Appends to `out` the spans of `from` that `out` does not hold yet (by trace
// and span id and kind: the halves of a Zipkin shared span share an id; the
// kind, unlike some other fields, reads back the same from every store);
// returns how many.
size_t AppendMissingSpans(const SpanBatch& from, SpanBatch* out);

struct RecentReaderOptions {
  // The store is written by this process alone, so a trace whose every span
  // was received after the index's horizon is all in memory and the store
  // need not be asked. (Not so on a shared cluster, nor with spans imported
  // behind the queue's back.)
  bool sole_writer = false;
  // How far a client's clock may run ahead of this machine's: a trace's
  // root must start this much after the horizon to be answered from memory
  // alone.
  std::chrono::milliseconds clock_skew{std::chrono::seconds(10)};
};

class RecentReader final : public ReaderInFront {
 public:
  RecentReader(SpanReader& store, RecentTraces& recent, RecentReaderOptions options);

  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override;
  Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) override;
  Status GetServices(std::vector<std::string>* out) override;
  Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                       std::vector<OperationInfo>* out) override;

  void AppendMetrics(PromText& out) const;

 private:
  RecentTraces& recent_;
  const RecentReaderOptions opts_;
  std::atomic<uint64_t> from_memory_{0};   // lookups answered without the store
  std::atomic<uint64_t> merged_spans_{0};  // spans the store did not have yet
};

}  // namespace spanhouse::query
