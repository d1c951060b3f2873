// The read side of a migration: two stores that hold the same spans (the
// ClickHouse primary and the OpenSearch cluster being migrated from), one of
// them read, switched at run time without a restart, and the other answering
// when the one read fails or is slow.
//
// Every call goes to the current source. With fallback on, a call that fails
// with a store error (unavailable, internal) or has not answered within
// `fallback_after` is answered by the other source instead; the slow call
// finishes in the background (bounded by its store's own timeout) and its
// answer is dropped. Which source answered, and why a fallback happened, is
// kept per thread for the caller (the query API puts it in the answer's
// X-Spanhouse-Read-Source and X-Spanhouse-Read-Fallback headers).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/prom_text.h"
#include "query/span_reader.h"

namespace spanhouse::query {

struct ReadSource {
  std::string name;  // "clickhouse", "opensearch"
  SpanReader* reader = nullptr;
};

// What the last call on this thread read from.
struct ReadInfo {
  std::string source;    // the source that answered ("" before any call)
  std::string fallback;  // why the current source did not ("" when it did)
};

class ReadSwitch final : public SpanReader {
 public:
  // `sources`: one or two; `current` indexes them.
  ReadSwitch(std::vector<ReadSource> sources, size_t current, bool fallback,
             std::chrono::milliseconds fallback_after);
  // Waits for calls still running in the background.
  ~ReadSwitch() override;

  // Switches reads to the source named `name`; kInvalidArgument naming the
  // sources when there is none of that name.
  Status SwitchTo(const std::string& name);
  const std::string& current() const;
  bool fallback() const { return fallback_.load(); }
  void set_fallback(bool on) { fallback_.store(on); }
  std::vector<std::string> sources() const;
  // The reader of the source named `name` (null: none), for the admin
  // endpoints that read one store on purpose.
  SpanReader* Source(const std::string& name) const;

  // This thread's last call, then cleared.
  static ReadInfo TakeInfo();
  void AppendMetrics(PromText& out) const;

  Status GetTrace(const TraceId& id, SpanBatch* out) override;
  Status GetTraces(const std::vector<TraceId>& ids, SpanBatch* out) override;
  Status FindTraceIds(const TraceQuery& query, std::vector<TraceId>* out) override;
  Status GetServices(std::vector<std::string>* out) override;
  Status GetOperations(const std::string& service, bool any_kind, uint8_t kind,
                       std::vector<OperationInfo>* out) override;
  Status GetDependencies(uint64_t from_s, uint64_t to_s, std::vector<DependencyLink>* out) override;
  Status GetRedSeries(const RedQuery& query, std::vector<RedSeries>* out) override;
  Status GetRedSummary(const RedSummaryQuery& query, std::vector<RedSummaryRow>* out) override;
  Status CountSpansWithAttr(AttrOwner owner, const std::string& key, const std::string& value,
                            uint64_t* count) override;

 private:
  // Runs `call(reader, out)` on the current source, falling back as above.
  template <typename T, typename Call>
  Status Run(T* out, const Call& call);

  const std::vector<ReadSource> sources_;
  std::atomic<size_t> current_;
  std::atomic<bool> fallback_;
  const std::chrono::milliseconds fallback_after_;

  // Counters per source: calls answered, and fallbacks away from it.
  struct Counters {
    std::atomic<uint64_t> answered{0};
    std::atomic<uint64_t> fallbacks_failed{0};
    std::atomic<uint64_t> fallbacks_slow{0};
  };
  std::vector<Counters> counters_;

  std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;  // background calls; guarded by mu_
};

}  // namespace spanhouse::query
