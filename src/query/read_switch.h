// The read side of a migration: two stores that hold the same spans (the
// ClickHouse primary and the OpenSearch cluster being migrated from), one of
// them read, switched at run time without a restart, and the other answering
// when the one read fails or is slow.
//
// Every call goes to the current source. With fallback on, a call that fails
// with a store error (unavailable, internal) or has not answered within
// `fallback_after` is answered by the other source instead; the slow call
// finishes in the background (bounded by its store's own timeout) and its
// answer is dropped.
//
// With fill_gaps on (during a migration, while the other store is still
// written), a lookup by trace id also asks the other source at once, beside
// the current one, and adds the spans the current answer lacks, each once: a
// trace the backfill has not copied (whole or in part) is still whole. The
// other's answer is waited for until `fallback_after` after the lookup began;
// later or failed, the current store's answer stands and the caller is told.
//
// What each call read from is kept per thread, gathered over the calls of one
// request until taken, for the caller (the query API puts it in the answer's
// X-Spanhouse-Read-* headers).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
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

// What the calls on this thread since the last TakeInfo read from.
struct ReadInfo {
  std::string source;    // the sources that answered, ", "-separated ("" before any call)
  std::string fallback;  // why the current source did not ("" when it did)
  // The source that added spans to a lookup, and how many it added.
  std::string completed_from;
  uint64_t completed_spans = 0;
  std::string not_completed;  // why a lookup may lack spans the other source holds
};

class ReadSwitch final : public SpanReader {
 public:
  // `sources`: one or two; `current` indexes them.
  ReadSwitch(std::vector<ReadSource> sources, size_t current, bool fallback,
             std::chrono::milliseconds fallback_after, bool fill_gaps = false);
  // Waits for calls still running in the background.
  ~ReadSwitch() override;

  // Switches reads to the source named `name`; kInvalidArgument naming the
  // sources when there is none of that name.
  Status SwitchTo(const std::string& name);
  const std::string& current() const;
  bool fallback() const { return fallback_.load(); }
  void set_fallback(bool on) { fallback_.store(on); }
  bool fill_gaps() const { return fill_gaps_.load(); }
  void set_fill_gaps(bool on) { fill_gaps_.store(on); }
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
  // A call running on a thread of its own; outlives the caller who gave up on it.
  template <typename T>
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Status st;
    T out{};
  };
  template <typename T, typename Call>
  std::shared_ptr<Pending<T>> Start(size_t source, const Call& call);

  // Runs `call(reader, out)` on source `first`, falling back as above; the
  // fallback takes `other_call`'s answer when the other source was asked
  // already. Sets `*answered` to the source whose answer is returned.
  template <typename T, typename Call>
  Status Run(size_t first, T* out, const Call& call,
             const std::shared_ptr<Pending<T>>& other_call = nullptr, size_t* answered = nullptr);
  // Run, then the lookup completed from the other source as above.
  template <typename Call>
  Status Lookup(SpanBatch* out, const Call& call);

  const std::vector<ReadSource> sources_;
  std::atomic<size_t> current_;
  std::atomic<bool> fallback_;
  const std::chrono::milliseconds fallback_after_;
  std::atomic<bool> fill_gaps_;

  // Counters per source: calls answered, fallbacks away from it, lookups it
  // completed (and their spans), and lookups it could not complete.
  struct Counters {
    std::atomic<uint64_t> answered{0};
    std::atomic<uint64_t> fallbacks_failed{0};
    std::atomic<uint64_t> fallbacks_slow{0};
    std::atomic<uint64_t> completed{0};
    std::atomic<uint64_t> completed_spans{0};
    std::atomic<uint64_t> not_completed_failed{0};
    std::atomic<uint64_t> not_completed_slow{0};
  };
  std::vector<Counters> counters_;

  std::mutex mu_;
  std::condition_variable idle_;
  int in_flight_ = 0;  // background calls; guarded by mu_
};

}  // namespace spanhouse::query
