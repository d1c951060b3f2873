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

class RecentReader final : public SpanReader {
 public:
  RecentReader(SpanReader& store, RecentTraces& recent, RecentReaderOptions options);

  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override;
  Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) override;

  Status GetServices(std::vector<std::string>* out) override;
  Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                       std::vector<OperationInfo>* out) override;
  Status GetDependencies(uint64_t from_s, uint64_t to_s,
                         std::vector<DependencyLink>* out) override {
    return store_.GetDependencies(from_s, to_s, out);
  }
  Status GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) override {
    return store_.GetRedSeries(query, out);
  }
  Status GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) override {
    return store_.GetRedSummary(query, out);
  }
  Status CountSpans(const SpanCountQuery& query, std::vector<SpanCountRow>* out) override {
    return store_.CountSpans(query, out);
  }
  Status ListSpans(const SpanIdQuery& query, std::vector<SpanKey>* out) override {
    return store_.ListSpans(query, out);
  }
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override {
    return store_.CountSpansWithAttr(owner, key, value, count);
  }

  void AppendMetrics(PromText& out) const;

 private:
  SpanReader& store_;
  RecentTraces& recent_;
  const RecentReaderOptions opts_;
  std::atomic<uint64_t> from_memory_{0};   // lookups answered without the store
  std::atomic<uint64_t> merged_spans_{0};  // spans the store did not have yet
};

}  // namespace spanhouse::query
